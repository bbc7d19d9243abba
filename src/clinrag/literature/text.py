"""Text helpers for citations: snippets cut at a sentence end, and inline markup removed."""

from __future__ import annotations

import re

SNIPPET_CHARS = 600
# A sentence ends at . ! or ? followed by whitespace; "e.g. " and "p. " may cut early, which only shortens.
_SENTENCE_END = re.compile(r"[.!?](?=\s)")
# The inline markup PubMed keeps in titles and abstracts (<i>, <sup>, MathML); "p<0.05" is not a tag.
_INLINE_TAG = re.compile(r"</?(?:i|b|u|sup|sub|em|strong|mml:[a-z]+)(?:\s[^<>]*)?/?>", re.IGNORECASE)
_SPACES = re.compile(r"\s+")


def clean(text: str) -> str:
    """Inline markup removed and whitespace collapsed."""
    return _SPACES.sub(" ", _INLINE_TAG.sub("", text)).strip()


def snippet(text: str, max_chars: int = SNIPPET_CHARS) -> str:
    """`text` whole if it fits in `max_chars`, else its longest run of whole sentences that fits; when the
    first sentence alone is longer, it is cut at a word boundary and ends with "…"."""
    text = clean(text)
    if len(text) <= max_chars:
        return text
    ends = [m.end() for m in _SENTENCE_END.finditer(text, 0, max_chars + 1)]
    if ends:
        return text[: ends[-1]]
    cut = text.rfind(" ", 0, max_chars)
    return text[: cut if cut > 0 else max_chars - 1].rstrip() + "…"
