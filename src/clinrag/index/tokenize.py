"""Tokenisers for lexical search: English and French (lowercase, stopwords, Snowball stemming via
PyStemmer) and Chinese (jieba word segmentation, stopwords, no stemming)."""

from __future__ import annotations

import logging
import re
import threading
from functools import cache
from typing import Literal, get_args

import jieba
import Stemmer
from bm25s.stopwords import STOPWORDS_CHINESE, STOPWORDS_EN, STOPWORDS_FRENCH

from clinrag.core.errors import ConfigError

Language = Literal["en", "fr", "zh"]
LANGUAGES: tuple[str, ...] = get_args(Language)

_STEMMERS = {"en": "english", "fr": "french"}
_STOPWORDS = {"en": STOPWORDS_EN, "fr": STOPWORDS_FRENCH, "zh": STOPWORDS_CHINESE}
# Letters and digits only: punctuation, apostrophes ("l'hôpital" -> "l", "hôpital") and "_" separate words.
_WORD = re.compile(r"[^\W_]+")
_HAS_WORD_CHAR = re.compile(r"[^\W_]")


class Tokenizer:
    """Text -> index terms for one language; the same instance must tokenise documents and queries."""

    def __init__(self, language: Language) -> None:
        if language not in LANGUAGES:
            raise ConfigError(f"unsupported language {language!r}; choose one of {', '.join(LANGUAGES)}")
        self.language: Language = language
        self._stopwords = frozenset(_STOPWORDS[language])
        stemmer_name = _STEMMERS.get(language)
        self._stemmer = Stemmer.Stemmer(stemmer_name) if stemmer_name else None
        self._lock = threading.Lock()  # PyStemmer stemmers are not thread-safe

    @property
    def settings(self) -> dict[str, str | bool | None]:
        """What decides the terms; stored in an index manifest so a reloaded index tokenises the same way."""
        return {
            "language": self.language,
            "segmenter": "jieba" if self.language == "zh" else "regex",
            "stemmer": _STEMMERS.get(self.language),
            "stopwords": True,
        }

    def __call__(self, text: str) -> list[str]:
        if self.language == "zh":
            # Search-mode segmentation also emits the shorter words inside long ones ("胃肠炎" -> "胃肠",
            # "肠炎", "胃肠炎"), so a query matches a document that words the same thing differently.
            words = [w.strip().lower() for w in _jieba().lcut_for_search(text)]
            return [w for w in words if _HAS_WORD_CHAR.search(w) and w not in self._stopwords]
        words = [w for w in _WORD.findall(text.lower()) if w not in self._stopwords]
        assert self._stemmer is not None
        with self._lock:
            return self._stemmer.stemWords(words)


@cache
def _jieba() -> jieba.Tokenizer:
    # jieba logs its dictionary loading at DEBUG to stderr; that is noise for a library user.
    jieba.setLogLevel(logging.WARNING)
    segmenter = jieba.Tokenizer()
    segmenter.initialize()
    return segmenter
