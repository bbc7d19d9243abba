"""DDXPlus' evidences as the findings of its source (`release_evidences.json`): each yes/no evidence named by
its English question, with the finding phrases the question asks about as synonyms ("Have you had chills or
shivers?" → "chills or shivers", "chills", "shivers"), each also as the patient says it; and one finding per
body site of the pain and swelling site evidences, a kind of the finding it details ("ear pain" for pain in
the right or the left ear) and, where `data/ddxplus_sites.jsonl` says, of the HPO finding of its body region
("iliac fossa pain" of Abdominal pain), or the same finding ("belly pain" is Abdominal pain). A yes/no
evidence is likewise the HPO finding `data/ddxplus_evidences_hpo.jsonl` names, or a kind of it.

The English of the questions is data, one record shape per file (`data/`):

- `ddxplus_question_patterns_en.json`: `{"name", "pattern", "why"}`: the regular expressions (flags inline,
  "(?i)") that strip a question's frame and split its alternatives;
- `ddxplus_question_words_en.json`: `{"name", "words", "why"}`: word sets (the sides of an "or" that name no
  finding alone);
- `ddxplus_first_person_en.json`: `{"pattern", "replacement", "why"}`: the rewrites, in order, that put a
  second-person phrase in the patient's words;
- `ddxplus_site_findings_en.json`: `{"evidence", "details", "template", "kind", "why"}`: the multi-choice
  evidences whose values are body sites, and how a site names its finding."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

import srsly

from clinrag.core.errors import DataFormatError
from clinrag.graph.importers.records import FindingTerm
from clinrag.graph.matching import normalize
from clinrag.patients.loaders import NOWHERE, VALUE_SEPARATOR, EvidenceDecoder, site_and_side

EVIDENCES = "release_evidences.json"
# (kind, DDXPlus site) → the HPO finding of that body region: {"kind", "site", "hpo", "label", "same"}
SITE_TERMS = Path(__file__).parent / "data" / "ddxplus_sites.jsonl"
# a yes/no evidence → the HPO finding it is, or is a kind of: {"evidence", "question", "hpo", "label", "same"}
EVIDENCE_TERMS = Path(__file__).parent / "data" / "ddxplus_evidences_hpo.jsonl"
ID_PREFIX = "ddxplus:"
MIN_SURFACE_LENGTH = 3  # shorter surface forms ("Ab", "QT") match ordinary words more often than findings
MAX_PART_WORDS = 4  # the longest side of an "or" kept as a finding phrase of its own
# the English of the questions (see the module docstring); every pattern and word set the code names
DATA = Path(__file__).parent / "data"
QUESTION_PATTERNS = DATA / "ddxplus_question_patterns_en.json"
QUESTION_WORDS = DATA / "ddxplus_question_words_en.json"
FIRST_PERSON = DATA / "ddxplus_first_person_en.json"
SITE_FINDING_NAMES = DATA / "ddxplus_site_findings_en.json"
_PATTERN_NAMES = (
    "question_frame",
    "adverbs",
    "trailing",
    "parentheses",
    "or",
    "new_phrase",
    "determiner",
    "quantity_or",
    "list_on_part",
    "list_separator",
)
_WORD_SET_NAMES = ("not_alone",)


def ddxplus_findings(folder: str | Path, *, antecedents: bool = True) -> list[FindingTerm]:
    """The yes/no evidences (`data_type` "B") of a DDXPlus release folder (or its evidences file) and the site
    findings; `antecedents=False` keeps the symptoms only. Where `data/ddxplus_evidences_hpo.jsonl` says, an
    evidence is an HPO finding (named by its label too: "a cough that produces colored or more abundant
    sputum" is Productive cough) or a kind of one (named by its HPO id, which the vocabulary resolves), and
    which HPO findings its question's other choices name ("… or a clear runny nose": Rhinorrhea)."""
    path = Path(folder)
    decoder = EvidenceDecoder.from_file(path / EVIDENCES if path.is_dir() else path.parent / EVIDENCES)
    links = evidence_terms()
    terms = []
    for name, entry in decoder.evidences.items():
        question = decoder.question(name)
        if entry.get("data_type") != "B" or question is None:
            continue
        if not antecedents and decoder.is_antecedent(name):
            continue
        # the HPO finding it is (its label first, so the vocabulary joins the two) or is a kind of
        link = links.get(name)
        same = (link["label"],) if link is not None and link["same"] else ()
        broader = (link["hpo"],) if link is not None and not link["same"] else ()
        terms.append(
            FindingTerm(
                f"{ID_PREFIX}{name}",
                question,
                usable_surfaces([*same, *question_phrases(question)], exclude=question),
                parents=broader,
                question=question,
                codes=(name,),
                kinds=tuple(kind["hpo"] for kind in link["kinds"]) if link is not None else (),
            )
        )
    return terms + _site_findings(decoder)


def evidence_terms(path: Path = EVIDENCE_TERMS) -> dict[str, dict]:
    """Evidence code → its HPO finding: {"hpo": "HP:0031245", "label": "Productive cough", "same": bool,
    "kinds": [{"hpo", "label"}, …]} (the HPO findings its question's other choices name)."""
    return {row["evidence"]: row for row in srsly.read_jsonl(path)}


def site_terms(path: Path = SITE_TERMS) -> dict[tuple[str, str], dict]:
    """(kind, site) → its HPO finding: {"hpo": "HP:0002027", "label": "Abdominal pain", "same": bool}."""
    return {(row["kind"], row["site"]): row for row in srsly.read_jsonl(path)}


def _site_findings(decoder: EvidenceDecoder) -> list[FindingTerm]:
    """A finding per body site of the `site_findings()` evidences, a kind of the finding it details and of the
    HPO finding of its region (named by its HPO id, which the vocabulary resolves), or named as that finding
    too when it is the same; its codes are the coded values ("E_55_@_V_129" and "…_V_130" for the right and
    left ear)."""
    regions = site_terms()
    terms = []
    for name, (head, template, kind) in site_findings().items():
        by_site: dict[str, list[str]] = {}
        for value, meaning in decoder.evidences.get(name, {}).get("value_meaning", {}).items():
            site = site_and_side(meaning.get("en", ""))[0].strip()
            if value != NOWHERE and site:
                by_site.setdefault(site, []).append(f"{name}{VALUE_SEPARATOR}{value}")
        for site, codes in by_site.items():
            words = site.split()
            region = regions.get((kind, site))
            parents = (f"{ID_PREFIX}{head}",)
            if region is not None and not region["same"]:
                parents += (region["hpo"],)
            terms.append(
                FindingTerm(
                    f"{ID_PREFIX}{codes[0]}",
                    template.format(site=site),
                    synonyms=(region["label"],) if region is not None and region["same"] else (),
                    parents=parents,
                    site=(site.casefold(), kind) if len(words) == 1 and site.isalpha() else None,
                    codes=tuple(codes),
                )
            )
    return terms


def is_question(name: str) -> bool:
    """Whether a finding is named by the question that asks about it (DDXPlus: "Do you have a cough?"),
    with or without its question mark (a normalised name loses it)."""
    frame = question_pattern("question_frame")
    return name.rstrip().endswith("?") or (frame.match(name) is not None and len(name.split()) > 2)


def question_phrases(question: str) -> tuple[str, ...]:
    """Finding phrases a yes/no question asks about: the question without its frame, and its short parts
    ("Have you had chills or shivers?" → "chills or shivers", "chills", "shivers"), each also as the patient
    says it ("a wheezing sound when you exhale" → "… when I exhale")."""
    pattern = question_pattern
    text = pattern("parentheses").sub("", question.replace("’", "'")).strip().rstrip("?").strip()
    text = pattern("question_frame").sub("", text)
    text = pattern("trailing").sub("", pattern("adverbs").sub("", text)).strip()
    if not text:
        return ()
    phrases = [text, *_alternatives(text), *_list_on_a_part(text)]
    return usable_surfaces([*phrases, *(first_person(phrase) for phrase in phrases)], exclude=question)


def _list_on_a_part(text: str) -> list[str]:
    """Each finding of a list on one body part, as a patient names it ("skin lesions", "skin redness")."""
    match = question_pattern("list_on_part").match(text)
    if match is None:
        return []
    items = question_pattern("list_separator").split(match["items"])
    return [f"{match['part']} {item}" for item in items if item]


def first_person(phrase: str) -> str:
    """A question's second-person phrase in the patient's words: "your" → "my", "you are" → "I am", "you"
    → "me" after a preposition, else "I"."""
    for pattern, replacement in first_person_rewrites():
        phrase = pattern.sub(replacement, phrase)
    return phrase


def _alternatives(text: str) -> list[str]:
    """The two sides of one "X or Y", when each is a short phrase that stands alone."""
    pattern = question_pattern
    parts = pattern("or").split(text)
    if len(parts) != 2 or "," in parts[0] or pattern("quantity_or").search(text):
        return []
    first, second = parts
    if len(first.split()) == 1 and len(second.split()) > 1 and not pattern("new_phrase").match(second):
        return []
    if len(first.split()) > 2 and len(second.split()) == 1:  # "painful mouth ulcers or sores"
        second = ""
    first, second = (
        pattern("determiner").sub("", pattern("question_frame").sub("", part)) for part in (first, second)
    )
    not_alone = question_words("not_alone")
    return [
        part
        for part in (first, second)
        if 0 < len(part.split()) <= MAX_PART_WORDS and part.casefold() not in not_alone
    ]


def usable_surfaces(surfaces: Iterable[str], exclude: str) -> tuple[str, ...]:
    excluded = normalize(exclude)
    kept: dict[str, str] = {}
    for surface in surfaces:
        key = normalize(surface)
        if len(key) >= MIN_SURFACE_LENGTH and key != excluded and not key.isdigit():
            kept.setdefault(key, surface.strip())
    return tuple(kept.values())


def question_pattern(name: str) -> re.Pattern[str]:
    """The regular expression `name` of `ddxplus_question_patterns_en.json`."""
    return _question_patterns()[name]


def question_words(name: str) -> frozenset[str]:
    """The word set `name` of `ddxplus_question_words_en.json`."""
    return _question_words()[name]


@cache
def first_person_rewrites() -> tuple[tuple[re.Pattern[str], str], ...]:
    """The rewrites of `ddxplus_first_person_en.json`, in order: (pattern, its `re.sub` replacement)."""
    return tuple(
        (_compile(FIRST_PERSON, record["pattern"]), record["replacement"])
        for record in _records(FIRST_PERSON, ("pattern", "replacement"))
    )


@cache
def site_findings() -> dict[str, tuple[str, str, str]]:
    """The multi-choice evidences whose values are body sites → (the yes/no evidence they detail, how a site
    names the finding, what kind of finding it is): pain in the ear is "ear pain" (one for both sides)."""
    fields = ("evidence", "details", "template", "kind")
    return {
        r["evidence"]: (r["details"], r["template"], r["kind"]) for r in _records(SITE_FINDING_NAMES, fields)
    }


@cache
def _question_patterns() -> dict[str, re.Pattern[str]]:
    records = _records(QUESTION_PATTERNS, ("name", "pattern"))
    return _named(
        QUESTION_PATTERNS,
        {r["name"]: _compile(QUESTION_PATTERNS, r["pattern"]) for r in records},
        _PATTERN_NAMES,
        len(records),
    )


@cache
def _question_words() -> dict[str, frozenset[str]]:
    records = _records(QUESTION_WORDS, ("name", "words"))
    return _named(
        QUESTION_WORDS, {r["name"]: frozenset(r["words"]) for r in records}, _WORD_SET_NAMES, len(records)
    )


def _named(path: Path, found: dict[str, Any], expected: tuple[str, ...], count: int) -> dict[str, Any]:
    """`found`, checked to hold each name of `expected` once."""
    if len(found) != count:
        raise DataFormatError(f"{path}: a name is given twice")
    missing = [name for name in expected if name not in found]
    if missing:
        raise DataFormatError(f"{path}: no record named {', '.join(missing)}")
    return found


def _records(path: Path, fields: tuple[str, ...]) -> list[dict[str, Any]]:
    """The records of a JSON list file, each an object with a string for each of `fields` (a list of strings
    for "words"); any other field ("why") is a comment."""
    try:
        records = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DataFormatError(f"{path}: cannot read the DDXPlus question rules ({exc})") from exc
    if not isinstance(records, list):
        raise DataFormatError(f"{path}: not a JSON list of records")
    for number, record in enumerate(records, 1):
        if not isinstance(record, dict) or not all(_well_typed(name, record.get(name)) for name in fields):
            raise DataFormatError(
                f"{path}: record {number} is not {{{', '.join(map(repr, fields))}}}: {record!r}"
            )
    return records


def _well_typed(name: str, value: Any) -> bool:
    if name == "words":
        return isinstance(value, list) and all(isinstance(word, str) for word in value)
    return isinstance(value, str)


def _compile(path: Path, pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise DataFormatError(f"{path}: malformed pattern {pattern!r} ({exc})") from exc
