"""Words that tell of a crisis (an overdose, a poison swallowed, self-harm, choking, …), read in the person's
text by the language's `crisis.json` patterns, whatever else the text says or the differential makes of it.
A crisis the clause denies ("no thoughts of harming myself") is not one; a negation that only hedges ("I
don't know if she swallowed any") still leaves it one, on the safe side."""

from __future__ import annotations

import re

from pydantic import BaseModel

from clinrag.consult.understand.rules import LanguageRules

# a cue's edge that is a letter of an alphabet must not touch another letter ("no" in "know"); a Chinese cue
# is found as it stands
_LETTER = r"A-Za-zÀ-ÖØ-öø-ÿ'’"


class CrisisMention(BaseModel):
    crisis: str  # the crisis of `clinical_tables/crisis.jsonl`
    text: str  # the words that tell of it
    start: int
    end: int


def crises_in(text: str, rules: LanguageRules) -> list[CrisisMention]:
    """The first mention of each crisis the text tells of, in text order."""
    negations = _negation_cues(rules)
    found = []
    for crisis, patterns in rules.crises.items():
        mention = next(
            (
                match
                for pattern in patterns
                for match in pattern.finditer(text)
                if not _denied(text[: match.start()], negations, rules)
            ),
            None,
        )
        if mention is not None:
            found.append(
                CrisisMention(crisis=crisis, text=mention.group(0), start=mention.start(), end=mention.end())
            )
    return sorted(found, key=lambda mention: mention.start)


def _negation_cues(rules: LanguageRules) -> re.Pattern[str] | None:
    cues = sorted(rules.termsets["NEGATED_EXISTENCE"]["preceding_negations"], key=len, reverse=True)
    if not cues:
        return None
    alternatives = "|".join(re.escape(cue) for cue in cues)
    return re.compile(rf"(?i)(?<![{_LETTER}])(?:{alternatives})(?![{_LETTER}])")


def _denied(before: str, negations: re.Pattern[str] | None, rules: LanguageRules) -> bool:
    """Whether the clause that ends where the crisis words begin denies them: its last negation cue is not
    followed by a word of doubt ("not sure", "don't know")."""
    if negations is None:
        return False
    clause = rules.pattern("clause_split").split(before)[-1]
    cues = list(negations.finditer(clause))
    return bool(cues) and not rules.pattern("unsure").search(clause[cues[-1].end() :])
