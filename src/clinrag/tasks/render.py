"""How a case's options are shown to a model (the case itself: `clinrag.core.models.case_text`)."""

from __future__ import annotations


def options_block(options: dict[str, str]) -> str:
    return "\n".join(f"{key}. {text}" for key, text in options.items())
