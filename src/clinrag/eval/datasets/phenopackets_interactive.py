"""`phenopackets-interactive`: the phenopacket-store's published patients as interactive cases. The clinician
first hears age, sex, onset and the packet's first `INITIAL_TERMS` observed findings; everything else the
packet states is hidden, for a patient simulator to reveal when asked (`meta[HIDDEN_HPO_OBSERVED]`,
`meta[HIDDEN_HPO_EXCLUDED]`: every observed and excluded term). The case's findings are the whole profile
in words, observed labels and "No …" for the excluded ones, for an LLM patient to hold. Like
`ddxplus-interactive` for DDXPlus; the gold is the packet's diagnosis, as in `phenopackets`. Every packet is
also a past patient (`past_patient`) for the methods that learn from a patient base (`meddx-experience`); the
runner leaves the cases it samples out of it, and with each its whole cohort (one paper, often one family:
near copies of the case)."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from pathlib import Path

from clinrag.core.models import HIDDEN_HPO_EXCLUDED, HIDDEN_HPO_OBSERVED, HPO_EXCLUDED, HPO_OBSERVED, Case
from clinrag.eval.datasets.base import Dataset, DatasetSpec, finish, register
from clinrag.eval.datasets.phenopackets import (
    SOURCE,
    PhenopacketCase,
    read_phenopackets,
    render_text,
    to_case,
)
from clinrag.patients.record import PatientRecord

INITIAL_TERMS = 3  # observed findings the clinician hears first (as bench_rare's interactive start)


def interactive_case(packet: PhenopacketCase, initial_terms: int = INITIAL_TERMS) -> Case:
    """The packet's case with only its first `initial_terms` observed findings shown."""
    case = to_case(packet)
    assert case.patient is not None
    shown = dataclasses.replace(packet, observed=packet.observed[:initial_terms], excluded=())
    text = render_text(shown)
    profile = [term.label for term in packet.observed] + [f"No {term.label}" for term in packet.excluded]
    codes = {**case.patient.codes, HPO_OBSERVED: [t.id for t in shown.observed], HPO_EXCLUDED: []}
    patient = case.patient.model_copy(
        update={"initial_presentation": text, "findings": profile, "codes": codes}
    )
    hidden = {
        HIDDEN_HPO_OBSERVED: [term.id for term in packet.observed],
        HIDDEN_HPO_EXCLUDED: [term.id for term in packet.excluded],
    }
    return case.model_copy(update={"question": text, "patient": patient, "meta": {**case.meta, **hidden}})


def past_patient(packet: PhenopacketCase) -> PatientRecord:
    """A published patient as a past patient of a patient base: the whole packet, its words and its terms."""
    return PatientRecord(
        id=packet.id,
        narrative=render_text(packet),
        codes={HPO_OBSERVED: [t.id for t in packet.observed], HPO_EXCLUDED: [t.id for t in packet.excluded]},
        metadata={"age": packet.age, "sex": packet.sex or "", "cohort": packet.cohort},
        source=SOURCE,
    )


def load_phenopackets_interactive(path: Path, cohorts: Collection[str] | None = None) -> Dataset:
    """The cases, and every packet as a past patient (the runner leaves the sampled cases out of the base)."""
    reading = read_phenopackets(path, cohorts)
    packets = list(reading)
    cases = [interactive_case(packet) for packet in packets]
    found = len({case.meta["cohort"] for case in cases})
    notes = [f"{found} cohorts", f"the first {INITIAL_TERMS} observed findings shown, the rest hidden"]
    records = [past_patient(packet) for packet in packets]
    labels = {case.id: [case.gold.answer] for case in cases if case.gold is not None and case.gold.answer}
    groups = {
        packet.id: packet.cohort for packet in packets
    }  # a case's cohort is left out of the base with it
    return finish(
        "phenopackets-interactive",
        cases,
        [reading.report],
        records=records,
        labels=labels,
        notes=notes,
        groups=groups,
    )


register(
    DatasetSpec(
        "phenopackets-interactive",
        "Phenopacket-store patients with only their first findings shown; the rest hidden for a patient "
        "simulator (HPO terms, or an LLM holding the profile)",
        "phenopackets",
        load_phenopackets_interactive,
    )
)
