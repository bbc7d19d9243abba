"""A served model's chat template, rendered on the client: echo scoring sends the rendered prompt with each
option to a server's plain completions endpoint, so the prompt must be the one the model was tuned on.

It is read from a file the user names (CLINRAG_LLM_CHAT_TEMPLATE): the GGUF file the server loads (its
`tokenizer.chat_template` and special tokens, read with the `gguf` package) or a Hugging Face
`tokenizer_config.json` (its `chat_template`, `bos_token` and `eos_token`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from clinrag.core.errors import ConfigError
from clinrag.llm.base import ChatRequest
from clinrag.llm.embedded_common import chat_template_renderer

SETTING = "CLINRAG_LLM_CHAT_TEMPLATE"


@dataclass(frozen=True)
class ChatTemplate:
    eos_text: str
    render_messages: Callable[[list[dict[str, str]]], str]

    def prompt(self, request: ChatRequest) -> str:
        """The request's messages as the model sees them, up to the assistant's turn."""
        return self.render_messages([m.model_dump() for m in request.messages])


def load_chat_template(path: Path) -> ChatTemplate:
    if not path.is_file():
        raise ConfigError(f"{SETTING} names {path}, which is not a file")
    template, bos, eos = _from_gguf(path) if path.suffix == ".gguf" else _from_tokenizer_config(path)
    if not template:
        raise ConfigError(
            f"{path} holds no chat template ({SETTING}): it is a base model, not an instruct one"
        )
    return ChatTemplate(eos, chat_template_renderer(template, eos_token=eos, bos_token=bos))


def _from_gguf(path: Path) -> tuple[str, str, str]:
    import gguf

    try:
        reader = gguf.GGUFReader(path)
    except (ValueError, OSError) as exc:
        raise ConfigError(f"{path} is not a readable GGUF file ({SETTING}): {exc}") from exc

    def field(name: str) -> object:
        found = reader.fields.get(name)
        return found.contents() if found is not None else None

    tokens = reader.fields.get("tokenizer.ggml.tokens")
    if tokens is None:
        raise ConfigError(f"{path} has no tokenizer vocabulary ({SETTING})")

    def token_text(key: str) -> str:
        token_id = field(key)
        return tokens.contents(int(token_id)) if isinstance(token_id, int) else ""

    template = field("tokenizer.chat_template")
    return (
        (template if isinstance(template, str) else ""),
        token_text("tokenizer.ggml.bos_token_id"),
        token_text("tokenizer.ggml.eos_token_id"),
    )


def _from_tokenizer_config(path: Path) -> tuple[str, str, str]:
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(
            f"{path} is neither a GGUF file nor a tokenizer_config.json ({SETTING}): {exc}"
        ) from exc
    if not isinstance(config, dict):
        raise ConfigError(f"{path} is not a tokenizer_config.json object ({SETTING})")

    def special(name: str) -> str:
        value = config.get(name) or ""
        return value.get("content", "") if isinstance(value, dict) else str(value)

    template = config.get("chat_template")
    if isinstance(template, list):  # several named templates: the default one
        template = next((t.get("template") for t in template if t.get("name") == "default"), None)
    return (template if isinstance(template, str) else ""), special("bos_token"), special("eos_token")
