"""The language rules of the finding extractor, read from data files under `resources/<language>/`, one
record shape per file (as medspaCy keeps `resources/en/context_rules.json`):

- `language.json`: the spaCy language of the tokenizer, the negspacy termset the negation cues extend, and
  whether a clause no phrase matches is matched by meaning (`meaning`: an embedder of the language's text);
- `context_rules.json`: ConText cues `{"literal", "category", "direction"}`. Categories: NEGATED_EXISTENCE,
  POSSIBLE_EXISTENCE (hedging), FAMILY (someone else's finding), EXCLUDED ("no other pain"), ANY (a
  termination for every category). Directions: FORWARD (the cue precedes the finding), BACKWARD (follows it),
  TERMINATE (ends a cue's scope), PSEUDO (looks like a cue but is not);
- `lay_phrases.json`: `{"phrase", "targets"}`: an everyday phrase and the names a vocabulary may give its
  finding, first known wins;
- `word_sets.json`: `{"name", "words"}`: the word classes the constructions and clause rules use, and the
  words that say a patient is female (`female`); in English, the knowledge's language, the prepositions
  after a finding name's head (`head_prepositions`: "pain in the chest" is a kind of pain);
- `constructions.json`: `{"cues", "parts", "default", "site", "refine"}`: a cue word near a body part names
  the part's finding ("pain … in my chest" → chest pain);
- `nearby.json`: `{"cues", "before", "after", "words", "targets", "followed_by", "cue_only"}`: a cue word
  with a word of a class within a window (followed by a word of the class `followed_by`, when given; ahead
  of the cue, within its clause) names a finding ("coughing up green phlegm" → productive cough; "a squeaky
  noise when breathing in" → stridor), the first record matching wins; with `cue_only` the cue word alone
  is the mention ("… worse when I take a deep breath or lie flat": the pain keeps its own);
- `patterns.json`: `{"name", "pattern"}`: the regular expressions of age, sex, duration, onset and clauses;
- `numbers.json`: `{"word", "value"}`: the number a word says ("three" → 3, "a few" → 3);
- `units.json`: `{"unit", "days"}`: a unit of time in days ("week" → 7);
- `since.json`: `{"phrase", "days"}`: how many days ago a phrase of when says ("yesterday" → 1);
- `plain_words.json`: `{"word", "plain"}`: the plain word for slang ("tummy" → stomach), read by meaning;
- `meaning_frames.json`: `{"frame", "text"}`: how the meaning pipe frames a finding: `statement`, a
  finding's name as a patient says it ("I have {}"), and `sentinel`, a word that stands for a finding;
- `templates.json`: `{"key", "text"}`: the answer's sentences and words (`answer.compose`), with their
  placeholders (`{items}`, `{duration}`, …);
- `crisis.json`: `{"crisis", "pattern"}`: the regular expressions of words that tell of a crisis of
  `clinical_tables/crisis.jsonl` (an overdose, self-harm), read whatever else the text says.

Adding a lay phrase is one line of `lay_phrases.json`.

A spaCy pipe of the finding pipeline is given its rules through its factory's config, as spaCy and medspaCy
configure a component: the language and the fingerprint of the rules it was built with
(`pipe_config(rules)`), saved with the pipeline (`nlp.to_disk`) and read back by `rules_for` when it is
loaded, which refuses rules other than those."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from clinrag.core.errors import DataFormatError, InvalidInputError

RESOURCES = Path(__file__).parent / "resources"
CATEGORIES = ("NEGATED_EXISTENCE", "POSSIBLE_EXISTENCE", "FAMILY", "EXCLUDED")
# ConText's directions as negspacy names its termset's lists
_TERMSET_KEYS = {
    "PSEUDO": "pseudo_negations",
    "FORWARD": "preceding_negations",
    "BACKWARD": "following_negations",
    "TERMINATE": "termination",
}
_FILES = (
    "language.json",
    "context_rules.json",
    "lay_phrases.json",
    "word_sets.json",
    "constructions.json",
    "nearby.json",
    "patterns.json",
    "numbers.json",
    "units.json",
    "since.json",
    "plain_words.json",
    "meaning_frames.json",
    "crisis.json",
    "templates.json",
)


class UnsupportedLanguageError(InvalidInputError):
    """Input in a language the extractor has no rules for: refused, never parsed as another language."""


@dataclass(frozen=True)
class Refinement:
    """A body part's finding made more precise by a word class near it ("lower back" → low back pain;
    "chest … when I breathe" → pleuritic chest pain, the mention then reaching the breathing word)."""

    part: str
    targets: tuple[str, ...]
    within: int
    before: str | None = None  # the word class within `within` words before the part
    after: str | None = None  # … or after it
    extend: bool = False


@dataclass(frozen=True)
class Construction:
    cues: str  # a word set's name
    parts: dict[str, tuple[str, ...]]
    default: tuple[str, ...] = ()  # the finding when no part is near the cue
    site: str | None = None  # the word the knowledge's site findings end with ("tonsil pain": "pain")
    refine: tuple[Refinement, ...] = ()


@dataclass(frozen=True)
class Nearby:
    cues: str
    before: int
    after: int
    words: str
    targets: tuple[str, ...]
    followed_by: str | None = None  # a class the near word must be followed by ("breathing" + "in")
    # the cue word alone is the mention: the rule names how another finding behaves ("… worse when I lie
    # flat"), and that finding's own mention may hold the near word
    cue_only: bool = False


@dataclass(frozen=True)
class MeaningFrames:
    statement: str  # a finding's name as a patient says it ("I have {}")
    sentinel: str  # a word that stands for a finding ("finding")


@dataclass(frozen=True)
class LanguageRules:
    language: str
    spacy_language: str
    meaning: bool  # clauses no phrase matches are matched by meaning (an embedder reads the language)
    termsets: dict[str, dict[str, list[str]]]  # category → negspacy termset
    lay_phrases: dict[str, tuple[str, ...]]
    word_sets: dict[str, frozenset[str]]
    constructions: tuple[Construction, ...]
    nearby: tuple[Nearby, ...]
    patterns: dict[str, tuple[re.Pattern[str], ...]]
    numbers: dict[str, float]  # number word → its value
    unit_days: dict[str, float]  # unit of time → days
    since_days: dict[str, float]  # phrase of when → days ago
    plain_words: dict[str, str]  # slang → plain word
    meaning_frames: MeaningFrames
    crises: dict[str, tuple[re.Pattern[str], ...]]  # crisis → the words that tell of it
    templates: dict[str, str]  # the answer's templates by key
    fingerprint: str = field(default="")

    def words(self, name: str) -> frozenset[str]:
        return self.word_sets[name]

    def pattern(self, name: str) -> re.Pattern[str]:
        return self.patterns[name][0]

    def targets(self) -> list[tuple[str, tuple[str, ...]]]:
        """Every rule's target names, with where the rule is (for the check that each resolves)."""
        found = [(f"lay_phrases.json: {phrase}", names) for phrase, names in self.lay_phrases.items()]
        for construction in self.constructions:
            for part, names in construction.parts.items():
                found.append((f"constructions.json: {construction.cues} + {part}", names))
            if construction.default:
                found.append((f"constructions.json: {construction.cues}", construction.default))
            found += [
                (f"constructions.json: {construction.cues} + {r.part} refined", r.targets)
                for r in construction.refine
            ]
        found += [(f"nearby.json: {n.cues} + {n.words}", n.targets) for n in self.nearby]
        return found


