"""Which disease lists which finding, in which place of its list and how often its patients show it (where
the source says), which findings a disease is stated not to show, and which are its risk factors: the tables
the differential's likelihoods are computed from. They are built from the disease model and the vocabulary
(about a quarter of a million listings in the packaged knowledge, a fifth of a second) and saved with the
compiled knowledge, but for the few hundred risk factors."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Literal

import numpy as np

from clinrag.consult.diseases import DiseaseModel
from clinrag.consult.understand.vocabulary import Vocabulary, reachable
from clinrag.core.errors import DataFormatError


@dataclass(frozen=True)
class Listings:
    """One entry per (finding, disease listing it), grouped by finding: finding k's entries are
    `starts[k]:starts[k + 1]` of `rows` (the disease's row in the model), `places` (where in the disease's
    symptom list the finding stands: its first place, when two names of it are listed) and `shares` (the
    share of the disease's patients who show it; NaN where the source does not say)."""

    concepts: tuple[str, ...]
    starts: np.ndarray
    rows: np.ndarray
    places: np.ndarray
    shares: np.ndarray

    @classmethod
    def of(
        cls,
        model: DiseaseModel,
        vocabulary: Vocabulary,
        *,
        kind: Literal["symptoms", "excluded", "risk_factors"] = "symptoms",
    ) -> Listings:
        """The diseases' `kind` of findings: their "symptoms", the findings they are stated not to show
        ("excluded") or their "risk_factors" (only symptoms come with shares)."""
        concept_of: dict[str, str | None] = {}  # symptom name → concept id (HPO diseases share most names)
        found: dict[str, dict[int, tuple[int, float]]] = {}
        for row, disease in enumerate(model.diseases):
            listed = getattr(disease, kind)
            shares = disease.frequencies if kind == "symptoms" else [None] * len(listed)
            for place, (symptom, share) in enumerate(zip(listed, shares, strict=True)):
                if symptom not in concept_of:
                    concept = vocabulary.lookup(symptom)
                    concept_of[symptom] = concept.id if concept is not None else None
                if (concept_id := concept_of[symptom]) is not None:
                    entry = (place, np.nan if share is None else share)
                    found.setdefault(concept_id, {}).setdefault(row, entry)
        sizes = [len(listing) for listing in found.values()]
        entries = [entry for listing in found.values() for entry in listing.values()]
        return cls(
            tuple(found),
            np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]),
            np.array([row for listing in found.values() for row in listing], dtype=np.int32),
            np.array([place for place, _ in entries], dtype=np.int32),
            np.array([share for _, share in entries], dtype=np.float64),
        )

    def below(self, parents: Mapping[str, Sequence[str]]) -> Listings:
        """For every concept, the diseases that list it or a narrower concept (`parents`: each concept's
        broader ones), each with its entry of the largest share (a share the source does not give counts
        least; then the first). A disease with "focal-onset seizure" explains "seizure"."""
        number: dict[str, int] = {}  # concept id → its number here
        groups, entries = [], []
        for k, concept in enumerate(self.concepts):
            lineage = [number.setdefault(c, len(number)) for c in reachable(concept, parents)]
            listed = np.arange(self.starts[k], self.starts[k + 1])
            groups.append(np.repeat(np.array(lineage, dtype=np.int32), len(listed)))
            entries.append(np.tile(listed, len(lineage)))
        group, entry = np.concatenate(groups), np.concatenate(entries)
        rank = np.where(np.isnan(self.shares), -1.0, self.shares)[entry]
        order = np.lexsort((entry, -rank, self.rows[entry], group))  # per (group, row): best entry first
        group, entry = group[order], entry[order]
        first = np.ones(len(group), dtype=bool)
        first[1:] = (group[1:] != group[:-1]) | (self.rows[entry][1:] != self.rows[entry][:-1])
        group, entry = group[first], entry[first]
        numbers, starts = np.unique(group, return_index=True)
        names = list(number)
        return Listings(
            tuple(names[n] for n in numbers.tolist()),
            np.concatenate([starts, [len(group)]]).astype(np.int64),
            self.rows[entry],
            self.places[entry],
            self.shares[entry],
        )

    @cached_property
    def _index(self) -> dict[str, int]:
        return {concept: k for k, concept in enumerate(self.concepts)}

    def __len__(self) -> int:
        return len(self.concepts)

    def __contains__(self, concept: object) -> bool:
        return concept in self._index

    def span(self, concept: str) -> slice:
        """Where `concept`'s entries are (an empty slice when no disease lists it)."""
        k = self._index.get(concept)
        return slice(0, 0) if k is None else slice(int(self.starts[k]), int(self.starts[k + 1]))

    def of_concept(self, concept: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(rows, places, shares) of the diseases listing `concept` (empty when none does)."""
        listed = self.span(concept)
        return self.rows[listed], self.places[listed], self.shares[listed]

    def save(self, path: Path) -> None:
        with path.open("wb") as handle:
            np.savez(
                handle,
                concepts=np.array(self.concepts, dtype=str),
                starts=self.starts,
                rows=self.rows,
                places=self.places,
                shares=self.shares,
            )

    @classmethod
    def load(cls, path: Path) -> Listings:
        try:
            with np.load(path, allow_pickle=False) as saved:
                listings = cls(
                    tuple(saved["concepts"].tolist()),
                    saved["starts"],
                    saved["rows"],
                    saved["places"],
                    saved["shares"],
                )
        except (OSError, ValueError, KeyError) as exc:
            raise DataFormatError(f"{path}: not saved listings ({exc}); delete it to rebuild") from exc
        sizes = {len(listings.rows), len(listings.places), len(listings.shares)}
        if len(listings.starts) != len(listings.concepts) + 1 or sizes != {int(listings.starts[-1])}:
            raise DataFormatError(f"{path}: its listings do not add up; delete it to rebuild")
        return listings
