"""EXPRAG step 2: from the reports of the most similar patients, the passages that answer the question.

Reports are split into sections, sections into sentences and passages (a few sentences). One interface,
`retrieve_passages(..., retriever=name)`, over five retrievers:
- `bm25`: BM25 over passages;   `dense`: cosine over passages;   `hybrid`: both fused by RRF;
- `sentence_window`: dense over sentences, each hit returned with ±`window` neighbouring sentences of its
  section;
- `auto_merging`: dense over sentences; where at least `merge_ratio` of a section's sentences hit, the whole
  section is returned instead of its sentences."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from clinrag.core.errors import InvalidInputError
from clinrag.core.models import Evidence
from clinrag.embed.base import Embedder
from clinrag.index.fusion import rrf
from clinrag.index.hits import Hit
from clinrag.index.lexical import LexicalIndex
from clinrag.knowledge.chunking import chunk_text, split_sentences
from clinrag.patients.record import PatientRecord

Retriever = Literal["bm25", "dense", "hybrid", "sentence_window", "auto_merging"]
RETRIEVERS: tuple[str, ...] = ("bm25", "dense", "hybrid", "sentence_window", "auto_merging")
PASSAGE_WORDS = 60


@dataclass(frozen=True)
class Passage:
    id: str
    patient_id: str
    section: str
    text: str
    score: float

    def evidence(self) -> Evidence:
        return Evidence(
            id=f"passage:{self.id}",
            kind="passage",
            text=self.text,
            score=self.score,
            source=self.patient_id,
            provenance={"section": self.section},
        )


@dataclass(frozen=True)
class _Unit:
    id: str
    patient_id: str
    section: str
    text: str
    section_key: str
    position: int  # sentence position within its section


def _units(records: Sequence[PatientRecord], sentences: bool) -> list[_Unit]:
    units = []
    for record in records:
        for s_index, section in enumerate(record.report):
            key = f"{record.id}/{s_index}"
            parts = split_sentences(section.text) if sentences else chunk_text(section.text, PASSAGE_WORDS, 0)
            units.extend(
                _Unit(f"{key}/{i}", record.id, section.title, text, key, i) for i, text in enumerate(parts)
            )
    return units


def _dense(units: list[_Unit], question: str, embedder: Embedder, limit: int) -> list[Hit]:
    scores = embedder.encode([u.text for u in units]) @ embedder.encode([question])[0]
    order = np.argsort(-scores, kind="stable")[:limit]
    return [Hit(units[i].id, float(scores[i])) for i in order]


def _bm25(units: list[_Unit], question: str, limit: int) -> list[Hit]:
    index = LexicalIndex()
    index.add([u.id for u in units], [u.text for u in units])
    return index.search(question, limit)


def retrieve_passages(
    records: Sequence[PatientRecord],
    question: str,
    *,
    retriever: str = "bm25",
    k: int = 5,
    embedder: Embedder | None = None,
    window: int = 1,
    merge_ratio: float = 0.5,
) -> list[Passage]:
    if retriever not in RETRIEVERS:
        raise InvalidInputError(
            f"unknown passage retriever {retriever!r}; choose one of {', '.join(RETRIEVERS)}"
        )
    if not question.strip():
        raise InvalidInputError("the question is empty")
    if retriever != "bm25" and embedder is None:
        raise InvalidInputError(f"the {retriever} retriever needs an embedder")
    sentence_level = retriever in ("sentence_window", "auto_merging")
    units = _units(records, sentences=sentence_level)
    if not units:
        return []
    by_id = {u.id: u for u in units}
    if retriever == "bm25":
        return [_passage(by_id[h.id], h.score) for h in _bm25(units, question, k)]
    if retriever == "dense":
        return [_passage(by_id[h.id], h.score) for h in _dense(units, question, embedder, k)]
    if retriever == "hybrid":
        fused = rrf([_bm25(units, question, 3 * k), _dense(units, question, embedder, 3 * k)], limit=k)
        return [_passage(by_id[h.id], h.score) for h in fused]

    sections: dict[str, list[_Unit]] = {}
    for unit in units:
        sections.setdefault(unit.section_key, []).append(unit)
    if retriever == "sentence_window":
        return _sentence_window(units, by_id, sections, question, embedder, k, window)
    return _auto_merging(units, by_id, sections, question, embedder, k, merge_ratio)


def _passage(unit: _Unit, score: float, text: str | None = None, unit_id: str | None = None) -> Passage:
    return Passage(unit_id or unit.id, unit.patient_id, unit.section, text or unit.text, score)


def _sentence_window(
    units: list[_Unit],
    by_id: dict[str, _Unit],
    sections: dict[str, list[_Unit]],
    question: str,
    embedder: Embedder,
    k: int,
    window: int,
) -> list[Passage]:
    results, covered = [], set()
    for hit in _dense(units, question, embedder, len(units)):
        unit = by_id[hit.id]
        if unit.id in covered:
            continue  # already inside a returned window
        siblings = sections[unit.section_key]
        span = siblings[max(0, unit.position - window) : unit.position + window + 1]
        covered.update(s.id for s in span)
        results.append(_passage(unit, hit.score, " ".join(s.text for s in span)))
        if len(results) == k:
            break
    return results


def _auto_merging(
    units: list[_Unit],
    by_id: dict[str, _Unit],
    sections: dict[str, list[_Unit]],
    question: str,
    embedder: Embedder,
    k: int,
    merge_ratio: float,
) -> list[Passage]:
    hits = _dense(units, question, embedder, 3 * k)
    hit_counts: dict[str, int] = {}
    for hit in hits:
        key = by_id[hit.id].section_key
        hit_counts[key] = hit_counts.get(key, 0) + 1
    results, merged = [], set()
    for hit in hits:
        unit = by_id[hit.id]
        siblings = sections[unit.section_key]
        if len(siblings) > 1 and hit_counts[unit.section_key] >= merge_ratio * len(siblings):
            if unit.section_key in merged:
                continue
            merged.add(unit.section_key)
            results.append(_passage(unit, hit.score, " ".join(s.text for s in siblings), unit.section_key))
        else:
            results.append(_passage(unit, hit.score))
        if len(results) == k:
            break
    return results
