"""Keyword → node matching: normalised exact name, then caller-supplied synonyms, then fuzzy (rapidfuzz).

Every decision is kept as a `KeywordMatch`, so an answer can show why a keyword reached (or missed) a node.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from rapidfuzz import fuzz, process

from clinrag.core.text import folded
from clinrag.graph.schema import Label
from clinrag.graph.store import GraphStore

MatchMethod = Literal["exact", "synonym", "fuzzy", "none"]
Synonyms = Callable[[str], Sequence[str]]
Scorer = Callable[..., float]
_PUNCTUATION = re.compile(r"[\W_]+")


def normalize(text: str) -> str:
    """Case-folded, accent-free, punctuation as spaces, whitespace collapsed."""
    return " ".join(_PUNCTUATION.sub(" ", folded(text)).split())


@dataclass(frozen=True)
class KeywordMatch:
    keyword: str
    label: Label
    node: str | None
    method: MatchMethod
    score: float  # 100 for exact and synonym matches, the fuzzy score otherwise, 0 without a match
    via: str | None = None  # the synonym that matched, or the fuzzy candidate's normalised text


class NodeMatcher:
    """Matches keywords to node names of one label; names are read once per label and cached."""

    def __init__(
        self,
        store: GraphStore,
        *,
        synonyms: Synonyms | None = None,
        fuzzy_threshold: float = 88.0,
        scorer: Scorer = fuzz.token_sort_ratio,
    ) -> None:
        if not 0 < fuzzy_threshold <= 100:
            raise ValueError("fuzzy_threshold must be in (0, 100]")
        self.store = store
        self.synonyms = synonyms
        self.fuzzy_threshold = fuzzy_threshold
        self.scorer = scorer
        self._index: dict[Label, dict[str, str]] = {}

    def refresh(self, label: Label | None = None) -> None:
        """Forget the cached names (of one label, or all) so the next match reads them again."""
        if label is None:
            self._index.clear()
        else:
            self._index.pop(Label(label), None)

    def names(self, label: Label) -> dict[str, str]:
        """Normalised name → node name; among names that normalise alike, the smallest wins."""
        label = Label(label)
        if label not in self._index:
            rows = self.store.query(f"MATCH (n:{label}) RETURN n.name AS name ORDER BY name")
            index: dict[str, str] = {}
            for row in rows:
                name = row["name"]
                if isinstance(name, str) and (key := normalize(name)):
                    index.setdefault(key, name)
            self._index[label] = index
        return self._index[label]

    def match(self, keyword: str, label: Label) -> KeywordMatch:
        label = Label(label)
        index = self.names(label)
        key = normalize(keyword)
        if not key:
            return KeywordMatch(keyword, label, None, "none", 0.0)
        if key in index:
            return KeywordMatch(keyword, label, index[key], "exact", 100.0)
        alternatives = [normalize(s) for s in (self.synonyms(keyword) if self.synonyms else [])]
        for alternative in alternatives:
            if alternative in index:
                return KeywordMatch(keyword, label, index[alternative], "synonym", 100.0, alternative)
        best: tuple[str, float] | None = None
        for candidate in [key, *(a for a in alternatives if a)]:
            found = process.extractOne(
                candidate, list(index), scorer=self.scorer, score_cutoff=self.fuzzy_threshold
            )
            if found is not None and (best is None or found[1] > best[1]):
                best = (found[0], float(found[1]))
        if best is None:
            return KeywordMatch(keyword, label, None, "none", 0.0)
        return KeywordMatch(keyword, label, index[best[0]], "fuzzy", round(best[1], 2), best[0])

    def match_all(self, keywords: Iterable[str], label: Label) -> list[KeywordMatch]:
        return [self.match(keyword, label) for keyword in keywords]
