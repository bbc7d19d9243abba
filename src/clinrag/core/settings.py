"""Settings: the one place that says which backends are used.

Sources, highest priority first: keyword arguments, `CLINRAG_*` environment variables, a TOML file
(`CLINRAG_CONFIG` or `config_file=`), defaults. TOML sections flatten onto field names:
`[llm] base_url = ...` sets `llm_base_url`.
"""

from __future__ import annotations

import hashlib
import os
import re
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import unquote_plus, urlsplit, urlunsplit

import platformdirs
from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, NoDecode, PydanticBaseSettingsSource, SettingsConfigDict

from clinrag.core.errors import ConfigError, DataFormatError, validation_problems
from clinrag.core.files import decode, os_reason


def _default_home() -> Path:
    return Path(platformdirs.user_cache_dir("clinrag"))


class _TomlSource(PydanticBaseSettingsSource):
    """Reads the TOML config file named by `config_file=` or `CLINRAG_CONFIG`, flattening its sections."""

    def __init__(self, settings_cls: type[BaseSettings], path: str | Path | None) -> None:
        super().__init__(settings_cls)
        self.path = Path(path) if path else None

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        raise NotImplementedError  # values are all returned by __call__

    def __call__(self) -> dict[str, Any]:
        if self.path is None:
            return {}
        # a FIFO or a device would block the read or never end: a config is a regular file
        if self.path.exists() and not self.path.is_dir() and not self.path.is_file():
            raise ConfigError(f"the config file {self.path} is not a regular file")
        try:
            raw = tomllib.loads(decode(self.path.read_bytes(), self.path))
        except FileNotFoundError as exc:
            raise ConfigError(f"config file not found: {self.path}") from exc
        except OSError as exc:  # a directory, an unreadable file
            raise ConfigError(f"cannot read the config file {self.path}: {os_reason(exc)}") from exc
        except DataFormatError as exc:
            raise ConfigError(f"config file {exc}") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {self.path} is not valid TOML: {exc}") from exc
        flat: dict[str, Any] = {}
        for key, value in raw.items():
            if isinstance(value, dict):
                flat.update({f"{key}_{sub}": subvalue for sub, subvalue in value.items()})
            else:
                flat[key] = value
        return flat


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CLINRAG_", extra="forbid", validate_default=True)

    config_file: Path | None = Field(
        default=None, validation_alias=AliasChoices("config_file", "CLINRAG_CONFIG")
    )
    home: Path = Field(default_factory=_default_home)

    # Chat model
    # A registered chat backend (embedded, openai, replay, …), checked where the model is built
    llm_backend: str = "embedded"
    llm_model: str | None = None
    llm_base_url: str | None = None
    llm_api_key: SecretStr | None = None
    llm_timeout_s: float = Field(default=120.0, gt=0)
    llm_max_retries: int = Field(default=4, ge=0)
    llm_backoff_s: float = Field(default=0.5, ge=0)
    llm_concurrency: int = Field(default=4, ge=1)
    llm_max_tokens: int = Field(default=512, ge=1)
    # Model servers: how JSON schemas are sent and how options are scored. `auto` probes the server once (kept
    # in <home>/model_servers.json) and uses what it supports; a value fixes the choice. Echo scoring renders
    # the chat prompt with the served model's template: its GGUF file or tokenizer_config.json.
    llm_structured_output: Literal[
        "auto", "json_schema", "json_object_schema", "guided_json", "json_object", "none"
    ] = "auto"
    llm_scoring: Literal["auto", "echo", "top_logprobs", "ranking"] = "auto"
    llm_chat_template: Path | None = None
    llm_echo_max_ms_per_token: float = Field(default=5.0, gt=0)
    llm_ranking_samples: int = Field(default=1, ge=1, le=20)
    llm_replay_path: Path | None = None
    llm_record_path: Path | None = None
    max_prompt_chars: int = Field(default=200_000, ge=1)

    # Embedded llama.cpp runtime
    # Which llama.cpp runs the embedded model: the prebuilt `cyllama` wheel, llama-cpp-python compiled from
    # source (scripts/install.sh --source-runtime), or auto: the wheel when installed, else the source build.
    embedded_runtime: Literal["auto", "wheel", "source"] = "auto"
    embedded_n_ctx: int = Field(default=4096, ge=256)
    embedded_n_threads: int = Field(default=1, ge=1)
    embedded_repeat_penalty: float = Field(default=1.3, ge=1.0)
    embedded_seed: int = 0

    # Response cache
    cache_enabled: bool = True
    cache_path: Path | None = None

    # Embeddings
    # A registered embedding backend (minilm-onnx, openai, …), checked where the embedder is built
    embed_backend: str = "minilm-onnx"
    embed_model: str | None = None
    embed_base_url: str | None = None
    embed_api_key: SecretStr | None = None
    embed_batch_size: int = Field(default=64, ge=1)
    embed_threads: int = Field(default=0, ge=0)  # local ONNX model; 0 = one thread per physical core
    embed_cache_enabled: bool = True

    # Disease graph: a FalkorDB (redis://, falkor://, unix://) or Neo4j (bolt://, neo4j://) server; none: the
    # packaged FalkorDB server, started by clinrag under <home>/graph/falkordb
    graph_uri: str | None = None

    # Literature citations (DeepDoctor-RAG): PubMed when an email is set (NCBI asks every client for one),
    # Wikipedia summaries when enabled; with neither, a PubMedQA-format JSON file serves as an offline index.
    pubmed_email: str | None = None
    pubmed_api_key: SecretStr | None = None
    wikipedia_enabled: bool = False
    literature_offline_path: Path | None = None
    literature_timeout_s: float = Field(default=10.0, gt=0)  # per HTTP call
    literature_deadline_s: float = Field(default=20.0, gt=0)  # per search, all sources together

    # Knowledge base
    kb_path: Path | None = None
    # The paper's LLM tagger needs a capable model; with the tiny embedded one it tags nearly everything
    # as chapter 1, so the model-free embedding tagger is the default.
    kb_tagger: Literal["llm", "embedding"] = "embedding"
    kb_rewrite: bool = True
    kb_fallback: Literal["none", "unconstrained"] = "none"

    # Patient base
    patients_path: Path | None = None

    # Consultation: who writes the answer's sentences — the templates, or the chat model checked sentence by
    # sentence against the evidence (a capable model only: the embedded 135M one invents facts).
    consult_prose: Literal["template", "llm"] = "template"
    # How long the CLI's warm consultation process (`app/warm.py`) waits for the next `clinrag consult`
    # before it exits; 0: every consultation loads the knowledge itself.
    consult_warm_s: float = Field(default=600.0, ge=0.0, le=86400.0)

    # Evaluation: where dataset files live (e.g. a copy of shared/data), and the judge model, which defaults
    # to the chat model above; any judge_* field that is set overrides the matching llm_* field.
    data_dir: Path | None = None
    judge_backend: str | None = None
    judge_model: str | None = None
    judge_base_url: str | None = None
    judge_api_key: SecretStr | None = None

    # HTTP API and web UI (`clinrag serve`): the bearer token (required when binding beyond loopback), the
    # largest request body, the time one request may take, and whether patient text may appear in logs.
    api_token: SecretStr | None = None
    api_max_body_bytes: int = Field(default=1_000_000, ge=1_024)
    api_timeout_s: float = Field(default=600.0, gt=0)
    api_log_text: bool = False
    # What a request may reach: the Host names clients use (a guard against DNS rebinding; "*" any), the
    # folders whose files a request's parameters may name, and the graph URIs they may name (none: requests
    # use only the server's own configuration). Lists are comma-separated in the environment.
    api_allowed_hosts: Annotated[list[str], NoDecode] = ["localhost", "127.0.0.1", "::1"]
    api_data_roots: Annotated[list[Path], NoDecode] = []
    api_graph_uris: Annotated[list[str], NoDecode] = []
    # What the server keeps for clients: interactive sessions (of each kind) and the evidence of answers,
    # each bounded by count, by the bytes of the patients' words and evidence they hold, and by idle time.
    api_sessions: int = Field(default=1_000, ge=1)
    api_answers: int = Field(default=1_000, ge=1)
    api_store_max_bytes: int = Field(default=64_000_000, ge=1_024)
    api_session_ttl_s: float = Field(default=3_600.0, gt=0)
    # Connections: how long a client may take to send a request's head, and how many may be open at once.
    api_header_timeout_s: float = Field(default=10.0, gt=0)
    # … and its whole body (408 beyond), so one that announces a body and never sends it is cut off
    api_body_timeout_s: float = Field(default=10.0, gt=0)
    # how long `serve` waits at shutdown for the requests still running before it cuts them
    api_shutdown_timeout_s: float = Field(default=10.0, gt=0)
    api_max_connections: int = Field(default=200, ge=1)
    ui_assets_path: Path | None = None  # the folder holding htmx.min.js (default: installed by install.sh)

    @field_validator("home", mode="before")
    @classmethod
    def _named_home(cls, value: Any) -> Any:
        """An empty home is a mistake, not the current folder: files would land wherever clinrag runs."""
        if isinstance(value, str) and not value.strip():
            raise ValueError("CLINRAG_HOME is empty: unset it for the default, or name a folder")
        return value

    @field_validator("api_allowed_hosts", "api_data_roots", "api_graph_uris", mode="before")
    @classmethod
    def _comma_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        init_kwargs = getattr(init_settings, "init_kwargs", {})
        path = init_kwargs.get("config_file") or os.environ.get("CLINRAG_CONFIG")
        return (init_settings, env_settings, _TomlSource(settings_cls, path))

    @property
    def llm_cache_path(self) -> Path:
        return self.cache_path or self.home / "llm_cache.sqlite"

    @property
    def model_servers_path(self) -> Path:
        """What each model server was found to support (`llm/server_probe.py`)."""
        return self.home / "model_servers.json"

    @property
    def knowledge_base_path(self) -> Path:
        return self.kb_path or self.home / "kb"

    @property
    def patient_base_path(self) -> Path:
        return self.patients_path or self.home / "patients"

    @property
    def embed_cache_path(self) -> Path:
        return self.home / "embed_cache.sqlite"

    @property
    def literature_cache_path(self) -> Path:
        return self.home / "literature_cache.sqlite"

    @property
    def graph_data_dir(self) -> Path:
        """Data, persistence and log of the FalkorDB server clinrag starts itself."""
        return self.home / "graph" / "falkordb"

    @property
    def mesh_index_path(self) -> Path:
        return self.home / "mesh" / "mesh.sqlite"

    @property
    def default_patients_path(self) -> Path:
        """The patient base of the default (synthetic) cohort."""
        return self.home / "patients-default"

    def built_base_path(self, prefix: str, key: str) -> Path:
        """Where a base built on first use from what the user named is kept: one directory per `key` (the
        resolved sources and build options)."""
        return self.home / f"{prefix}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"

    def described(self) -> dict[str, Any]:
        """Settings as plain values for display; secrets stay masked, also credentials inside URLs."""
        return {name: _shown(value) for name, value in self.model_dump().items()}


