"""A case's answer options: which option a diagnosis names."""

from __future__ import annotations

from clinrag.graph.matching import normalize


def option_key(label: str, options: dict[str, str]) -> str:
    """The key of the option whose text is `label` — the same text, else the same after normalisation (case,
    accents, punctuation) — or the label itself when no option has it."""
    exact = next((key for key, text in options.items() if text == label), None)
    if exact is not None:
        return exact
    wanted = normalize(label)
    return next((key for key, text in options.items() if normalize(text) == wanted), label)
