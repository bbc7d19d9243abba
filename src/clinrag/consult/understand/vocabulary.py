"""The concepts a consultation can understand: HPO phenotypes, the findings a source names in its own
vocabulary (DDXPlus' evidences), plain symptom names.

A `Vocabulary` maps every surface form (a name or a synonym, normalised) to one concept. Vocabularies from
different knowledge are merged by shared surface forms, so the graph symptom "fever", HPO "Fever" and DDXPlus
"Do you have a fever (…)?" become one concept that keeps every id (`Concept.ids`). What a concept is — a
patient's word, askable, worded as a question — comes from the traits its sources declare
(`graph.importers.records.SourceTraits`), never from its ids."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from functools import cache, cached_property
from pathlib import Path

import srsly

from clinrag.consult.diseases import KNOWLEDGE_LANGUAGE
from clinrag.consult.understand.rules import load_rules
from clinrag.core.errors import DataFormatError
from clinrag.graph.importers.ddxplus_findings import is_question, usable_surfaces
from clinrag.graph.importers.records import FindingTerm, SourceTraits
from clinrag.graph.importers.registry import graph_source, source_findings
from clinrag.graph.matching import normalize
from clinrag.terms.hpo import PHENOTYPIC_ABNORMALITY, descendants, hpo_terms, is_hpo_id

HPO_SOURCE = "hpo"


@dataclass(frozen=True)
class Concept:
    id: str  # "hpo:HP:0001945", "ddxplus:E_201", "symptom:cough"
    name: str  # the preferred name as its knowledge names it (DDXPlus: the English question)
    synonyms: tuple[str, ...] = ()
    source: str = ""
    also: tuple[str, ...] = ()  # ids of the concepts merged into this one
    parents: tuple[str, ...] = ()  # ids of the broader concepts it is a kind of (HPO is_a)
    lay: bool = False  # a source names it in patients' words
    askable: bool = False  # a patient can be asked about it
    plain: str | None = None  # the name a plain symptom list gives it
    question: str | None = None  # the question a source asks about it
    site: tuple[str, str] | None = None  # a finding at one body site: (site word, kind)
    codes: tuple[str, ...] = ()  # the codes patients' records give it
    layperson: str | None = None  # how laypeople name it, where its source says (HPO's layperson synonyms)
    kinds: tuple[str, ...] = ()  # ids or codes of narrower concepts its source says are kinds of it

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
    index: dict[str, int] | None = None  # normalised surface → concept position (computed when not given)
    # the knowledge's names looked up before (`known`), as written → their concept
    _known: dict[str, Concept | None] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.index is None:
            index: dict[str, int] = {}
            for k, concept in enumerate(self.concepts):
                index.setdefault(normalize(concept.name), k)
            for k, concept in enumerate(self.concepts):
                for synonym in concept.synonyms:
                    index.setdefault(normalize(synonym), k)
            index.pop("", None)
            self.index = index
        self._by_code = {code: concept for concept in self.concepts for code in concept.codes}

    def __len__(self) -> int:
        return len(self.concepts)

    @cached_property
    def parents(self) -> dict[str, tuple[str, ...]]:
        """Concept id → the ids of the broader concepts it is a kind of (built once, read by every part)."""
        return {concept.id: concept.parents for concept in self.concepts}

    def broader(self, concepts: Iterable[str]) -> set[str]:
        """Every concept the given ones are kinds of, up the hierarchy; one of them is in it only as a kind of
        another ("cough" for "cough" and "barking cough")."""
        parents = self.parents
        return {above for concept in concepts for above in reachable(concept, parents)[1:]}

    def lookup(self, name: str) -> Concept | None:
        assert self.index is not None
        k = self.index.get(normalize(name))
        return None if k is None else self.concepts[k]

    def known(self, name: str) -> Concept | None:
        """`lookup` of a name the knowledge gives (a disease's symptom), remembered: a report looks up every
        symptom of the diseases it lists, and normalising costs more than looking up. The knowledge's names
        are finite; a patient's words go through `lookup`, which keeps nothing."""
        if name not in self._known:
            self._known[name] = self.lookup(name)
        return self._known[name]

    def first_known(self, names: Sequence[str]) -> Concept | None:
        """The concept of the first name the vocabulary knows; a rule may name its finding by HPO id
        ("HP:0002094"), the same in every language."""
        return next(
            (c for name in names if (c := self.by_code(name) if is_hpo_id(name) else self.lookup(name))),
            None,
        )

    def by_code(self, code: str) -> Concept | None:
        """The concept a patient record's code ("E_91", the HPO term "HP:0001166") stands for."""
        return self._by_code.get(code)

    def surfaces(self) -> dict[str, Concept]:
        """Normalised surface form → its concept."""
        assert self.index is not None
        return {key: self.concepts[k] for key, k in self.index.items()}

    def merge(self, other: Vocabulary) -> Vocabulary:
        """This vocabulary with `other`'s concepts joined to the concept sharing a surface form (by their
        name first, then a synonym); the rest are added. This vocabulary's names stay preferred; what the
        joined concepts are (lay, askable, …) is what either is, and they are kinds of what either is a kind
        of."""
        merged = {concept.id: concept for concept in self.concepts}
        for concept in other.concepts:
            target = next((c for s in concept.surfaces if (c := self.lookup(s)) is not None), None)
            if target is None:
                merged.setdefault(concept.id, concept)
                continue
            current = merged[target.id]
            known = {normalize(s) for s in current.surfaces}
            extra = tuple(dict.fromkeys(s for s in concept.surfaces if normalize(s) not in known))
            merged[target.id] = replace(
                current,
                synonyms=current.synonyms + extra,
                also=(*current.also, *concept.ids),
                parents=(*current.parents, *concept.parents),
                lay=current.lay or concept.lay,
                askable=current.askable or concept.askable,
                plain=current.plain or concept.plain,
                question=current.question or concept.question,
                site=current.site or concept.site,
                codes=(*current.codes, *concept.codes),
                layperson=current.layperson or concept.layperson,
                kinds=(*current.kinds, *concept.kinds),
            )
        # a parent named by an id that is now another concept's alias, or by another concept's code (an HPO
        # id), is that concept; a concept another names as its kind has it as a parent
        owner = {code: concept.id for concept in merged.values() for code in concept.codes}
        owner |= {alias: concept.id for concept in merged.values() for alias in concept.ids}
        kind_of: dict[str, list[str]] = {}
        for concept in merged.values():
            for kind in concept.kinds:
                if owner.get(kind, concept.id) != concept.id:
                    kind_of.setdefault(owner[kind], []).append(concept.id)
        concepts = []
        for c in merged.values():
            parents = dict.fromkeys([*(owner.get(p, p) for p in c.parents), *kind_of.get(c.id, ())])
            concepts.append(replace(c, parents=tuple(p for p in parents if p != c.id)))
        return Vocabulary(concepts)

    def in_language(self, names: Mapping[str, Sequence[str]]) -> Vocabulary:
        """The concepts that have names in another language (concept id → names, the first preferred),
        named so: the same ids and traits, for reading text in that language."""
        return Vocabulary(
            [
                replace(
                    c,
                    name=names[c.id][0],
                    synonyms=tuple(names[c.id][1:]),
                    plain=None,
                    question=None,
                    layperson=None,
                )
                for c in self.concepts
                if names.get(c.id)
            ]
        )

    def with_head_parents(self) -> Vocabulary:
        """This vocabulary with each plain name that has no parent made a kind of the concept its head names
        ("swelling in legs" and "joint swelling" of "swelling", "barking cough" of "cough"), so that a
        disease listing the one explains the other."""
        concepts = []
        for concept in self.concepts:
            head = _head(concept.name) if concept.plain == concept.name and not concept.parents else None
            parent = self.lookup(head) if head else None
            if parent is not None and parent.id != concept.id:
                concept = replace(concept, parents=(parent.id,))
            concepts.append(concept)
        return Vocabulary(concepts)

    @classmethod
    def from_names(cls, names: Iterable[str], source: str, traits: SourceTraits) -> Vocabulary:
        """Plain symptom names (a graph's symptom nodes, the faker disease table's symptoms) of a source with
        these traits."""
        concepts: dict[str, Concept] = {}
        for name in names:
            key = normalize(name)
            if key:
                text = name.strip()
                concepts.setdefault(
                    key,
                    Concept(
                        f"symptom:{key}",
                        text,
                        (),
                        source,
                        lay=traits.lay,
                        askable=traits.askable,
                        plain=None if is_question(text) else text,
                    ),
                )
        return cls(list(concepts.values()))

    @classmethod
    def of_source(cls, spec: str, names: Iterable[str] = ()) -> Vocabulary:
        """The findings of one graph source (as `clinrag graph build -s` names it): those it names in its own
        vocabulary (with what each is in HPO), and `names` (its diseases' symptom names), with the traits it
        declares."""
        source = graph_source(spec)
        terms = source_findings(spec)
        named = cls.from_names(names, spec, source.traits)
        return cls.from_terms(terms, spec, source.traits).merge(named) if terms else named

    @classmethod
    def from_terms(cls, terms: Iterable[FindingTerm], source: str, traits: SourceTraits) -> Vocabulary:
        """The findings a source names in its own vocabulary (`GraphSource.findings`)."""
        return cls(
            [
                Concept(
                    term.id,
                    term.name,
                    term.synonyms,
                    source,
                    parents=term.parents,
                    lay=traits.lay,
                    askable=traits.askable,
                    question=term.question,
                    site=term.site,
                    codes=term.codes,
                    kinds=term.kinds,
                )
                for term in terms
            ]
        )

    @classmethod
    def from_hpo(cls) -> Vocabulary:
        """The terms under HPO "Phenotypic abnormality" with their synonyms (`terms.hpo`)."""
        terms = hpo_terms()
        concepts = []
        for term_id in sorted(descendants(PHENOTYPIC_ABNORMALITY)):
            term = terms[term_id]
            if term.obsolete:
                continue
            synonyms = usable_surfaces(term.synonyms, exclude=term.name)
            parents = tuple(f"hpo:{p}" for p in term.parents if p != PHENOTYPIC_ABNORMALITY)
            # the first layperson synonym is the lay name, unless it is the name itself ("Fever", "Fatigue")
            lay = term.layperson[0] if term.layperson else None
            layperson = lay if lay is not None and normalize(lay) != normalize(term.name) else None
            concepts.append(
                Concept(
                    f"hpo:{term_id}",
                    term.name,
                    synonyms,
                    HPO_SOURCE,
                    parents=parents,
                    codes=(term_id,),
                    layperson=layperson,
                )
            )
        return cls(concepts)

    def save(self, path: Path) -> None:
        """The concepts (one row of field values each) and their index as msgpack (loading it computes
        nothing)."""
        names = [f.name for f in fields(Concept)]
        rows = [[getattr(concept, name) for name in names] for concept in self.concepts]
        srsly.write_msgpack(path, {"fields": names, "concepts": rows, "index": self.index})

    @classmethod
    def load(cls, path: Path) -> Vocabulary:
        try:
            raw = srsly.read_msgpack(path, use_list=False)  # arrays as tuples, as Concept keeps them
            if list(raw["fields"]) != [f.name for f in fields(Concept)]:
                raise ValueError(f"its concepts have the fields {list(raw['fields'])}")
            return cls([Concept(*row) for row in raw["concepts"]], raw["index"])
        except (ValueError, KeyError, TypeError) as exc:
            raise DataFormatError(f"{path}: not a saved vocabulary ({exc}); delete it to rebuild") from exc


@cache
def _head_before() -> re.Pattern[str]:
    """A name's head before its preposition: the prepositions are data of the language the knowledge names its
    findings in (the word set `head_prepositions` of its rules)."""
    prepositions = load_rules(KNOWLEDGE_LANGUAGE).words("head_prepositions")
    alternatives = "|".join(re.escape(word) for word in sorted(prepositions))
    return re.compile(rf"^(?P<head>.+?)\s+(?:{alternatives})\s+", re.IGNORECASE)


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
    match = _head_before().match(name)
    if match:
        return match["head"]
    words = name.split()
    return words[-1] if len(words) > 1 else None
