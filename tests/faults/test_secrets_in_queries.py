"""A server URL's query string and user information: secrets in the query are masked wherever the URL is
shown (`config show`, errors); the query is sent as a query, not spliced into the path; credentials in the
URL are refused rather than sent as Basic auth in place of the configured bearer key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clinrag.core.errors import ConfigError
from clinrag.core.remote import RetryPolicy
from clinrag.embed.openai_compat import OpenAIEmbedder
from clinrag.llm.openai_compat import OpenAICompatible
from tests.app.test_cli import invoke_cli
from tests.embed.embeddings_server import EmbeddingsServer
from tests.faults.test_unwritable_places import _one_line_error
from tests.loopback import free_port
from tests.openai_server import ScriptedServer, chat_body, scripted_model


def test_config_show_masks_secrets_in_query_strings(tmp_path: Path) -> None:
    env = {
        "CLINRAG_LLM_BASE_URL": "http://llm.example/v1?api_key=sk-query-1",
        "CLINRAG_EMBED_BASE_URL": "https://embed.example/v1?access_token=tok-2&region=eu",
        "CLINRAG_JUDGE_BASE_URL": "https://judge.example/v1?sig=sig-3&client_secret=cs-4",
    }
    result = invoke_cli("config", "show", env=env)
    assert result.returncode == 0, result.stderr
    for secret in ("sk-query-1", "tok-2", "sig-3", "cs-4"):
        assert secret not in result.stdout
    shown = json.loads(result.stdout)
    assert shown["llm_base_url"] == "http://llm.example/v1?api_key=***"
    assert shown["embed_base_url"] == "https://embed.example/v1?access_token=***&region=eu"
    assert shown["judge_base_url"] == "https://judge.example/v1?sig=***&client_secret=***"


@pytest.mark.parametrize("command", [["llm", "chat", "hi"], ["embed", "hi"]], ids=["chat", "embeddings"])
def test_model_unavailable_errors_mask_secrets_in_query_strings(command: list[str]) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1?api_key=sk-query-5"
    env = {
        "CLINRAG_LLM_BACKEND": "openai",
        "CLINRAG_LLM_MODEL": "m",
        "CLINRAG_LLM_BASE_URL": url,
        "CLINRAG_LLM_MAX_RETRIES": "0",
        "CLINRAG_EMBED_BACKEND": "openai",
        "CLINRAG_EMBED_MODEL": "e",
        "CLINRAG_EMBED_BASE_URL": url,
    }
    result = invoke_cli(*command, env=env)
    line = _one_line_error(result, "ModelUnavailableError", "/v1?api_key=***")
    assert "sk-query-5" not in result.stderr + result.stdout, line


def test_chat_requests_keep_the_query_and_the_bearer_key(server: ScriptedServer) -> None:
    server.replies = [(200, chat_body("fine"), 0.0)]
    model = scripted_model(
        server, base_url=f"{server.base_url}?api-version=2024-06&api_key=q-6", api_key="sk-bearer"
    )
    assert model.chat("hi").text == "fine"
    request = server.requests[0]
    assert request["path"] == "/v1/chat/completions?api-version=2024-06&api_key=q-6"
    assert request["auth"] == "Bearer sk-bearer"


@pytest.mark.integration
def test_embedding_requests_keep_the_query_and_the_bearer_key() -> None:
    served = EmbeddingsServer()
    try:
        embedder = OpenAIEmbedder(model="e", base_url=f"{served.base_url}?api-version=7", api_key="sk-e")
        assert embedder.encode(["fever"]).shape == (1, 27)
        assert (served.requests[0]["path"], served.requests[0]["auth"]) == (
            "/v1/embeddings?api-version=7",
            "Bearer sk-e",
        )
    finally:
        served.close()


@pytest.mark.parametrize("userinfo", ["alice:pw-7@", "tok-8@"], ids=["password", "lone-name"])
def test_credentials_in_a_base_url_are_refused(server: ScriptedServer, userinfo: str) -> None:
    server.replies = [(200, chat_body("fine"), 0.0)]
    url = server.base_url.replace("http://", f"http://{userinfo}")
    for build in (
        lambda: OpenAICompatible(model="m", base_url=url, api_key="sk-bearer", retry=RetryPolicy(0)),
        lambda: OpenAIEmbedder(model="e", base_url=url, api_key="sk-bearer"),
    ):
        with pytest.raises(ConfigError, match=r"carries credentials .*CLINRAG_LLM_API_KEY") as refused:
            build()
        assert "pw-7" not in str(refused.value) and "tok-8" not in str(refused.value)
    env = {"CLINRAG_LLM_BACKEND": "openai", "CLINRAG_LLM_MODEL": "m", "CLINRAG_LLM_BASE_URL": url}
    _one_line_error(invoke_cli("llm", "chat", "hi", env={**env, "CLINRAG_LLM_API_KEY": "sk"}), "ConfigError")
    assert server.requests == []  # nothing was sent, with Basic auth or otherwise
