"""Text folding shared by every name comparison (node names, MeSH names, disease catalogues)."""

from __future__ import annotations

import unicodedata


def folded(text: str) -> str:
    """Case-folded and accent-free ("Sjögren" → "sjogren"); punctuation and spacing as they were."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch)).casefold()
