import os
import subprocess
import sys

import pytest

from clinrag.core.errors import ConfigError
from clinrag.core.settings import load_settings


def test_defaults_are_the_embedded_offline_backends(isolated_home):
    settings = load_settings()
    assert settings.llm_backend == "embedded" and settings.embed_backend == "minilm-onnx"
    assert settings.home == isolated_home
    assert settings.llm_cache_path == isolated_home / "llm_cache.sqlite"


def test_toml_sections_flatten_and_env_wins(tmp_path, monkeypatch):
    config = tmp_path / "clinrag.toml"
    config.write_text(
        '[llm]\nbackend = "openai"\nmodel = "qwen"\nbase_url = "http://127.0.0.1:8000/v1"\n'
        "[embed]\nbatch_size = 16\n"
    )
    monkeypatch.setenv("CLINRAG_CONFIG", str(config))
    monkeypatch.setenv("CLINRAG_LLM_MODEL", "llama3")
    settings = load_settings()
    assert settings.llm_backend == "openai"
    assert settings.llm_model == "llama3"  # environment beats the file
    assert settings.embed_batch_size == 16
    assert load_settings(llm_model="mistral").llm_model == "mistral"  # explicit arguments beat both


def test_config_file_argument(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text("[cache]\nenabled = false\n")
    assert load_settings(config_file=config).cache_enabled is False


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[llm\nbackend = 1", "not valid TOML"),
        ('[llm]\nbakend = "openai"', "llm_bakend"),
        ("[llm]\ntimeout_s = -1", "llm_timeout_s"),
    ],
)
def test_bad_config_files_give_config_errors(tmp_path, content, message):
    config = tmp_path / "bad.toml"
    config.write_text(content)
    with pytest.raises(ConfigError, match=message):
        load_settings(config_file=config)


def test_backend_names_are_not_checked_when_settings_load(tmp_path):
    # The names are checked where the backends are built (tests/llm/test_factory.py): loading the settings
    # imports no module of clinrag.llm or clinrag.embed.
    config = tmp_path / "c.toml"
    config.write_text('[llm]\nbackend = "gpt"\n[embed]\nbackend = "word2vec"\n')
    code = (
        "import sys; from clinrag.core.settings import load_settings; "
        f"s = load_settings(config_file={str(config)!r}); "
        "assert (s.llm_backend, s.embed_backend) == ('gpt', 'word2vec'); "
        "loaded = sorted(m for m in sys.modules if m.startswith(('clinrag.llm', 'clinrag.embed'))); "
        "assert not loaded, loaded"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_missing_config_file(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_settings(config_file=tmp_path / "nope.toml")


def test_api_key_is_masked_when_shown(monkeypatch):
    monkeypatch.setenv("CLINRAG_LLM_API_KEY", "sk-secret-123")
    described = load_settings().described()
    assert "sk-secret-123" not in str(described)
    assert load_settings().llm_api_key.get_secret_value() == "sk-secret-123"


def test_passwords_in_a_list_of_graph_uris_are_masked_when_shown(monkeypatch):
    monkeypatch.setenv(
        "CLINRAG_API_GRAPH_URIS", "redis://user:pw123@127.0.0.1:6379,bolt://neo:s3cr3t@db:7687"
    )
    shown = load_settings().described()["api_graph_uris"]
    assert shown == ["redis://user:***@127.0.0.1:6379", "bolt://neo:***@db:7687"]


@pytest.mark.parametrize("home", ["", "   "])
def test_an_empty_home_is_refused_not_taken_for_the_current_folder(monkeypatch, home):
    monkeypatch.setenv("CLINRAG_HOME", home)
    with pytest.raises(ConfigError, match="CLINRAG_HOME is empty"):
        load_settings()


def test_a_config_file_that_is_a_fifo_is_refused_not_waited_on(tmp_path):
    fifo = tmp_path / "config.toml"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="not a regular file"):
        load_settings(config_file=fifo)
