"""Exam-style datasets: MedQA, MMLU-Med, PubMedQA and MedMCQA → `Case`s. Only MedQA has past cases: the
vignettes of MediQ's MedQA dev split, when that file lies beside the test file.

The record models of `clinrag.knowledge.readers` validate each record; these loaders keep what the corpus
readers drop on purpose (the wrong options, the answer key). Option keys are the file's letters (PubMedQA:
yes/no/maybe) and `gold.answer` is a key. Explanations and long answers are never put on a case: they
state the answer. Every case's `meta["provenance"]` names its file (fingerprint) and record, numbered as the
knowledge readers number it (line, row, PMID, MedMCQA id), so retrieval can leave the case's own record
out."""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from clinrag.core.errors import DataFormatError
from clinrag.core.files import (
    DUPLICATE_IDS,
    INVALID_RECORDS,
    ReadReport,
    data_file,
    read_json,
    read_jsonl,
    read_text,
    valid_records,
)
from clinrag.core.models import Case, Gold
from clinrag.core.provenance import META_KEY, fingerprint, origin_meta
from clinrag.eval.datasets.base import Dataset, DatasetSpec, finish, register
from clinrag.knowledge.items import ANSWER_MISMATCH
from clinrag.knowledge.readers.medmcqa import MedMCQARecord
from clinrag.knowledge.readers.medqa import MedQARecord
from clinrag.knowledge.readers.pubmedqa import PubMedQARecord
from clinrag.patients.loaders import load_icraft
from clinrag.patients.record import PatientRecord

MMLU_SUBSETS = (
    "anatomy",
    "clinical_knowledge",
    "college_biology",
    "college_medicine",
    "medical_genetics",
    "professional_medicine",
)
LETTERS = ("A", "B", "C", "D")
MEDIQ_DEV_FILE = "mediq_dev_atomic_facts.jsonl"
DECISIONS = ("yes", "no", "maybe")
# MedMCQA's `cop` counts from 1 in this (MIRAGE) release: values are 1..4 and every "Ans-x" explanation
# names the letter at position cop (checked in tests/eval/datasets/test_exams.py).
MEDMCQA_COP_BASE = 1


def _case(report: ReadReport, where: int | str, **fields: Any) -> Case | None:
    try:
        return Case(**fields)
    except ValidationError:  # e.g. an empty option text
        report.skip(INVALID_RECORDS, where)
        return None


# --- MedQA ------------------------------------------------------------------------------------------------


def load_medqa(path: Path) -> Dataset:
    """MedQA-USMLE JSONL (question, options, answer, answer_idx); ids "medqa:<line>"."""
    reading = read_jsonl(data_file(path, "us_4options_test.jsonl"))
    source_file = fingerprint(reading.path)
    cases = []
    for line, record in valid_records(reading, MedQARecord):
        report = reading.report
        keys = [key for key, text in record.options.items() if text.strip() == record.answer.strip()]
        key = record.answer_idx if record.answer_idx is not None else (keys[0] if len(keys) == 1 else None)
        if key is None or key not in keys:
            report.skip(ANSWER_MISMATCH, line)
            continue
        meta = {
            "source": "medqa",
            "line": line,
            "exam": record.meta_info,
            META_KEY: origin_meta(source_file, line),
        }
        case = _case(
            report,
            line,
            id=f"medqa:{line}",
            task="multiple_choice",
            question=record.question.strip(),
            options=record.options,
            gold=Gold(answer=key),
            meta=meta,
        )
        if case is not None:
            cases.append(case)
    records, labels, notes = _medqa_past_cases(reading.path.parent)
    return finish("medqa", cases, [reading.report], records=records, labels=labels, notes=notes)


def _medqa_past_cases(folder: Path) -> tuple[list[PatientRecord], dict[str, list[str]], list[str]]:
    """The MedQA dev-split vignettes of MediQ (atomic facts, correct answer) as past cases, labelled with
    their answer text (the prior matches it to an option's text); nothing if the file is absent."""
    path = folder / MEDIQ_DEV_FILE
    if not path.is_file():
        return [], {}, [f"no {MEDIQ_DEV_FILE} beside the test file: no past cases"]
    records, report = load_icraft(path, source="mediq-dev", dataset="mediq_medqa_dev")
    labels = {record.id: [record.structured["diagnosis"]] for record in records}
    return records, labels, [f"past cases (dev split, not test questions): {report.summary()}"]


# --- MMLU-Med ---------------------------------------------------------------------------------------------


def _mmlu_files(path: Path, subset: str | None) -> list[tuple[str, Path]]:
    if path.is_file():
        return [(path.stem.removesuffix("_test"), path)]
    if not path.is_dir():
        raise DataFormatError(f"{path}: no such file or directory")
    subsets = [subset] if subset else list(MMLU_SUBSETS)
    return [(name, data_file(path, f"{name}_test.csv")) for name in subsets]


