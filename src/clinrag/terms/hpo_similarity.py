"""Phenotype set similarity as Phenomizer ranks diseases (Köhler et al., Am J Hum Genet 2009): a term's
information content is −log of the share of a database's diseases annotated with it or a term below it; two
terms are as similar as the IC of their most informative common ancestor (Resnik); a patient's terms and a
disease's are compared by funSimAvg, the mean of the two directions' average best match.

Computed over every disease at once with numpy from `clinrag.terms.hpo`'s own reading of `hp.obo` and
`phenotype.hpoa` (the same numbers as pyhpo's `HPOSet.similarity(kind="omim", method="resnik",
combine="funSimAvg")`, checked in the tests, about 10 ms a patient where pyhpo takes 10 s)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from clinrag.terms.hpo import HpoDisease, hpo_diseases, hpo_terms


@dataclass(frozen=True)
class Ranked:
    disease: HpoDisease
    score: float


class PhenotypeSimilarity:
    """The diseases of one database ("OMIM", "ORPHA") by their annotations' similarity to a patient's terms.
    Building it takes about two seconds (every term's ancestors and descendants, every disease's terms)."""

    def __init__(self, database: str = "OMIM") -> None:
        terms = hpo_terms()
        self._index = {term_id: k for k, term_id in enumerate(terms)}
        parents = [[self._index[p] for p in term.parents if p in self._index] for term in terms.values()]
        ancestors: list[list[int]] = [[] for _ in parents]
        for k in range(len(parents)):
            _ancestors(k, parents, ancestors)
        self._ancestors = [np.array(found, dtype=np.int32) for found in ancestors]
        below: list[list[int]] = [[] for _ in parents]
        for k, found in enumerate(ancestors):
            for ancestor in found:
                below[ancestor].append(k)
        self._below = [np.array(found, dtype=np.int32) for found in below]  # each term with its descendants
        # every annotation of the disease, as Phenomizer and pyhpo count them: its mode of inheritance and
        # clinical course too (they lower the average best match of a disease annotated with many of them)
        self.diseases = [d for d in hpo_diseases(database) if any(t in self._index for t in d.phenotypes)]
        annotated = [sorted(self._index[t] for t in d.phenotypes if t in self._index) for d in self.diseases]
        self._terms = np.array([t for found in annotated for t in found], dtype=np.int32)
        self._starts = np.concatenate([[0], np.cumsum([len(found) for found in annotated])[:-1]]).astype(int)
        self._sizes = np.array([len(found) for found in annotated], dtype=float)
        # IC: the share of diseases annotated with the term or one below it
        counts = np.zeros(len(parents))
        for found in annotated:
            counts[np.unique(np.concatenate([self._ancestors[t] for t in found]))] += 1
        with np.errstate(divide="ignore"):
            self.information = np.where(counts > 0, -np.log(counts / len(self.diseases)), 0.0)

    def scores(self, observed: Sequence[str]) -> np.ndarray:
        """funSimAvg of the patient's terms (HPO ids; unknown ones are ignored) with each disease, in the
        order of `diseases`."""
        known = [self._index[t] for t in dict.fromkeys(observed) if t in self._index]
        if not known:
            return np.zeros(len(self.diseases))
        best_for_patient = np.zeros((len(known), len(self.diseases)))
        best_for_disease = np.zeros(len(self.information))
        for row, term in enumerate(known):
            similar = self._similar(term)
            best_for_patient[row] = np.maximum.reduceat(similar[self._terms], self._starts)
            np.maximum(best_for_disease, similar, out=best_for_disease)
        patient_side = best_for_patient.mean(axis=0)
        disease_side = np.add.reduceat(best_for_disease[self._terms], self._starts) / self._sizes
        return 0.5 * (patient_side + disease_side)

    def rank(self, observed: Sequence[str], n: int = 10) -> list[Ranked]:
        """The `n` most similar diseases, most similar first (ties: database order)."""
        scores = self.scores(observed)
        order = np.argsort(-scores, kind="stable")[:n]
        return [Ranked(self.diseases[k], float(scores[k])) for k in order]

    def _similar(self, term: int) -> np.ndarray:
        """Resnik similarity of `term` with every term: the IC of their most informative common ancestor."""
        similar = np.zeros(len(self.information))
        lineage = self._ancestors[term]
        for ancestor in lineage[np.argsort(self.information[lineage], kind="stable")]:
            similar[self._below[ancestor]] = self.information[ancestor]  # the more informative ones last
        return similar


def _ancestors(term: int, parents: list[list[int]], found: list[list[int]]) -> list[int]:
    """The term and every term above it, memoised in `found` (iterative: the ontology is ~15 levels deep)."""
    if found[term]:
        return found[term]
    stack = [term]
    while stack:
        current = stack[-1]
        pending = [p for p in parents[current] if not found[p]]
        if pending:
            stack.extend(pending)
            continue
        stack.pop()
        if not found[current]:
            above = {current}
            for parent in parents[current]:
                above.update(found[parent])
            found[current] = sorted(above)
    return found[term]
