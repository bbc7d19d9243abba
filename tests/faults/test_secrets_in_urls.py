"""Credentials inside URL-valued settings are masked by `clinrag config show`; the graph server clinrag
starts on TCP (a data directory too deep for a unix socket) requires a password nobody else can read."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
import redis

from clinrag.core.settings import Settings, redact_url
from clinrag.graph.falkordb_server import AUTH_FILE, STATE_FILE
from clinrag.graph.falkordb_store import FalkorDBStore
from clinrag.graph.store import redact
from tests.app.test_cli import invoke_cli

URLS = {
    "CLINRAG_LLM_BASE_URL": "http://alice:llm-pass-1@llm.example:8000/v1",
    "CLINRAG_EMBED_BASE_URL": "https://bob:embed-pass-2@embed.example/v1",
    "CLINRAG_GRAPH_URI": "bolt://neo4j:graph-pass-3@db.example:7687",
    "CLINRAG_JUDGE_BASE_URL": "http://carol:judge-pass-4@judge.example/v1",
}


def test_config_show_masks_passwords_in_urls(tmp_path: Path) -> None:
    result = invoke_cli(
        "config", "show", env={**URLS, "CLINRAG_HOME": str(tmp_path), "CLINRAG_LLM_API_KEY": "sk-key-5"}
    )
    assert result.returncode == 0, result.stderr
    for secret in ("llm-pass-1", "embed-pass-2", "graph-pass-3", "judge-pass-4", "sk-key-5"):
        assert secret not in result.stdout
    shown = json.loads(result.stdout)
    assert shown["llm_base_url"] == "http://alice:***@llm.example:8000/v1"
    assert shown["graph_uri"] == "bolt://neo4j:***@db.example:7687"
    assert shown["judge_base_url"] == "http://carol:***@judge.example/v1"


def test_redaction_leaves_other_values_alone() -> None:
    described = Settings(home=Path("/tmp/x"), llm_model="a@b://c").described()
    assert described["llm_model"] == "a@b://c"
    assert redact_url("redis://127.0.0.1:6379") == "redis://127.0.0.1:6379"
    assert redact_url("http://[broken@host") == "http://[broken@host"
    assert redact("redis://:pw@127.0.0.1:1") == "redis://:***@127.0.0.1:1"
    assert redact("redis://127.0.0.1:1?db=0&password=pw") == "redis://127.0.0.1:1?db=0&password=***"


@pytest.fixture
def long_home(tmp_path: Path) -> Path:
    home = tmp_path / ("h" * max(1, 104 - len(str(tmp_path)) - 1))
    assert len(str(home)) >= 104
    return home


@pytest.mark.integration
def test_graph_server_on_tcp_requires_a_password(long_home: Path) -> None:
    data = Settings(home=long_home).graph_data_dir
    with FalkorDBStore.embedded(data) as store:
        url = store.server.url
        assert url is not None and url.startswith("redis://127.0.0.1:") and "?password=" in url
        address, password = url.split("?password=")
        with pytest.raises(redis.AuthenticationError):
            redis.Redis.from_url(address, socket_timeout=5).ping()
        for name in (AUTH_FILE, STATE_FILE):
            assert stat.S_IMODE((data / name).stat().st_mode) == 0o600
        assert password not in store.url and password not in " ".join(_cmdline(store.server.pid))
        store.write("CREATE (:Disease {name: 'Asthma'})")
        assert store.query("MATCH (d:Disease) RETURN d.name AS name") == [{"name": "Asthma"}]
    # a second process joins the running server through the recorded, password-bearing URL
    with FalkorDBStore.embedded(data) as again:
        assert again.query("MATCH (d:Disease) RETURN d.name AS name") == [{"name": "Asthma"}]


def _cmdline(pid: int | None) -> list[str]:
    import psutil

    return psutil.Process(pid).cmdline() if pid else []