def _shown(value: Any) -> Any:
    if isinstance(value, str):
        return redact_url(value)
    if isinstance(value, list):  # a list of URIs (CLINRAG_API_GRAPH_URIS) masks each one
        return [_shown(item) for item in value]
    return str(value) if isinstance(value, Path | SecretStr) else value


# Query parameters whose values are masked wherever a URL is shown: names that look like credentials
# (api_key, access_token, client_secret, password, sig, auth, …).
_SECRET_PARAM = re.compile(r"key|token|secret|pass|pwd|sig|auth|credential", re.IGNORECASE)


def redact_url(text: str) -> str:
    """`text` with a URL's credentials masked: its user information (`scheme://user:***@host`, or `***@host`
    for a lone name, often a token) and the values of query parameters named like secrets (`?api_key=***`);
    other text unchanged."""
    if "://" not in text:
        return text
    try:
        parts = urlsplit(text)
        username, password = parts.username, parts.password
    except ValueError:
        return text
    if username is not None:
        host = parts.netloc.rsplit("@", 1)[1]
        parts = parts._replace(netloc=f"{'***' if password is None else username + ':***'}@{host}")
    if parts.query:
        parts = parts._replace(query="&".join(_masked_param(param) for param in parts.query.split("&")))
    return urlunsplit(parts)


def _masked_param(param: str) -> str:
    name, equals, value = param.partition("=")
    return f"{name}=***" if equals and value and _SECRET_PARAM.search(unquote_plus(name)) else param


def load_settings(**overrides: Any) -> Settings:
    """Build settings, turning validation problems into a `ConfigError` with the field names."""
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        raise ConfigError(f"invalid settings: {validation_problems(exc.errors(), 'settings')}") from exc
