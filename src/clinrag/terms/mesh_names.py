"""Name normalisation for MeSH lookups: case, accents, punctuation, simple plurals and word order."""

from __future__ import annotations

import re

from clinrag.core.text import folded

_POSSESSIVE = re.compile(r"['’]s\b")
_SEPARATORS = re.compile(r"[\W_]+")
_KEY_STOPWORDS = frozenset({"of", "the"})


def _singular(token: str) -> str:
    if len(token) <= 3 or not token.isalpha() or token.endswith(("ss", "us", "is")):
        return token
    if token.endswith("sses") or token.endswith("uses"):
        return token[:-2]
    if token.endswith("ies"):
        return token[:-3] + "y"
    return token[:-1] if token.endswith("s") else token


def _words(text: str) -> list[str]:
    return _SEPARATORS.sub(" ", _POSSESSIVE.sub("", folded(text))).split()


def normalize(text: str) -> str:
    """Case, accents, punctuation and spacing removed: "Alzheimer's  Disease" → 'alzheimer disease'."""
    return " ".join(_words(text))


def singular(text: str) -> str:
    """`normalize` with simple plurals made singular: 'Nursing Homes' → 'nursing home'."""
    return " ".join(_singular(w) for w in _words(text))


def token_key(text: str) -> str:
    """Singular words in sorted order, without 'of'/'the': 'Diabetes Mellitus, Type 2' and
    'type 2 diabetes mellitus' share it."""
    return " ".join(sorted(_singular(w) for w in _words(text) if w not in _KEY_STOPWORDS))
