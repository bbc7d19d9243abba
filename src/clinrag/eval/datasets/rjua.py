"""`rjua`: RJUA-QA (Lyu et al. 2023, arXiv 2312.09785), Chinese urology consultations answered by Renji
Hospital urologists with the guideline passages their answers rest on.

RJUA-QA is published on OpenKG (http://data.openkg.cn/dataset/rjua-qadatasets) as three JSON Lines files,
`RJUA_train.json`, `RJUA_valid.json` and `RJUA_test.json` (213 test records), one object per line:
    {"id": "4", "question": "医生您好，我是60岁男性…请问我是什么诊断，该如何治疗？",
     "context": ["Context：临床表现：…", "Context：…"], "answer": "您好，根据您的描述，…",
     "disease": "双侧输尿管结石伴积水感染、急性梗阻性肾衰", "advice": "双侧输尿管支架置入术、…"}
Confirmed: the field names and the example record (github.com/alipay/RJU_Ant_QA README.md and
openmedlab/Awesome-Medical-Dataset resources/RJUA-QA.md), one object per line (the DoctorRAG scripts and
other published loaders read the files line by line). Not confirmed from a data file itself: whether
`context` is always a list (a plain string is accepted too) and how a record without a diagnosis spells its
`disease` (the repository's Data/disease.txt, the diseases split out of the records, lists "nan" and "/").

A case is a free-text question in Chinese. The supplied context goes where PubMedQA's abstract goes: after
the question, under "Context:", each passage without its "Context：" label; `meta["question_only"]` is the
patient's question alone. `gold.answer` is the urologist's answer; `gold.answers` holds the diagnoses of
`disease`, split at 、，,；; ("nan" and "/" are no diagnosis). `advice` is not put on the case (the answer
states it). Case ids are "rjua:<id>"."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, StrictInt, StringConstraints, field_validator

from clinrag.core.files import data_file, read_jsonl, valid_records
from clinrag.core.models import Case, Gold
from clinrag.core.provenance import META_KEY, fingerprint, origin_meta
from clinrag.eval.datasets.base import Dataset, DatasetSpec, finish, register

TEST_FILE = "RJUA_test.json"
DISEASE_SEPARATORS = re.compile(r"[、，,；;]")
NO_DISEASE = {"nan", "/"}
CONTEXT_LABEL = re.compile(r"^Context[：:]\s*")

Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]


class RjuaRecord(BaseModel):
    """One line of an RJUA-QA file."""

    model_config = ConfigDict(extra="ignore")

    id: Text | StrictInt
    question: Text
    answer: Text
    context: str | list[str] = ""
    disease: str | None = None

    @field_validator("disease", mode="before")
    @classmethod
    def _nan_is_none(cls, value: object) -> object:
        return None if isinstance(value, float) else value


def diseases(disease: str | None) -> list[str]:
    """The diagnoses one `disease` value names, in order, without repeats."""
    names = (name.strip() for name in DISEASE_SEPARATORS.split(disease or ""))
    return list(dict.fromkeys(name for name in names if name and name.casefold() not in NO_DISEASE))


def _passages(context: str | list[str]) -> list[str]:
    texts = [context] if isinstance(context, str) else context
    passages = (CONTEXT_LABEL.sub("", text.strip()) for text in texts)
    return [passage for passage in passages if passage]


def load_rjua(path: Path) -> Dataset:
    """The RJUA-QA file at `path` (or `RJUA_test.json` in the folder `path`)."""
    reading = read_jsonl(data_file(path, TEST_FILE))
    source_file = fingerprint(reading.path)
    cases = []
    for line, record in valid_records(reading, RjuaRecord):
        passages = _passages(record.context)
        question = record.question + ("\n\nContext:\n" + "\n".join(passages) if passages else "")
        cases.append(
            Case(
                id=f"rjua:{record.id}",
                language="zh",
                task="free_text",
                question=question,
                gold=Gold(answer=record.answer, answers=diseases(record.disease)),
                meta={
                    "source": "rjua",
                    "line": line,
                    "question_only": record.question,
                    META_KEY: origin_meta(source_file, record.id),
                },
            )
        )
    return finish("rjua", cases, [reading.report])


register(
    DatasetSpec(
        "rjua",
        "RJUA-QA urology consultations (Chinese, JSONL): free-text answer, diagnoses, guideline context",
        f"rjua/{TEST_FILE}",
        load_rjua,
    )
)