def languages() -> tuple[str, ...]:
    """The languages the extractor has rules for."""
    return tuple(sorted(path.name for path in RESOURCES.iterdir() if (path / "language.json").is_file()))


@cache
def load_rules(language: str) -> LanguageRules:
    folder = RESOURCES / language
    if not (folder / "language.json").is_file():
        raise UnsupportedLanguageError(
            f"no finding rules for language {language!r}; the extractor reads: {', '.join(languages())}"
        )
    raw = {name: _read(folder / name) for name in _FILES}
    digest = hashlib.sha256(b"".join((folder / name).read_bytes() for name in _FILES)).hexdigest()[:16]
    try:
        return _rules(language, raw, digest)
    except (KeyError, TypeError, ValueError, re.error) as exc:
        raise DataFormatError(f"{folder}: malformed finding rules ({exc!r})") from exc


def pipe_config(rules: LanguageRules) -> dict[str, str]:
    """The factory config of a pipe that reads `rules`: their language and fingerprint."""
    return {"language": rules.language, "rules": rules.fingerprint}


def rules_for(language: str, fingerprint: str) -> LanguageRules:
    """The rules of `language` a pipe's factory config names, which must be those of `fingerprint` (the rules
    the pipe was built with): a pipeline saved with other rules is an error, never read with these."""
    rules = load_rules(language)
    if rules.fingerprint != fingerprint:
        raise DataFormatError(
            f"a finding pipe was built with the {language!r} rules {fingerprint!r}, not the installed ones "
            f"({rules.fingerprint!r}); delete the saved pipeline to rebuild it"
        )
    return rules


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DataFormatError(f"{path}: cannot read the finding rules ({exc})") from exc


