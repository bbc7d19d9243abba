"""A dataset in one file: multiple-choice questions in JSONL, one {"id", "question", "options", "answer"} per
line."""

from __future__ import annotations

import json
from pathlib import Path

from clinrag.core.models import Case, Gold
from clinrag.eval.datasets.base import DatasetSpec, finish, register


def load(path: Path):
    cases = []
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        cases.append(
            Case(
                id=str(row["id"]),
                task="multiple_choice",
                question=row["question"],
                options=row["options"],
                gold=Gold(answer=row["answer"]),
            )
        )
    return finish("mcq-jsonl", cases, [])


register(DatasetSpec("mcq-jsonl", "multiple-choice questions in JSONL", "mcq.jsonl", load))
