"""A case's answer options ranked by the differential, every option: one the knowledge names takes the
probability of the diseases it names; one it does not name is ranked all the same, with an uninformative
score and the reason, so that the ranking is never worse than chance by construction.

An option names the knowledge's diseases
- by name, after normalisation (case, accents, punctuation);
- as a general name of subtypes ("Noonan syndrome" names "Noonan syndrome 1", "Noonan syndrome 2", …: a
  disease name that is the option followed by a subtype's number, letter or type, `subtype`); the option
  takes their summed probability;
- else by a near-identical wording (`rapidfuzz` token sort ratio ≥ `fuzzy_threshold`: word order, hyphens,
  a plural).
An option naming none takes, as its probability, the mean of the named options' (no evidence for or against
it), or 1 / the number of options when none is named. Ties are broken by a hash of the case and the option's
text, not by the options' order: an exam's answer position is not at random, and an uninformative ranking
must be at chance wherever the answer stands."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from rapidfuzz import fuzz, process

from clinrag.consult.diseases import Disease
from clinrag.graph.matching import normalize

FUZZY_THRESHOLD = 92.0
# what follows a general name in a subtype's (normalised) name: "1", "2a", "type i", "ix", "b", then anything
SUBTYPE = r"(?:type |group |class )?(?:\d+[a-z]?|[ivx]+|[a-z])(?: .*)?"


@dataclass(frozen=True)
class RankedOption:
    key: str
    text: str
    probability: float  # among the options
    how: str  # "name", "subtypes", "fuzzy" or "not in the knowledge"
    diseases: tuple[str, ...]  # the knowledge's diseases it names


class OptionNames:
    """The knowledge's disease names, normalised, for naming options."""

    def __init__(
        self, diseases: Sequence[Disease], fuzzy_threshold: float = FUZZY_THRESHOLD, subtype: str = SUBTYPE
    ) -> None:
        self.diseases = diseases
        self.fuzzy_threshold = fuzzy_threshold
        self.subtype = re.compile(subtype)
        self._rows: dict[str, list[int]] = {}
        for row, disease in enumerate(diseases):
            self._rows.setdefault(normalize(disease.name), []).append(row)
        self._names = sorted(self._rows)

    def rows(self, option: str) -> tuple[list[int], str]:
        """The rows of the diseases `option` names, and how it names them."""
        key = normalize(option)
        if not key:
            return [], "not in the knowledge"
        if key in self._rows:
            return self._rows[key], "name"
        # names sorted: every name that starts with the option and a space follows it at once
        start = int(np.searchsorted(self._names, key + " "))
        subtypes = []
        for name in self._names[start:]:
            if not name.startswith(key + " "):
                break
            if self.subtype.fullmatch(name[len(key) + 1 :]):
                subtypes += self._rows[name]
        if subtypes:
            return subtypes, "subtypes"
        found = process.extractOne(
            key, self._names, scorer=fuzz.token_sort_ratio, score_cutoff=self.fuzzy_threshold
        )
        if found is not None:
            return self._rows[found[0]], "fuzzy"
        return [], "not in the knowledge"

    def rank(
        self, options: dict[str, str], posterior: np.ndarray | None, case: str = ""
    ) -> list[RankedOption]:
        """Every option of case `case`, most probable first (`posterior`: P(d | findings) over the diseases;
        None when nothing was understood, every option then uninformative)."""
        named = [(key, text, *self.rows(text)) for key, text in options.items()]
        mass = {
            key: float(posterior[rows].sum()) for key, _, rows, _ in named if rows and posterior is not None
        }
        total = sum(mass.values())
        if total > 0:
            share = {key: value / total for key, value in mass.items()}
            unknown = 1.0 / len(mass)  # the mean share of the named options
        else:
            share, unknown = {}, 1.0
        scores = [share.get(key, unknown) for key, *_ in named]
        weight = sum(scores)
        ranked = [
            RankedOption(
                key,
                text,
                score / weight,
                how if key in share else "not in the knowledge" if not rows else "named, but no probability",
                tuple(self.diseases[row].name for row in rows),
            )
            for (key, text, rows, how), score in zip(named, scores, strict=True)
        ]

        def tie_break(option: RankedOption) -> str:
            return hashlib.sha256(f"{case}\0{option.text}".encode()).hexdigest()

        return sorted(ranked, key=lambda option: (-option.probability, tie_break(option)))