def _rules(language: str, raw: dict[str, Any], digest: str) -> LanguageRules:
    settings = raw["language.json"]
    word_sets = {record["name"]: frozenset(record["words"]) for record in raw["word_sets.json"]}
    constructions = tuple(
        Construction(
            cues=_known(record["cues"], word_sets),
            parts={part: tuple(names) for part, names in record["parts"].items()},
            default=tuple(record.get("default", ())),
            site=record.get("site"),
            refine=tuple(
                Refinement(
                    part=r["part"],
                    targets=tuple(r["targets"]),
                    within=int(r["within"]),
                    before=_known(r["before"], word_sets) if "before" in r else None,
                    after=_known(r["after"], word_sets) if "after" in r else None,
                    extend=bool(r.get("extend", False)),
                )
                for r in record.get("refine", ())
            ),
        )
        for record in raw["constructions.json"]
    )
    nearby = tuple(
        Nearby(
            cues=_known(r["cues"], word_sets),
            before=int(r["before"]),
            after=int(r["after"]),
            words=_known(r["words"], word_sets),
            targets=tuple(r["targets"]),
            followed_by=_known(r["followed_by"], word_sets) if r.get("followed_by") else None,
            cue_only=bool(r.get("cue_only", False)),
        )
        for r in raw["nearby.json"]
    )
    patterns: dict[str, list[re.Pattern[str]]] = {}
    for record in raw["patterns.json"]:
        patterns.setdefault(record["name"], []).append(re.compile(record["pattern"]))
    crises: dict[str, list[re.Pattern[str]]] = {}
    for record in raw["crisis.json"]:
        crises.setdefault(record["crisis"], []).append(re.compile(record["pattern"]))
    frames = {record["frame"]: record["text"] for record in raw["meaning_frames.json"]}
    return LanguageRules(
        language=language,
        spacy_language=settings["spacy"],
        meaning=bool(settings["meaning"]),
        termsets=_termsets(raw["context_rules.json"], settings.get("negex_base")),
        lay_phrases={r["phrase"]: tuple(r["targets"]) for r in raw["lay_phrases.json"]},
        word_sets=word_sets,
        constructions=constructions,
        nearby=nearby,
        patterns={name: tuple(found) for name, found in patterns.items()},
        numbers={record["word"]: record["value"] for record in raw["numbers.json"]},
        unit_days={record["unit"]: record["days"] for record in raw["units.json"]},
        since_days={record["phrase"]: record["days"] for record in raw["since.json"]},
        plain_words={record["word"]: record["plain"] for record in raw["plain_words.json"]},
        meaning_frames=MeaningFrames(statement=frames["statement"], sentinel=frames["sentinel"]),
        crises={name: tuple(found) for name, found in crises.items()},
        templates={record["key"]: record["text"] for record in raw["templates.json"]},
        fingerprint=digest,
    )


def _known(name: str, word_sets: dict[str, frozenset[str]]) -> str:
    if name not in word_sets:
        raise ValueError(f"no word set {name!r} in word_sets.json")
    return name


def _termsets(records: list[dict[str, str]], base: str | None) -> dict[str, dict[str, list[str]]]:
    """A negspacy termset per ConText category. The negation cues extend negspacy's `base` termset, whose
    terminations end every category's scope, as the ANY terminations do."""
    base_terms: dict[str, list[str]] = {key: [] for key in _TERMSET_KEYS.values()}
    if base is not None:
        from negspacy.termsets import termset

        base_terms = {key: list(values) for key, values in termset(base).get_patterns().items()}
    termsets = {category: {key: [] for key in _TERMSET_KEYS.values()} for category in CATEGORIES}
    for key, values in base_terms.items():
        target = CATEGORIES if key == "termination" else ("NEGATED_EXISTENCE",)
        for category in target:
            termsets[category][key].extend(values)
    for record in records:
        key = _TERMSET_KEYS[record["direction"]]
        category = record["category"]
        for target in CATEGORIES if category == "ANY" else (category,):
            if record["literal"] not in termsets[target][key]:
                termsets[target][key].append(record["literal"])
    return termsets
