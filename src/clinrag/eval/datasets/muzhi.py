"""`muzhi`: the MuZhi (MZ) dialogue-diagnosis dataset (Wei et al., ACL 2018, "Task-oriented Dialogue System
for Automatic Diagnosis"): Chinese pediatric consultations reduced to user goals, the symptoms a parent
states first (explicit) and those a doctor learns by asking (implicit), with the diagnosed disease.

Two published shapes of a goal are read, from JSON or JSON Lines only:
- the goal set: {"consult_id", "disease_tag", "goal": {"request_slots": {"disease": "UNK"},
  "explicit_inform_slots": {symptom: true|false}, "implicit_inform_slots": {…}}}. The original
  `acl2018-mds.p` is a pickled {"train": [goals], "test": [goals]} (its README, and the keys read by
  github.com/jymChen/Diaformer data/muzhi_dataset/preprocess.py); github.com/LiuQL2/MedicalChatbot
  resources/goal_slot_value_0.0.json holds goals of this shape one per line.
- DxFormer's conversion (Chen et al. 2022, github.com/lemuria-wchen/DxFormer utils.py and
  data/mz4/test_set.json; also how its MZ-10 set is built): a list of {"pid", "exp_sxs": {symptom: "1"|"0"},
  "imp_sxs": {symptom: "1"|"0"|"2"}, "label"}, "2" meaning the patient is not sure.
A JSON object of splits is read at its `test` split. Fields read: the id (`consult_id` / `pid`), the disease
(`disease_tag` / `label`) and the two symptom maps. The options are every disease of the file (all splits).

clinrag never unpickles a data file (unpickling runs code): a pickle is refused with a `DataFormatError`
saying how to convert it to JSON once. Each goal becomes a diagnosis case like a DxBench record of `cod`
(`cod.symptom_case`): the explicit symptoms told, the implicit ones hidden; a goal with no explicit symptom
is skipped and reported. (DxBench's Muzhi_{en,zh}.json, the MZ test set in English and Chinese, load as
`cod`.)"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, StrictBool, StrictInt, StringConstraints, ValidationError

from clinrag.core.errors import DataFormatError
from clinrag.core.files import INVALID_RECORDS, ReadReport, data_file, read_json, read_jsonl
from clinrag.core.models import Case
from clinrag.eval.datasets.base import Dataset, DatasetSpec, finish, register
from clinrag.eval.datasets.cod import NO_EXPLICIT, Symptom, named_gold_note, symptom_case

DEFAULT_FILES = ("goal_set.json", "test_set.json", "goal_set.jsonl")
PICKLE_SUFFIXES = (".p", ".pkl", ".pickle")
ANSWERS: dict[str, bool | None] = {"1": True, "0": False, "2": None}

Name = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]


class Slots(BaseModel):
    model_config = ConfigDict(extra="ignore")

    explicit_inform_slots: dict[Name, StrictBool]
    implicit_inform_slots: dict[Name, StrictBool]


class Goal(BaseModel):
    """A user goal of the MuZhi goal set."""

    model_config = ConfigDict(extra="ignore")

    consult_id: Name | StrictInt
    disease_tag: Name
    goal: Slots


class DxFormerSample(BaseModel):
    """A goal as DxFormer's preprocess.py writes it."""

    model_config = ConfigDict(extra="ignore")

    pid: Name
    exp_sxs: dict[Name, Literal["0", "1", "2"]]
    imp_sxs: dict[Name, Literal["0", "1", "2"]]
    label: Name


def pickle_error(file: Path) -> DataFormatError:
    return DataFormatError(
        f"{file}: a Python pickle; clinrag reads MuZhi as JSON or JSON Lines only and never unpickles a data "
        'file (unpickling can run code). Convert it once, with a Python you trust: python -c "import json, '
        f"pickle; json.dump(pickle.load(open('{file.name}', 'rb')), open('goal_set.json', 'w', "
        "encoding='utf-8'), ensure_ascii=False)\", then load goal_set.json"
    )


