"""The knowledge base's audit (`clinrag knowledge audit`): every code resolves (HPO terms by id and exact
name, ICD-10-CM codes, DDXPlus evidences and conditions), every registered source is cited, and the counts
per source, system and frequency basis that the README's knowledge table reports. The record shapes
(a source on every fact, a URL on every source) are enforced when the files are read (`catalogue`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field

import simple_icd_10_cm as icd10cm

from clinrag.conditions.catalogue import FINDING_NAMES, Catalogue
from clinrag.conditions.records import Finding
from clinrag.terms.hpo import hpo_terms


@dataclass
class AuditReport:
    conditions: int
    sources: int
    facts: int
    problems: list[str] = field(default_factory=list)
    per_system: dict[str, int] = field(default_factory=dict)
    per_source: dict[str, int] = field(default_factory=dict)  # facts citing each source
    per_issuer: dict[str, int] = field(default_factory=dict)
    basis: dict[str, int] = field(default_factory=dict)  # features' frequencies: the source's, or estimates
    cant_miss: int = 0
    ddxplus: int = 0

    @property
    def passed(self) -> bool:
        return not self.problems


@dataclass(frozen=True)
class KnowledgeAudit:
    """Checks a catalogue against the HPO release clinrag ships, ICD-10-CM (`simple-icd-10-cm`) and the
    DDXPlus yes/no evidence codes (the only ones that are findings: "Where is the pain?" is an attribute)
    and condition names given (those of the packaged DDXPlus release)."""

    ddxplus_findings: Collection[str]
    ddxplus_conditions: Collection[str]

    def run(self, catalogue: Catalogue) -> AuditReport:
        report = AuditReport(len(catalogue.conditions), len(catalogue.sources), 0)
        cited: Counter[str] = Counter()
        systems: Counter[str] = Counter()
        basis: Counter[str] = Counter()
        for condition in catalogue.conditions:
            where = f"{condition.system}/{condition.id}"
            systems[condition.system] += 1
            report.cant_miss += condition.urgency.cant_miss
            if not icd10cm.is_valid_item(condition.icd10.upper()):
                report.problems.append(f"{where}: ICD-10-CM code {condition.icd10!r} does not resolve")
            if condition.ddxplus is not None:
                report.ddxplus += 1
                if condition.ddxplus not in self.ddxplus_conditions:
                    report.problems.append(f"{where}: {condition.ddxplus!r} is not a DDXPlus condition")
            for language in ("en", "fr", "zh"):
                if not condition.names.get(language):
                    report.problems.append(f"{where}: no name in {language}")
            for what, fact in condition.cited():
                report.facts += 1
                cited.update(fact.source)
                if isinstance(fact, Finding) and (problem := self._unresolved(fact)):
                    report.problems.append(f"{where}: {what}: {problem}")
            basis.update(feature.basis for feature in condition.features)
        for names in catalogue.finding_names:
            finding = Finding(hpo=names.hpo, label=names.label, source=("names",))
            if problem := self._unresolved(finding):
                report.problems.append(f"{FINDING_NAMES}: {problem}")
        for source in catalogue.sources.values():
            if not cited[source.id]:
                report.problems.append(f"source {source.id}: cited by no fact")
        report.per_system = dict(sorted(systems.items()))
        report.per_source = dict(cited.most_common())
        issuers: Counter[str] = Counter()
        for source_id, n in cited.items():
            issuers[catalogue.sources[source_id].issuer] += n
        report.per_issuer = dict(issuers.most_common())
        report.basis = dict(basis)
        return report

    def _unresolved(self, finding: Finding) -> str | None:
        if finding.ddxplus is not None:
            known = finding.ddxplus in self.ddxplus_findings
            return None if known else f"DDXPlus evidence {finding.ddxplus} is not a yes/no finding"
        term = hpo_terms().get(finding.hpo or "")
        if term is None:
            return f"HPO term {finding.hpo} does not resolve"
        if term.obsolete:
            return f"HPO term {finding.hpo} is obsolete"
        if term.name != finding.label:
            return f"{finding.hpo} is {term.name!r} in HPO, not {finding.label!r}"
        return None
