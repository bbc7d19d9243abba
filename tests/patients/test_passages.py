"""Report passage retrieval on real structured abstracts (PubMedQA sections: BACKGROUND, METHODS, …)."""

import json

import pytest

from clinrag.core.errors import InvalidInputError
from clinrag.patients.passages import RETRIEVERS, retrieve_passages
from clinrag.patients.record import PatientRecord, ReportSection


@pytest.fixture(scope="module")
def reports(data_dir):
    abstracts = json.loads((data_dir / "pubmedqa" / "test_set.json").read_text())
    records = []
    for pmid, row in list(abstracts.items())[:15]:
        sections = [
            ReportSection(title=label, text=text)
            for label, text in zip(row["LABELS"], row["CONTEXTS"], strict=True)
        ]
        records.append(PatientRecord(id=f"pubmed:{pmid}", narrative=row["QUESTION"], report=sections))
    return records


@pytest.mark.parametrize("retriever", RETRIEVERS)
def test_every_retriever_finds_the_section_a_sentence_came_from(reports, minilm_embedder, retriever):
    record = reports[4]
    section = max(record.report, key=lambda s: len(s.text))
    sentence = max(section.text.split(". "), key=len)
    passages = retrieve_passages(reports, sentence, retriever=retriever, k=3, embedder=minilm_embedder)
    assert 1 <= len(passages) <= 3
    top = passages[0]
    assert top.patient_id == record.id and top.section == section.title
    assert sentence[:40] in top.text
    assert top.evidence().kind == "passage"


def test_sentence_window_adds_the_neighbours(reports, minilm_embedder):
    section = max(reports[2].report, key=lambda s: len(s.text))
    (top,) = retrieve_passages(
        reports,
        section.text.split(". ")[1],
        retriever="sentence_window",
        k=1,
        embedder=minilm_embedder,
        window=1,
    )
    (bare,) = retrieve_passages(
        reports,
        section.text.split(". ")[1],
        retriever="sentence_window",
        k=1,
        embedder=minilm_embedder,
        window=0,
    )
    assert len(top.text) > len(bare.text) and bare.text in top.text


def test_auto_merging_returns_the_whole_section_when_its_sentences_hit(reports, minilm_embedder):
    section = reports[6].report[0]
    passages = retrieve_passages(
        reports, section.text, retriever="auto_merging", k=3, embedder=minilm_embedder, merge_ratio=0.3
    )
    assert passages[0].text.startswith(section.text[:30]) and len(passages[0].text) >= 0.9 * len(section.text)


def test_bad_input(reports):
    with pytest.raises(InvalidInputError, match="unknown passage retriever"):
        retrieve_passages(reports, "x", retriever="magic")
    with pytest.raises(InvalidInputError, match="needs an embedder"):
        retrieve_passages(reports, "x", retriever="dense")
    with pytest.raises(InvalidInputError, match="empty"):
        retrieve_passages(reports, " ")
    assert retrieve_passages([PatientRecord(id="a", narrative="no report")], "fever") == []
