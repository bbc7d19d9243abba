"""DDXPlus' evidences as the findings of its source (`release_evidences.json`): each yes/no evidence named by
its English question, with the finding phrases the question asks about as synonyms ("Have you had chills or
shivers?" → "chills or shivers", "chills", "shivers"), each also as the patient says it; and one finding per
body site of the pain and swelling site evidences, a kind of the finding it details ("ear pain" for pain in
the right or the left ear) and, where `data/ddxplus_sites.jsonl` says, of the HPO finding of its body region
("iliac fossa pain" of Abdominal pain), or the same finding ("belly pain" is Abdominal pain). A yes/no
evidence is likewise the HPO finding `data/ddxplus_evidences_hpo.jsonl` names, or a kind of it."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

import srsly

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

# The frame of a DDXPlus yes/no question, stripped to leave the finding ("Do you have a cough?" → "cough").
_QUESTION_FRAME = re.compile(
    r"^(?:do|did|does|have|has|are|is|were|was)\s+(?:you|the person)\s+"
    r"(?:(?:currently|recently|ever|previously|constantly|suddenly|significantly|regularly)\s+)*"
    r"(?:(?:have|had|has|feel|felt|feeling|experiencing|been|noticed|suffer\s+from)\s+)*"
    r"(?:(?:either|any|a|an|the)\s+)?",
    re.IGNORECASE,
)
_ADVERBS = re.compile(r"\b(?:significantly|very|either)\s+", re.IGNORECASE)
_TRAILING = re.compile(
    r"(?:\s+(?:in a significant way|recently|lately)"
    # DDXPlus's reminder that the finding is the one the patient consults for ("pain somewhere, related to
    # your reason for consulting" is pain)
    r"|,?\s+(?:somewhere,?\s+)?(?:that you believe are\s+)?related to (?:your|the) "
    r"(?:reason for consulting|condition you are consulting for))$",
    re.IGNORECASE,
)
_PARENTHESES = re.compile(r"\s*\([^)]*\)")
_OR = re.compile(r"\s+or\s+", re.IGNORECASE)
# After "or", a determiner or a new question starts a phrase of its own ("diarrhea or an increase in stool
# frequency"); without one the parts may share a head ("swollen or painful lymph nodes": not "swollen").
_NEW_PHRASE = re.compile(r"^(?:a|an|any|the|do|did|are|have|has|is)\s", re.IGNORECASE)
_DETERMINER = re.compile(r"^(?:a|an|any|the|that)\s+", re.IGNORECASE)
_QUANTITY_OR = re.compile(r"\b(?:one or both|\d+ or more|or more)\b", re.IGNORECASE)
# Sides of an "or" that do not name a finding by themselves.
_NOT_ALONE = frozenset({"taking", "being treated", "more", "difficulty", "pain", "weakness", "swelling"})
MAX_PART_WORDS = 4
# DDXPlus multi-choice evidences whose values are body sites, the yes/no evidence they detail, how a site
# names the finding and what kind of finding it is: pain in the ear is "ear pain" (one for both sides).
SITE_FINDINGS = {"E_55": ("E_53", "{site} pain", "pain"), "E_152": ("E_151", "{site} swelling", "swelling")}


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
    """A finding per body site of the `SITE_FINDINGS` evidences, a kind of the finding it details and of the
    HPO finding of its region (named by its HPO id, which the vocabulary resolves), or named as that finding
    too when it is the same; its codes are the coded values ("E_55_@_V_129" and "…_V_130" for the right and
    left ear)."""
    regions = site_terms()
    terms = []
    for name, (head, template, kind) in SITE_FINDINGS.items():
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
    return name.rstrip().endswith("?") or (_QUESTION_FRAME.match(name) is not None and len(name.split()) > 2)


def question_phrases(question: str) -> tuple[str, ...]:
    """Finding phrases a yes/no question asks about: the question without its frame, and its short parts
    ("Have you had chills or shivers?" → "chills or shivers", "chills", "shivers"), each also as the patient
    says it ("a wheezing sound when you exhale" → "… when I exhale")."""
    text = _PARENTHESES.sub("", question.replace("’", "'")).strip().rstrip("?").strip()
    text = _TRAILING.sub("", _ADVERBS.sub("", _QUESTION_FRAME.sub("", text))).strip()
    if not text:
        return ()
    phrases = [text, *_alternatives(text), *_list_on_a_part(text)]
    return usable_surfaces([*phrases, *(first_person(phrase) for phrase in phrases)], exclude=question)


# "lesions, redness or problems on your skin": one-word findings sharing the body part they are on
_LIST_ON_PART = re.compile(
    r"^(?P<items>\w+(?:, \w+)+,? or \w+) on (?:your|the) (?P<part>\w+)$", re.IGNORECASE
)


def _list_on_a_part(text: str) -> list[str]:
    """Each finding of a list on one body part, as a patient names it ("skin lesions", "skin redness")."""
    match = _LIST_ON_PART.match(text)
    if match is None:
        return []
    items = re.split(r",\s*(?:or\s+)?|\s+or\s+", match["items"])
    return [f"{match['part']} {item}" for item in items if item]


_SECOND_PERSON = {"your": "my", "yours": "mine", "yourself": "myself", "you're": "I'm"}
_AFTER_OBJECT = re.compile(r"\b(?:as|to|with|for|than|at|from|about|like|of|on|by)\s+you\b", re.IGNORECASE)


def first_person(phrase: str) -> str:
    """A question's second-person phrase in the patient's words: "your" → "my", "you are" → "I am", "you"
    → "me" after a preposition, else "I"."""
    text = _AFTER_OBJECT.sub(lambda m: m.group(0)[:-3] + "me", phrase)
    text = re.sub(r"\byou are\b", "I am", text, flags=re.IGNORECASE)
    text = re.sub(r"\bare you\b", "am I", text, flags=re.IGNORECASE)
    text = re.sub(r"\byou were\b", "I was", text, flags=re.IGNORECASE)
    text = re.sub(
        r"\b(?:your|yours|yourself|you're)\b",
        lambda m: _SECOND_PERSON[m.group(0).lower()],
        text,
        flags=re.IGNORECASE,
    )
    return re.sub(r"\byou\b", "I", text, flags=re.IGNORECASE)


def _alternatives(text: str) -> list[str]:
    """The two sides of one "X or Y", when each is a short phrase that stands alone."""
    parts = _OR.split(text)
    if len(parts) != 2 or "," in parts[0] or _QUANTITY_OR.search(text):
        return []
    first, second = parts
    if len(first.split()) == 1 and len(second.split()) > 1 and not _NEW_PHRASE.match(second):
        return []
    if len(first.split()) > 2 and len(second.split()) == 1:  # "painful mouth ulcers or sores"
        second = ""
    first, second = (_DETERMINER.sub("", _QUESTION_FRAME.sub("", part)) for part in (first, second))
    return [
        part
        for part in (first, second)
        if 0 < len(part.split()) <= MAX_PART_WORDS and part.casefold() not in _NOT_ALONE
    ]


def usable_surfaces(surfaces: Iterable[str], exclude: str) -> tuple[str, ...]:
    excluded = normalize(exclude)
    kept: dict[str, str] = {}
    for surface in surfaces:
        key = normalize(surface)
        if len(key) >= MIN_SURFACE_LENGTH and key != excluded and not key.isdigit():
            kept.setdefault(key, surface.strip())
    return tuple(kept.values())
