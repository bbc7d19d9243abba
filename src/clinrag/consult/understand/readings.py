"""Measured readings in the text ("my temperature is 38.7", "102F"): each stated or denied finding of the
clinical readings table (`clinical_tables/readings.jsonl`), found by the language's patterns named by the
reading's quantity (`patterns.json`, the number as the first group). The number is the mention; its status
is the reading's (`span._.reading`), and the ConText scopes still apply ("it has never been above 38")."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from spacy.language import Language
from spacy.tokens import Doc, Span
from spacy.util import filter_spans

from clinrag.consult.clinical import Reading, packaged_tables
from clinrag.consult.understand.rules import LanguageRules, rules_for
from clinrag.consult.understand.scopes import LABEL
from clinrag.consult.understand.vocabulary import Vocabulary

Span.set_extension("reading", default=None, force=True)  # "present" / "absent": what a reading says


@Language.factory("clinrag_readings")
def make_readings(nlp: Language, name: str, language: str, rules: str) -> ReadingsPipe:
    """`language` and `rules` (their fingerprint): the rules the pipe reads (`rules.pipe_config`)."""
    return ReadingsPipe(rules_for(language, rules), packaged_tables().readings)


class ReadingsPipe:
    def __init__(self, rules: LanguageRules, readings: Iterable[Reading]) -> None:
        self.rules = rules
        self.readings = tuple(readings)
        self.concepts: dict[str, str] = {}  # quantity → the concept id of its finding in the vocabulary

    def resolve(self, vocabulary: Vocabulary) -> None:
        """Each reading's finding as a concept id: its HPO label, as the vocabulary names it."""
        self.concepts = {
            reading.quantity: concept.id
            for reading in self.readings
            if (concept := vocabulary.first_known((reading.label,))) is not None
        }

    def __call__(self, doc: Doc) -> Doc:
        found: list[Span] = []
        for reading in self.readings:
            concept = self.concepts.get(reading.quantity)
            if concept is None:
                continue
            for pattern in self.rules.patterns.get(reading.quantity, []):
                for match in pattern.finditer(doc.text):
                    value = self._value(match.group(1), reading)
                    status = reading.status(value) if value is not None else None
                    span = doc.char_span(match.start(1), match.end(1), alignment_mode="expand")
                    if status is None or span is None:
                        continue
                    span = Span(doc, span.start, span.end, label=LABEL, span_id=concept)
                    span._.reading = status
                    found.append(span)
        if found:  # a number inside a phrase already matched is that phrase's
            taken = {i for ent in doc.ents for i in range(ent.start, ent.end)}
            free = [s for s in filter_spans(found) if not taken & set(range(s.start, s.end))]
            doc.ents = sorted([*doc.ents, *free], key=lambda span: span.start)
        return doc

    @staticmethod
    def _value(number: str, reading: Reading) -> float | None:
        """The reading in its unit, or None when the number is not a plausible one."""
        value = float(number.replace(",", "."))
        low, high = reading.plausible
        if not low <= value <= high and reading.unit == "°C":
            # a body temperature in Fahrenheit is a number no Celsius one is (93-110 against 34-43), so
            # the value names the scale when the patient does not
            value = (value - 32.0) * 5.0 / 9.0
        return value if low <= value <= high else None

    def to_disk(self, path: str | Path, *, exclude: Iterable[str] = ()) -> None:
        Path(path).mkdir(parents=True, exist_ok=True)
        (Path(path) / "concepts.json").write_text(json.dumps(self.concepts), encoding="utf-8")

    def from_disk(self, path: str | Path, *, exclude: Iterable[str] = ()) -> ReadingsPipe:
        self.concepts = json.loads((Path(path) / "concepts.json").read_text(encoding="utf-8"))
        return self
