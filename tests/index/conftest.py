"""Fixtures for the index tests: real MedMCQA explanations and questions embedded once per session with the
packaged MiniLM model, MedQA questions, DialMed Chinese dialogues and DDXPlus French questions."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import shared_data

STATEMENT_COUNT = 240
QUERY_COUNT = 60

# MedMCQA subjects that map onto one ICD-10-CM chapter; the other subjects stay untagged.
SUBJECT_CHAPTERS: dict[str, set[int]] = {
    "Microbiology": {1},
    "Psychiatry": {5},
    "Ophthalmology": {7},
    "ENT": {8},
    "Dental": {11},
    "Skin": {12},
    "Orthopaedics": {13, 19},
    "Gynaecology & Obstetrics": {14, 15},
    "Pediatrics": {16},
    "Forensic Medicine": {19, 20},
}


@dataclass(frozen=True)
class Corpus:
    """Real explanations (statements) and the questions they explain, with MiniLM vectors."""

    ids: list[str]
    texts: list[str]
    subjects: list[str]
    vectors: np.ndarray
    questions: list[str]
    question_vectors: np.ndarray
    embedder: str

    @property
    def subject_tags(self) -> list[set[int]]:
        return [SUBJECT_CHAPTERS.get(subject, set()) for subject in self.subjects]


def _jsonl(path: Path) -> list[dict]:
    with shared_data(path).open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


@pytest.fixture(scope="session")
def corpus(data_dir: Path, minilm_embedder) -> Corpus:
    """The first STATEMENT_COUNT distinct non-empty MedMCQA dev explanations (`exp` is often null)."""
    rows, seen = [], set()
    for row in _jsonl(data_dir / "medmcqa" / "dev.json"):
        text = (row.get("exp") or "").strip()
        if text and text not in seen:
            seen.add(text)
            rows.append(row)
        if len(rows) == STATEMENT_COUNT:
            break
    texts = [row["exp"].strip() for row in rows]
    questions = [row["question"] for row in rows[:QUERY_COUNT]]
    return Corpus(
        ids=[row["id"] for row in rows],
        texts=texts,
        subjects=[row["subject_name"] for row in rows],
        vectors=minilm_embedder.encode(texts),
        questions=questions,
        question_vectors=minilm_embedder.encode(questions),
        embedder=minilm_embedder.name,
    )


@pytest.fixture(scope="session")
def medqa_questions(data_dir: Path) -> list[str]:
    return [row["question"] for row in _jsonl(data_dir / "medqa" / "us_4options_test.jsonl")]


@pytest.fixture(scope="session")
def dialmed_dialogues(data_dir: Path) -> list[str]:
    """DialMed test dialogues, each as one text of its turns."""
    return ["\n".join(row["dialog"]) for row in _jsonl(data_dir / "dialmed" / "test.txt")]


@pytest.fixture(scope="session")
def ddxplus_french_questions(data_dir: Path) -> dict[str, str]:
    path = shared_data(data_dir / "ddxplus" / "release_evidences.json")
    evidences = json.loads(path.read_text(encoding="utf-8"))
    return {code: evidence["question_fr"] for code, evidence in evidences.items()}
