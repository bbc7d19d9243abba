"""BM25 lexical index on bm25s, with language-aware tokenisation and atomic persistence."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path

import bm25s
import numpy as np

from clinrag.core.errors import ConfigError, DataFormatError, InvalidInputError
from clinrag.index.hits import Hit
from clinrag.index.store import (
    Manifest,
    atomic_directory,
    read_id_list,
    read_manifest,
    write_json,
    write_manifest,
)
from clinrag.index.tokenize import LANGUAGES, Language, Tokenizer
from clinrag.index.validate import check_k, check_new_ids

BM25_DIR = "bm25"
IDS_FILE = "ids.json"
TERMS_FILE = "terms.npy"  # every document's term ids, concatenated
OFFSETS_FILE = "offsets.npy"  # document i's terms are terms[offsets[i]:offsets[i + 1]]


class LexicalIndex:
    """BM25 (Lucene variant) over texts under string ids; `search` returns BM25 scores, best first.

    BM25 weights depend on the whole corpus (document frequencies, mean length), so every `add` re-scores
    all documents: add in large batches. Each document's terms are kept (as term ids) for that purpose."""

    def __init__(self, language: Language = "en", *, k1: float = 1.5, b: float = 0.75) -> None:
        if not k1 > 0 or not 0 <= b <= 1:
            raise ConfigError(f"BM25 needs k1 > 0 and 0 <= b <= 1, got k1={k1}, b={b}")
        self.tokenizer = Tokenizer(language)
        self.k1 = k1
        self.b = b
        self._ids: list[str] = []
        self._id_set: set[str] = set()
        self._vocab: dict[str, int] = {}
        self._terms = np.zeros(0, dtype=np.int32)
        self._offsets = np.zeros(1, dtype=np.int64)
        self._bm25: bm25s.BM25 | None = None

    @property
    def language(self) -> Language:
        return self.tokenizer.language

    def __len__(self) -> int:
        return len(self._ids)

    def add(self, ids: Sequence[str], texts: Sequence[str]) -> None:
        """Index `texts` under new, unique `ids` and re-score the corpus."""
        if isinstance(texts, str | bytes):
            raise InvalidInputError("texts must be a sequence of strings, not a single string")
        texts = list(texts)
        new_ids = check_new_ids(ids, len(texts), self._id_set)
        for position, text in enumerate(texts):
            if not isinstance(text, str):
                raise InvalidInputError(f"text at position {position} is {type(text).__name__}, not str")
            if not text.strip():
                raise InvalidInputError(f"text at position {position} is empty or whitespace only")
        if not new_ids:
            return
        documents = [self._term_ids(self.tokenizer(text)) for text in texts]
        lengths = np.fromiter((len(d) for d in documents), dtype=np.int64, count=len(documents))
        self._terms = np.concatenate([self._terms, *(np.asarray(d, dtype=np.int32) for d in documents)])
        self._offsets = np.concatenate([self._offsets, self._offsets[-1] + np.cumsum(lengths)])
        self._ids.extend(new_ids)
        self._id_set.update(new_ids)
        self._bm25 = self._build() if self._vocab else None  # all stopwords so far: nothing to score

    def search(self, query: str, k: int) -> list[Hit]:
        """Up to k documents sharing at least one term with `query`, best first (ties by insertion order).

        A query none of whose terms occurs in the corpus (or that is only stopwords) finds nothing; an empty
        query is an `InvalidInputError`."""
        if not isinstance(query, str) or not query.strip():
            raise InvalidInputError("a lexical query must be a non-empty string")
        k = check_k(k)
        term_ids = [self._vocab[t] for t in self.tokenizer(query) if t in self._vocab]
        if not term_ids or self._bm25 is None:
            return []
        scores = self._bm25.get_scores_from_ids(term_ids)
        matching = np.flatnonzero(scores > 0)  # Lucene IDF is positive, so 0 means no shared term
        if matching.size > k:
            matching = matching[np.argpartition(-scores[matching], k - 1)[:k]]
        order = matching[np.lexsort((matching, -scores[matching]))]
        return [Hit(self._ids[i], float(scores[i])) for i in order]

    def save(self, directory: Path) -> None:
        """Write the index to `directory` atomically (an existing index there is replaced only on success)."""
        with atomic_directory(directory) as staging:
            if self._bm25 is not None:
                self._bm25.save(str(staging / BM25_DIR), show_progress=False)
            write_json(staging / IDS_FILE, self._ids)
            np.save(staging / TERMS_FILE, self._terms)
            np.save(staging / OFFSETS_FILE, self._offsets)
            params = {"tokenizer": self.tokenizer.settings, "k1": self.k1, "b": self.b, "method": "lucene"}
            write_manifest(staging, Manifest.new("lexical", count=len(self._ids), params=params))

    @classmethod
    def load(cls, directory: Path) -> LexicalIndex:
        """Load a saved index; it tokenises queries with the settings it was built with."""
        directory = Path(directory)
        manifest = read_manifest(directory, "lexical")
        params = manifest.params
        tokenizer = params.get("tokenizer")
        if not isinstance(tokenizer, dict) or tokenizer.get("language") not in LANGUAGES:
            raise DataFormatError(f"{directory}: the manifest names no supported tokenizer language")
        try:
            index = cls(tokenizer["language"], k1=params["k1"], b=params["b"])
        except (KeyError, TypeError, ConfigError) as exc:
            raise DataFormatError(f"{directory}: invalid lexical index parameters {params}: {exc}") from exc
        if index.tokenizer.settings != tokenizer:
            raise DataFormatError(
                f"{directory}: tokenizer {tokenizer} differs from {index.tokenizer.settings}"
            )
        index._ids = read_id_list(directory / IDS_FILE, manifest.count)
        index._id_set = set(index._ids)
        try:
            index._terms = np.load(directory / TERMS_FILE, allow_pickle=False)
            index._offsets = np.load(directory / OFFSETS_FILE, allow_pickle=False)
            if (directory / BM25_DIR).is_dir():
                index._bm25 = bm25s.BM25.load(str(directory / BM25_DIR), show_progress=False)
        except (OSError, ValueError, KeyError) as exc:
            raise DataFormatError(f"cannot read the lexical index in {directory}: {exc}") from exc
        if len(index._offsets) != manifest.count + 1 or index._offsets[-1] != len(index._terms):
            raise DataFormatError(f"{directory}: term offsets do not match {manifest.count} documents")
        if (index._bm25 is None) != (len(index._terms) == 0):
            raise DataFormatError(f"{directory}: the bm25 data and the document terms disagree")
        if index._bm25 is not None:
            index._vocab = {str(term): int(term_id) for term, term_id in index._bm25.vocab_dict.items()}
            if index._bm25.scores["num_docs"] != manifest.count:
                raise DataFormatError(
                    f"{directory}: bm25 data holds {index._bm25.scores['num_docs']} documents"
                )
        return index

    def _term_ids(self, terms: list[str]) -> list[int]:
        return [self._vocab.setdefault(term, len(self._vocab)) for term in terms]

    def _build(self) -> bm25s.BM25:
        bounds = self._offsets.tolist()
        documents = [self._terms[start:end].tolist() for start, end in itertools.pairwise(bounds)]
        bm25 = bm25s.BM25(k1=self.k1, b=self.b, method="lucene")
        # A copy: bm25s may add entries to the vocabulary it is given. No empty-token column is needed,
        # as queries without known terms return before scoring.
        bm25.index((documents, dict(self._vocab)), create_empty_token=False, show_progress=False)
        return bm25
