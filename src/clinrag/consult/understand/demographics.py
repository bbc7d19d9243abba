"""The patient's age and sex, the complaint's duration and onset, and whom the account is about (the one
writing, or a child or another person they describe), read by a language's patterns and tables
(`resources/<language>/patterns.json`, `numbers.json`, `units.json`, `since.json`, the word set `female` of
`word_sets.json`): the pipeline's last pipe."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel

from clinrag.consult.understand.rules import LanguageRules

if TYPE_CHECKING:  # annotations only: reading a report (the CLI's printer) needs no spaCy
    from spacy.tokens import Doc, Span

Sex = Literal["female", "male"]
Onset = Literal["sudden", "gradual"]
Subject = Literal["child", "other"]  # whom an account is about when it is not the one writing
MAX_AGE = 120


class Duration(BaseModel):
    text: str
    days: float | None = None


class OnsetPhrase(BaseModel):
    kind: Onset
    text: str


class Demographics:
    def __init__(self, rules: LanguageRules) -> None:
        self.rules = rules

    def __call__(self, doc: Doc) -> Doc:
        text = doc.text
        doc._.age = self.age(text)
        doc._.sex = self.sex(text)
        doc._.duration = self.duration(text)
        doc._.onset = self.onset(text)
        doc._.subject, doc._.self_told = self.teller(doc)
        return doc

    def teller(self, doc: Doc) -> tuple[Subject | None, bool]:
        """Whom the account is about, and whether the writer tells of themselves. A child or another person
        the writer describes ("My 3-year-old has …", "My father …") is one the first sentence introduces
        before the writer speaks of themselves ("I …"); else the subject is None, and the writer tells of
        themselves when they speak of themselves there ("I have a sore throat; my son had it last week")."""
        first = first_sentence(doc).text
        writer = self.rules.pattern("self_told").search(first)
        for subject in ("child", "other"):
            found = self.rules.pattern(f"{subject}_told").search(first)
            if found and (writer is None or found.start() < writer.start()):
                return subject, False  # type: ignore[return-value]
        return None, writer is not None

    def age(self, text: str) -> int | None:
        for pattern in self.rules.patterns["age"]:
            for match in pattern.finditer(text):
                age = int(match.group(1))
                if 0 < age < MAX_AGE:
                    return age
        return None

    def sex(self, text: str) -> Sex | None:
        female = self.rules.words("female")
        for pattern in self.rules.patterns["sex"]:
            if match := pattern.search(text):
                return "female" if match.group(1).lower() in female else "male"
        if self.rules.pattern("first_person").search(text):
            return None  # the patient speaks: "he"/"she" is someone else
        he = len(self.rules.pattern("he").findall(text))
        she = len(self.rules.pattern("she").findall(text))
        return "male" if he > she else "female" if she > he else None

    def duration(self, text: str) -> Duration | None:
        # How long, framed as such ("for three days", "over the last week"), before when ("three days
        # ago": an event's time, maybe not the complaint's); a bare "a day" is a rate ("a pack a day"), not
        # how long. The count and the unit come from whichever of the pattern's frames matched.
        found = list(self.rules.pattern("duration").finditer(text))
        if match := next((m for m in found if m.group(1)), found[0] if found else None):
            count, unit = (group.lower() for group in match.groups() if group)
            number = float(count) if count[0].isdigit() else float(self.rules.numbers[count])
            days = number * self.rules.unit_days[unit]
            return Duration(text=match.group(0).strip(), days=round(days, 3))
        if match := self.rules.pattern("since").search(text):
            return Duration(text=match.group(0), days=self.rules.since_days[match.group(1).lower()])
        return None

    def onset(self, text: str) -> OnsetPhrase | None:
        found = [
            (match.start(), kind, match.group(0))
            for kind in ("sudden", "gradual")
            if (match := self.rules.pattern(kind).search(text))
        ]
        if not found:
            return None
        _, kind, phrase = min(found)
        return OnsetPhrase(kind=kind, text=phrase)


def first_sentence(doc: Doc) -> Span:
    """The account's first sentence, where it says whom the account is about."""
    return next(iter(doc.sents), doc[:]) if doc.has_annotation("SENT_START") else doc[:]
