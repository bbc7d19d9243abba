"""`phenopackets-interactive` on real packets of phenopacket-store (the SC5D cohort): the clinician hears the
first findings only, the rest is hidden for a patient simulator, and nothing hidden reaches the text or the
codes a method reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from clinrag.core.models import HIDDEN_HPO_EXCLUDED, HIDDEN_HPO_OBSERVED, HPO_EXCLUDED, HPO_OBSERVED
from clinrag.eval.datasets import load_dataset
from clinrag.eval.datasets.phenopackets import read_phenopackets
from clinrag.eval.datasets.phenopackets_interactive import INITIAL_TERMS

RICH = "PMID_17853487_Patient_2"  # 26 observed findings, 6 excluded


@pytest.fixture(scope="module")
def store(data_dir: Path) -> Path:
    return data_dir / "phenopackets"


def test_only_the_first_findings_are_shown_and_the_whole_packet_is_hidden(store: Path) -> None:
    packets = {packet.id: packet for packet in read_phenopackets(store, ["SC5D"])}
    dataset = load_dataset("phenopackets-interactive", store)
    case = next(c for c in dataset.cases if c.id == RICH)
    packet = packets[RICH]
    assert len(packet.observed) > INITIAL_TERMS and packet.excluded
    shown, hidden = packet.observed[:INITIAL_TERMS], packet.observed[INITIAL_TERMS:]
    assert case.patient.codes[HPO_OBSERVED] == [term.id for term in shown]
    assert case.patient.codes[HPO_EXCLUDED] == []
    assert case.meta[HIDDEN_HPO_OBSERVED] == [term.id for term in packet.observed]
    assert case.meta[HIDDEN_HPO_EXCLUDED] == [term.id for term in packet.excluded]
    text = case.question.casefold()
    assert case.patient.initial_presentation == case.question
    assert all(term.label.casefold() in text for term in shown)
    assert not [term.label for term in hidden if term.label.casefold() in text]
    assert "does not have" not in text  # no excluded finding is said
    # the profile an LLM patient holds: every finding, the excluded ones denied
    assert case.patient.findings[: len(packet.observed)] == [term.label for term in packet.observed]
    assert case.patient.findings[len(packet.observed) :] == [f"No {term.label}" for term in packet.excluded]
    assert case.gold.answers[0] == packet.diagnoses[0].id and "diagnosis" not in case.patient.codes
