"""What every importer produces: diseases with their schema relations, and what it skipped and why."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from clinrag.graph.schema import MAX_NAME_CHARS, TRIPLE_TYPE, Label, Relation

MAX_EXAMPLES = 3
EMPTY_NAME = "empty names"
LONG_NAME = f"names longer than {MAX_NAME_CHARS} characters"
SELF_COMORBIDITY = "comorbidity of a disease with itself"


def clean_name(text: object) -> str | None:
    """Whitespace collapsed; None for a non-string, an empty or an over-long name."""
    if not isinstance(text, str):
        return None
    cleaned = " ".join(text.split())
    return cleaned if cleaned and len(cleaned) <= MAX_NAME_CHARS else None


@dataclass(frozen=True)
class SourceTraits:
    """What a source's knowledge is, declared by its importer: the consultation reads these, and nothing
    downstream tells sources apart by their names or id prefixes."""

    lay: bool = False  # its findings are named in patients' words (matched by meaning, shown as named)
    askable: bool = False  # a patient can be asked about its findings in their words
    rare: bool = False  # its diseases are rare diseases
    salience_ordered: bool = False  # it lists a disease's findings most characteristic first
    frequencies: bool = False  # it says how often a finding occurs with a disease
    # it lists each disease's typical findings (with their shares), not its whole annotated spectrum: a
    # finding it does not list takes a plain list's leak, not an annotated spectrum's background
    typical_findings: bool = False
    # where it states no frequencies but its patients are known to show about this share of a disease's listed
    # findings whatever the list's length (else a plain list's findings share a few typical ones among them)
    listed_share: float | None = None
    severity: bool = False  # it rates how severe a disease is
    risk_factors: bool = False  # it names what makes each disease likelier (`DiseaseRecord.risk_factors`)
    title: str = ""  # how a reference names it for a reader ("Human Phenotype Ontology annotations …")


@dataclass(frozen=True)
class FindingTerm:
    """A finding as a source names it, for the consultation's vocabulary."""

    id: str  # unique across sources ("ddxplus:E_91")
    name: str
    synonyms: tuple[str, ...] = ()
    # the broader findings it is a kind of: their ids, or a code another vocabulary's finding has (an HPO id)
    parents: tuple[str, ...] = ()
    question: str | None = None  # the question that asks about it, when the source words one
    site: tuple[str, str] | None = None  # a finding at one body site: (site word, kind): ("ear", "pain")
    codes: tuple[str, ...] = ()  # the codes patients' records give it ("E_91", "E_55_@_V_129")
    # the narrower findings that are kinds of it, as ids or codes (an HPO id): each other choice a question
    # names ("a clear runny nose" of "nasal congestion or a clear runny nose"), which answers it too
    kinds: tuple[str, ...] = ()


@dataclass
class Skips:
    """Skipped items by reason: how many, and the first few places (record keys) for the report."""

    counts: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=dict)

    def add(self, reason: str, where: str, n: int = 1) -> None:
        self.counts[reason] = self.counts.get(reason, 0) + n
        shown = self.examples.setdefault(reason, [])
        if len(shown) < MAX_EXAMPLES:
            shown.append(where)

    @property
    def total(self) -> int:
        return sum(self.counts.values())


@dataclass
class DiseaseRecord:
    """One disease: its name, an optional description, its neighbours by relation (names) and, for sources
    that know it, the passages each edge was read from (ids, kept on the edge in the graph)."""

    key: str  # where it came from in the source, e.g. "OMIM:100070"
    name: str
    description: str | None = None
    relations: dict[Relation, list[str]] = field(default_factory=dict)
    passages: dict[tuple[Relation, str], list[str]] = field(default_factory=dict)
    # For sources that state them, per edge: the share of the disease's patients who show the target, and
    # the publications or records that state it ("PMID:…", "OMIM:…").
    frequencies: dict[tuple[Relation, str], float] = field(default_factory=dict)
    references: dict[tuple[Relation, str], list[str]] = field(default_factory=dict)
    excluded: list[str] = field(default_factory=list)  # findings it is stated not to show (HPO's NOT)
    onset: tuple[float, float] | None = None  # the ages (years) it begins within, where the source says
    severity: int | None = None  # where the source rates it: 1 (most severe) to 5 (least), as DDXPlus does
    # what makes it likelier in whoever has it (smoking, heavy drinking, recent surgery), where the source
    # says: no graph edges (the schema has no risk-factor label), read by the consultation
    risk_factors: list[str] = field(default_factory=list)
    # how many of 1,000 primary-care consultations are for it, where the source says (its class's middle)
    prevalence: float | None = None
    synonyms: list[str] = field(
        default_factory=list
    )  # other names of the disease, where the source gives them

    def add(self, relation: Relation, target: object, skips: Skips, passages: Sequence[str] = ()) -> None:
        """Add one neighbour (and the passages that state it); an unusable name is counted in `skips`."""
        name = clean_name(target)
        if name is None:
            reason = LONG_NAME if isinstance(target, str) and target.strip() else EMPTY_NAME
            skips.add(f"{relation} targets: {reason}", self.key)
            return
        if TRIPLE_TYPE[relation].target is Label.DISEASE and name == self.name:
            skips.add(SELF_COMORBIDITY, self.key)
            return
        self.link(relation, name, passages)

    def link(self, relation: Relation, name: str, passages: Sequence[str] = ()) -> None:
        """Add a neighbour whose name is known to be usable, once, with the passages that state it."""
        targets = self.relations.setdefault(relation, [])
        if name not in targets:
            targets.append(name)
        if passages:
            known = self.passages.setdefault((relation, name), [])
            known += [p for p in passages if p not in known]

    @property
    def edge_count(self) -> int:
        return sum(len(targets) for targets in self.relations.values())


@dataclass
class SourceRecords:
    """An importer's output for one source, fully read (sources here are at most a few 100k edges)."""

    name: str  # short source name, e.g. "ddxplus", "hpo-diseases"
    spec: str  # the source as the user gave it, e.g. "ddxplus:/data/ddxplus"
    fingerprint: str  # changes whenever the records would (data files, package version, limit)
    records: list[DiseaseRecord] = field(default_factory=list)
    read: int = 0  # records read from the source, kept or not
    skips: Skips = field(default_factory=Skips)
    notes: list[str] = field(default_factory=list)  # choices the importer made, for the report
    # Other names a name may be known by (e.g. its MeSH descriptor's): the loader joins a name to an existing
    # node through them when the name itself matches none.
    synonyms: Callable[[str], Sequence[str]] | None = None

    def keep(self, record: DiseaseRecord, no_relation_reason: str) -> None:
        """Keep a disease that has at least one relation; one without is skipped (it would be isolated)."""
        if record.edge_count:
            self.records.append(record)
        else:
            self.skips.add(no_relation_reason, record.key)
