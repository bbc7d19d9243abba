"""Chat-model backends by name (`CLINRAG_LLM_BACKEND`, `CLINRAG_JUDGE_BACKEND`).

A backend module registers a function that builds the backend from the settings, e.g.
`@CHAT_BACKENDS.register("embedded")`. Every module of `clinrag.llm` (and of installed distributions naming
one under the `clinrag.chat_backends` entry-point group) is imported on the first lookup, so a backend is one
file. The name is checked where the model is built (`llm/factory.py`): loading the settings imports no
backend."""

from __future__ import annotations

from collections.abc import Callable

from clinrag.core.registry import Registry
from clinrag.core.settings import Settings
from clinrag.llm.base import ChatModel

CHAT_BACKENDS: Registry[Callable[[Settings], ChatModel]] = Registry(
    "chat backend", packages=["clinrag.llm"], entry_point_group="clinrag.chat_backends"
)