def _muzhi_file(path: Path) -> Path:
    """`path` itself, or in a folder the first of DEFAULT_FILES; a pickle is refused."""
    if path.is_dir():
        found = [path / name for name in DEFAULT_FILES if (path / name).is_file()]
        if not found:
            pickles = sorted(file for file in path.iterdir() if file.suffix in PICKLE_SUFFIXES)
            if pickles:
                raise pickle_error(pickles[0])
            raise DataFormatError(f"{path}: none of {', '.join(DEFAULT_FILES)} in this folder")
        path = found[0]
    file = data_file(path)
    with file.open("rb") as handle:
        if file.suffix in PICKLE_SUFFIXES or handle.read(1) == b"\x80":  # pickle protocol 2 and later
            raise pickle_error(file)
    return file


def _rows(file: Path, split: str) -> tuple[list[tuple[int, Any]], list[Any], ReadReport]:
    """(numbered goals to ask, the file's other goals, the read report) of a JSON Lines file, a JSON list or
    a JSON object of splits."""
    if file.suffix == ".jsonl":
        reading = read_jsonl(file)
        return list(reading), [], reading.report
    document = read_json(file)
    if isinstance(document, list):
        return list(enumerate(document, start=1)), [], _report(str(file), len(document))
    if not isinstance(document, dict):
        raise DataFormatError(f"{file}: expected a JSON list of goals or an object of splits")
    if not isinstance(document.get(split), list):
        raise DataFormatError(f"{file}: expected a {split!r} list of goals (found {', '.join(document)})")
    others = [
        goal for name, part in document.items() if name != split and isinstance(part, list) for goal in part
    ]
    return (
        list(enumerate(document[split], start=1)),
        others,
        _report(f"{file} [{split}]", len(document[split])),
    )


def _report(where: str, count: int) -> ReadReport:
    return ReadReport(where, records=count, items=count, complete=True)


def _goal(raw: Any) -> tuple[str, str, list[Symptom], list[Symptom]] | None:
    """(id, disease, explicit, implicit symptoms) of a goal of either shape, or None when it is invalid."""
    try:
        if isinstance(raw, dict) and "goal" in raw:
            goal = Goal.model_validate(raw)
            slots = goal.goal
            explicit, implicit = slots.explicit_inform_slots.items(), slots.implicit_inform_slots.items()
            return str(goal.consult_id), goal.disease_tag, list(explicit), list(implicit)
        sample = DxFormerSample.model_validate(raw)
    except ValidationError:
        return None
    explicit = [(name, ANSWERS[value]) for name, value in sample.exp_sxs.items()]
    implicit = [(name, ANSWERS[value]) for name, value in sample.imp_sxs.items()]
    return sample.pid, sample.label, explicit, implicit


def load_muzhi(path: Path, split: str = "test") -> Dataset:
    """The `muzhi` dataset of a JSON or JSON Lines file of goals, or a folder holding one of DEFAULT_FILES.
    Case ids are the goals' ids."""
    file = _muzhi_file(path)
    rows, others, report = _rows(file, split)
    goals = [(where, _goal(raw)) for where, raw in rows]
    diseases = {goal[1] for _, goal in goals if goal} | {goal[1] for goal in map(_goal, others) if goal}
    options = {name: name for name in sorted(diseases)}
    cases: list[Case] = []
    for where, goal in goals:
        if goal is None or not goal[2]:
            report.skip(INVALID_RECORDS if goal is None else NO_EXPLICIT, where)
            continue
        case_id, disease, explicit, implicit = goal
        cases.append(
            symptom_case(case_id, disease, explicit, implicit, options=options, meta={"source": "muzhi"})
        )
    notes = [f"{len(options)} diseases: {', '.join(options)}", named_gold_note(cases)]
    return finish("muzhi", cases, [report], notes=notes)


register(
    DatasetSpec(
        "muzhi",
        "MuZhi (MZ) pediatric dialogue-diagnosis goals (zh): diagnosis among the dataset's diseases from the "
        "explicit symptoms, implicit ones hidden for a patient simulator",
        "muzhi",
        load_muzhi,
    )
)
