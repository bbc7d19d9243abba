"""`huatuo-kgqa`: the knowledge-graph QA of Huatuo-26M (Li et al. 2023, arXiv 2305.01526; Apache-2.0),
Chinese questions written from templates over medical knowledge graphs, answered with the graph's entries.

Hugging Face FreedomIntelligence/huatuo_knowledge_graph_qa holds `train_datasets.jsonl`,
`validation_datasets.jsonl` and `test_datasets.jsonl` (about 1,000 test lines), one object per line:
    {"questions": ["颜面部凹陷的手术治疗有哪些？"], "answers": ["自体颗粒脂肪移植；自体脂肪移植；…"]}
FreedomIntelligence/huatuo26M-testdatasets (the Huatuo-26M test set, 6,000 lines, not the graph QA's own
split) has one file of the same name whose `questions` and `answers` are single strings; both shapes are read.
Confirmed: the file names (the datasets' file trees); the keys and, for the test set, string values (its
loading script `my_dataset.py`); string lists (the loading scripts of the sibling huatuo_encyclopedia_qa and
huatuo_consultation_qa, a published parser of the graph QA lines, and the example, under singular keys, of
openmedlab/Awesome-Medical-Dataset resources/Huatuo-26M.md). Not confirmed from a data file itself, nor
documented: what several questions or several answers on one line mean.

A case is a free-text question in Chinese, the line's first question; `gold.answer` is its first answer and
`gold.answers` all its answers. Lines are numbered from 1; case ids are "huatuo-kgqa:<line>"."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from clinrag.core.files import data_file, read_jsonl, valid_records
from clinrag.core.models import Case, Gold
from clinrag.core.provenance import META_KEY, fingerprint, origin_meta
from clinrag.eval.datasets.base import Dataset, DatasetSpec, finish, register

TEST_FILE = "test_datasets.jsonl"

Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]


class HuatuoRecord(BaseModel):
    """One line of a Huatuo-26M QA file; a single string stands for a list of one."""

    model_config = ConfigDict(extra="ignore")

    questions: list[Text] = Field(min_length=1)
    answers: list[Text] = Field(min_length=1)

    @field_validator("questions", "answers", mode="before")
    @classmethod
    def _listed(cls, value: object) -> object:
        return [value] if isinstance(value, str) else value


def load_huatuo_kgqa(path: Path) -> Dataset:
    """The file at `path` (or `test_datasets.jsonl` in the folder `path`)."""
    reading = read_jsonl(data_file(path, TEST_FILE))
    source_file = fingerprint(reading.path)
    cases = []
    for line, record in valid_records(reading, HuatuoRecord):
        answers = list(dict.fromkeys(record.answers))
        cases.append(
            Case(
                id=f"huatuo-kgqa:{line}",
                language="zh",
                task="free_text",
                question=record.questions[0],
                gold=Gold(answer=answers[0], answers=answers),
                meta={"source": "huatuo-kgqa", "line": line, META_KEY: origin_meta(source_file, line)},
            )
        )
    return finish("huatuo-kgqa", cases, [reading.report])


register(
    DatasetSpec(
        "huatuo-kgqa",
        "Huatuo-26M knowledge-graph QA (Chinese, JSONL of questions/answers lists), free-text answer",
        f"huatuo_kgqa/{TEST_FILE}",
        load_huatuo_kgqa,
    )
)
