"""`nejm-qa`: the NEJM AI benchmark of Katz et al., "GPT versus Resident Physicians — A Benchmark Based on
Official Board Scores" (NEJM AI 2024): the 655 multiple-choice questions of Israeli residency board exams
that the paper sets against the residents' official scores.

The questions are published on Hugging Face (nejm-ai-qa/exams), not on GitHub: one CSV per specialty,
`general_surgery.csv`, `internal_medicine.csv`, `obgyn.csv`, `pediatrics.csv`, `psychiatry.csv`, with a header
row naming a `question` column (the stem, then one option per line, "A. …") and an `answer` column (the option
letter). Confirmed: the five file names (the dataset's file tree) and the two columns (published loaders read
`row["question"]` and `row["answer"]` and parse "A. " lines out of the question); not confirmed from the files
themselves: the exact line layout of every question (one published loader patches "Third. " and " G. " written
for "C. "), and whether an answer ever names several letters (another accepts "A,B"). A question whose options
are not a run of "A.", "B.", … lines is skipped (`UNPARSED`), and so is one keyed to several letters
(`SEVERAL_KEYS`: a single-choice case cannot hold them); both are listed by file and row.

Option keys are the file's letters and `gold.answer` is a key, as in `exams.py`; the question is the stem
without its options. Rows are numbered from 1 after the header; case ids are "nejm-qa:<specialty>:<row>".
The dataset's path is one CSV or a folder holding the five."""

from __future__ import annotations

import csv
import re
from pathlib import Path

from clinrag.core.errors import DataFormatError
from clinrag.core.files import INVALID_RECORDS, ReadReport, data_file, read_text
from clinrag.core.models import Case, Gold
from clinrag.core.provenance import META_KEY, fingerprint, origin_meta
from clinrag.eval.datasets.base import Dataset, DatasetSpec, finish, register
from clinrag.knowledge.items import ANSWER_MISMATCH

SPECIALTIES = ("general_surgery", "internal_medicine", "obgyn", "pediatrics", "psychiatry")
COLUMNS = ("question", "answer")
OPTION_LINE = re.compile(r"^\s*([A-Z])\.\s+(\S.*)$")
UNPARSED = "questions whose options could not be parsed"
SEVERAL_KEYS = "questions keyed to several answers"


def split_options(text: str) -> tuple[str, dict[str, str]] | None:
    """(stem, options) of a question whose last lines are options "A. …", "B. …", … in order (a line that is
    no option continues the one above), or None."""
    lines = text.strip().splitlines()
    starts = [i for i, line in enumerate(lines) if (found := OPTION_LINE.match(line)) and found[1] == "A"]
    if not starts:
        return None
    options: dict[str, str] = {}
    for line in lines[starts[-1] :]:
        found = OPTION_LINE.match(line)
        if found and found[1] == chr(ord("A") + len(options)):
            options[found[1]] = found[2].strip()
        elif found:
            return None  # a letter out of order: the options are not what they seem
        elif line.strip():
            last = next(reversed(options))
            options[last] += " " + line.strip()
    stem = "\n".join(lines[: starts[-1]]).strip()
    return (stem, options) if stem and len(options) >= 2 else None


def _specialty(file: Path) -> tuple[list[Case], ReadReport]:
    report = ReadReport(str(file))
    source_file = fingerprint(file)
    reader = csv.DictReader(read_text(file).splitlines(keepends=True))
    try:
        rows = list(reader)
    except csv.Error as error:
        raise DataFormatError(f"{file}: not valid CSV (line {reader.line_num}: {error})") from None
    missing = [column for column in COLUMNS if column not in (reader.fieldnames or [])]
    if missing:
        raise DataFormatError(f"{file}: no {' or '.join(missing)} column (header: {reader.fieldnames})")
    cases = []
    for number, row in enumerate(rows, start=1):
        if not any(isinstance(cell, str) and cell.strip() for cell in row.values()):
            continue
        report.records += 1
        question, answer = (row["question"] or "").strip(), (row["answer"] or "").strip()
        parsed = split_options(question) if answer else None
        if parsed is None:
            report.skip(UNPARSED if answer else INVALID_RECORDS, number)
            continue
        stem, options = parsed
        keys = [key for key in re.split(r"[,;\s]+", answer) if key]
        if len(keys) > 1:
            report.skip(SEVERAL_KEYS, number)
            continue
        if not keys or keys[0] not in options:  # a lone "," names no key
            report.skip(ANSWER_MISMATCH, number)
            continue
        cases.append(
            Case(
                id=f"nejm-qa:{file.stem}:{number}",
                task="multiple_choice",
                question=stem,
                options=options,
                gold=Gold(answer=keys[0]),
                meta={
                    "source": "nejm-qa",
                    "specialty": file.stem,
                    "row": number,
                    META_KEY: origin_meta(source_file, number),
                },
            )
        )
    report.items, report.complete = len(cases), True
    return cases, report


def load_nejmqa(path: Path) -> Dataset:
    """One specialty CSV, or the five in the folder `path`."""
    files = [data_file(path, f"{name}.csv") for name in SPECIALTIES] if path.is_dir() else [data_file(path)]
    cases, reports = [], []
    for file in files:
        specialty_cases, report = _specialty(file)
        cases += specialty_cases
        reports.append(report)
    return finish("nejm-qa", cases, reports)


register(
    DatasetSpec(
        "nejm-qa",
        "NEJM AI residency board-exam questions (Katz et al. 2024; five specialty CSVs), multiple choice",
        "nejmqa",
        load_nejmqa,
    )
)
