"""A chat backend in one file: an OpenAI-compatible server on this machine, by port alone
(CLINRAG_LLM_BACKEND=local-server, CLINRAG_LLM_BASE_URL=port)."""

from __future__ import annotations

from clinrag.core.settings import Settings
from clinrag.llm.backends import CHAT_BACKENDS
from clinrag.llm.openai_compat import OpenAICompatible


@CHAT_BACKENDS.register("local-server")
def local_server(settings: Settings) -> OpenAICompatible:
    return OpenAICompatible(
        model=settings.llm_model or "local",
        base_url=f"http://127.0.0.1:{settings.llm_base_url or 8000}/v1",
        api_key="none",
        # What the server supports: probed once (`auto`) and kept under the home, or fixed by the settings.
        structured_output=settings.llm_structured_output,
        scoring=settings.llm_scoring,
        probe_cache=settings.model_servers_path,
    )