def _mmlu_subset(subset: str, file: Path) -> tuple[list[Case], ReadReport]:
    """One headerless CSV (question, A, B, C, D, answer); rows are numbered from 1 (a quoted field may span
    several lines, so a row number is not a line number)."""
    report = ReadReport(str(file))
    source_file = fingerprint(file)
    reader = csv.reader(read_text(file).splitlines(keepends=True))
    cases = []
    try:
        rows = list(reader)
    except csv.Error as error:
        raise DataFormatError(f"{file}: not valid CSV (line {reader.line_num}: {error})") from None
    for number, row in enumerate(rows, start=1):
        if not any(cell.strip() for cell in row):
            continue
        report.records += 1
        if len(row) != 6 or row[5].strip() not in LETTERS or not row[0].strip():
            report.skip(INVALID_RECORDS, number)
            continue
        case = _case(
            report,
            number,
            id=f"mmlu-med:{subset}:{number}",
            task="multiple_choice",
            question=row[0].strip(),
            options=dict(zip(LETTERS, (cell.strip() for cell in row[1:5]), strict=True)),
            gold=Gold(answer=row[5].strip()),
            meta={
                "source": "mmlu",
                "subset": subset,
                "row": number,
                META_KEY: origin_meta(source_file, number),
            },
        )
        if case is not None:
            cases.append(case)
    report.items, report.complete = len(cases), True
    return cases, report


def mmlu_loader(subset: str | None = None) -> Callable[[Path], Dataset]:
    def load(path: Path) -> Dataset:
        cases, reports = [], []
        for name, file in _mmlu_files(path, subset):
            subset_cases, report = _mmlu_subset(name, file)
            cases += subset_cases
            reports.append(report)
        return finish(f"mmlu-med:{subset}" if subset else "mmlu-med", cases, reports)

    return load


# --- PubMedQA ---------------------------------------------------------------------------------------------


def load_pubmedqa(path: Path) -> Dataset:
    """PubMedQA's JSON object keyed by PMID. The question text carries the abstract's paragraphs (with their
    section labels) after the question; `meta["question_only"]` is the bare question."""
    file = data_file(path, "test_set.json")
    document = read_json(file)
    if not isinstance(document, dict):
        raise DataFormatError(f"{file}: expected a JSON object keyed by PMID")
    report = ReadReport(str(file))
    source_file = fingerprint(file)
    cases = []
    for pmid, raw in document.items():
        report.records += 1
        try:
            record = PubMedQARecord.model_validate(raw)
        except ValidationError:
            report.skip(INVALID_RECORDS, pmid)
            continue
        decision = (record.final_decision or "").strip().lower()
        if decision not in DECISIONS or not record.question.strip():
            report.skip(ANSWER_MISMATCH if record.question.strip() else INVALID_RECORDS, pmid)
            continue
        context = [
            f"{record.labels[i].title() if i < len(record.labels) else 'Text'}: {text.strip()}"
            for i, text in enumerate(record.contexts)
            if text.strip()
        ]
        question = record.question.strip()
        case = _case(
            report,
            pmid,
            id=f"pubmedqa:{pmid}",
            task="multiple_choice",
            question=question + ("\n\nContext:\n" + "\n".join(context) if context else ""),
            options={d: d for d in DECISIONS},
            gold=Gold(answer=decision),
            meta={
                "source": "pubmedqa",
                "pmid": pmid,
                "year": record.year,
                "question_only": question,
                META_KEY: origin_meta(source_file, pmid),
            },
        )
        if case is not None:
            cases.append(case)
    report.items, report.complete = len(cases), True
    return finish("pubmedqa", cases, [report])


# --- MedMCQA ----------------------------------------------------------------------------------------------


def load_medmcqa(path: Path) -> Dataset:
    """MedMCQA JSONL (opa..opd, 1-based `cop`); ids "medmcqa:<id>". The explanation `exp` is left out."""
    reading = read_jsonl(data_file(path, "dev.json"))
    source_file = fingerprint(reading.path)
    cases, seen = [], set()
    for line, raw in reading:
        report = reading.report
        try:
            record = MedMCQARecord.model_validate(raw)
        except ValidationError:
            report.skip(INVALID_RECORDS, line)
            continue
        position = record.cop - MEDMCQA_COP_BASE
        if not 0 <= position < len(LETTERS):
            report.skip(ANSWER_MISMATCH, line)
            continue
        if record.id in seen:
            report.skip(DUPLICATE_IDS, line)
            continue
        seen.add(record.id)
        options = dict(zip(LETTERS, (record.opa, record.opb, record.opc, record.opd), strict=True))
        meta = {
            "source": "medmcqa",
            "line": line,
            "subject": record.subject_name,
            "topic": record.topic_name,
            "choice_type": raw.get("choice_type"),
            META_KEY: origin_meta(source_file, record.id),
        }
        case = _case(
            report,
            line,
            id=f"medmcqa:{record.id}",
            task="multiple_choice",
            question=record.question.strip(),
            options={key: text.strip() for key, text in options.items()},
            gold=Gold(answer=LETTERS[position]),
            meta=meta,
        )
        if case is not None:
            cases.append(case)
    return finish("medmcqa", cases, [reading.report])


register(
    DatasetSpec("medqa", "MedQA-USMLE 4-option test questions", "medqa/us_4options_test.jsonl", load_medqa),
    DatasetSpec("mmlu-med", "MMLU medical subsets (all six)", "mmlu_med", mmlu_loader()),
    *(
        DatasetSpec(f"mmlu-med:{name}", f"MMLU {name.replace('_', ' ')}", "mmlu_med", mmlu_loader(name))
        for name in MMLU_SUBSETS
    ),
    DatasetSpec(
        "pubmedqa",
        "PubMedQA expert set, yes/no/maybe with the abstract",
        "pubmedqa/test_set.json",
        load_pubmedqa,
    ),
    DatasetSpec("medmcqa", "MedMCQA dev questions", "medmcqa/dev.json", load_medmcqa),
)
