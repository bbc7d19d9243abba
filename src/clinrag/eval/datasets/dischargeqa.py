"""DischargeQA-style questions (EXPRAG) over the SYNTHETIC cohort of `clinrag.patients.synthetic`.

MIMIC-IV discharge summaries are not available here, so the patients are generated (not real people); the
report and every case's meta say so. Three datasets, one case per patient (case id = record id):

- `dischargeqa-diagnosis`: the principal discharge diagnosis among 4 options (3 principal diagnoses of
  patients whose condition clusters are disjoint from this patient's), task "diagnosis";
- `dischargeqa-medication`: the discharge medications, multi-select, with at least 3 (and as many as gold)
  distractor drugs taken from other patients, excluding drugs that could also be right (alternatives of the
  patient's own clusters, usual drugs of the patient's diagnoses); task "multi_select";
- `dischargeqa-instruction`: the patient's discharge instructions among 4 texts (3 from patients of disjoint
  clusters), task "multiple_choice".

Option keys are the option texts; options are shuffled deterministically per (task, seed, patient).

Leakage: the background is made of the report sections that do not state the answer (`VISIBLE`), and then
every sentence that still mentions a gold item — its code, its description, the cluster's name for the
principal diagnosis, or a sentence of the gold instructions — is dropped (case-insensitive). Coded sets on the
case leave the gold codes out (the principal diagnosis, or the medications).

"Path": not a file but a generator spec `synthetic:N[:SEED]` (default `synthetic:300:0`): N patients
drawn with SEED."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import simple_icd_10_cm as cm

from clinrag.core.errors import InvalidInputError
from clinrag.core.models import Case, Demographics, Gold, PatientProfile
from clinrag.eval.datasets.base import Dataset, DatasetSpec, finish, register
from clinrag.knowledge.chunking import split_sentences
from clinrag.patients.record import PatientRecord
from clinrag.patients.synthetic import CLUSTERS, COMORBIDITIES, NOTICE, SECTIONS, SOURCE, generate_cohort

DEFAULT_SPEC = "synthetic:300:0"
TASKS = ("diagnosis", "medication", "instruction")
# Report sections shown per task: whatever states the answer is left out.
_HIDDEN = {
    "diagnosis": {
        "Hospital Course",
        "Discharge Diagnosis",
        "Discharge Medications",
        "Discharge Instructions",
    },
    "medication": {"Hospital Course", "Discharge Medications", "Discharge Instructions"},
    "instruction": {"Discharge Instructions"},
}
VISIBLE = {task: tuple(s for s in SECTIONS if s not in hidden) for task, hidden in _HIDDEN.items()}
QUESTIONS = {
    "diagnosis": "Based on this patient's discharge summary excerpts, what was the principal discharge "
    "diagnosis of the admission?",
    "medication": "Based on this patient's discharge summary excerpts, which medications was the patient "
    "discharged on? Select all that apply.",
    "instruction": "Based on this patient's discharge summary excerpts, which discharge instructions were "
    "given to the patient?",
}
TASK_KIND = {"diagnosis": "diagnosis", "medication": "multi_select", "instruction": "multiple_choice"}
NOT_ENOUGH = "patients without 3 distractors from other patients"
_CLUSTER_NAMES = {cluster.key: cluster.name for cluster in CLUSTERS}
_SLOT_DRUGS = {cluster.key: {d for slot in cluster.medications for d in slot} for cluster in CLUSTERS}
_USUAL_DRUG = {code: drug for code, drug, _ in COMORBIDITIES if drug is not None}


def parse_spec(spec: str | Path) -> tuple[int, int]:
    """(cohort size, seed) from "synthetic:N" or "synthetic:N:SEED"."""
    parts = str(spec).split(":")
    try:
        if parts[0] != "synthetic" or len(parts) not in (2, 3):
            raise ValueError
        size, seed = int(parts[1]), int(parts[2]) if len(parts) == 3 else 0
    except ValueError:
        raise InvalidInputError(
            f"{spec!s}: a DischargeQA source is a generator spec 'synthetic:N[:SEED]', e.g. {DEFAULT_SPEC}"
        ) from None
    if size < 4:
        raise InvalidInputError(f"{spec!s}: the cohort needs at least 4 patients, got {size}")
    return size, seed


@dataclass(frozen=True)
class _Question:
    gold: list[str]  # option texts
    leaks: list[str]  # strings whose mention gives the answer away
    candidates: list[str]  # distractor pool, in cohort order
    need: int  # how many distractors


def _principal(record: PatientRecord) -> str:
    code = record.structured["principal_diagnosis"]
    return f"{cm.get_description(code)} ({code})"


def _instructions(record: PatientRecord) -> str:
    return next(s.text for s in record.report if s.title == "Discharge Instructions")


def _question(task: str, record: PatientRecord, cohort: list[PatientRecord]) -> _Question:
    clusters = set(record.structured["condition_clusters"])
    others = [p for p in cohort if not clusters & set(p.structured["condition_clusters"])]
    if task == "diagnosis":
        code = record.structured["principal_diagnosis"]
        main = record.structured["condition_clusters"][0]
        leaks = [code, cm.get_description(code), _CLUSTER_NAMES[main]]
        pool = [
            _principal(p)
            for p in others
            if p.structured["principal_diagnosis"] not in record.codes["diagnoses"]
        ]
        return _Question([_principal(record)], leaks, pool, 3)
    if task == "medication":
        gold = list(record.codes["medications"])
        plausible = set(gold).union(*(_SLOT_DRUGS[c] for c in clusters))
        plausible |= {_USUAL_DRUG[c] for c in record.codes["diagnoses"] if c in _USUAL_DRUG}
        pool = [d for p in cohort if p.id != record.id for d in p.codes["medications"] if d not in plausible]
        return _Question(gold, gold, pool, max(3, len(gold)))
    text = _instructions(record)
    return _Question([text], [text, *split_sentences(text)], [_instructions(p) for p in others], 3)


def _visible_text(record: PatientRecord, task: str, leaks: list[str]) -> tuple[str, int]:
    """The task's visible sections without any sentence that mentions a leak; (text, sentences dropped)."""
    lowered = [leak.casefold() for leak in leaks if leak.strip()]
    parts, dropped = [], 0
    for section in record.report:
        if section.title not in VISIBLE[task]:
            continue
        lines = []
        for line in section.text.split("\n"):
            sentences = split_sentences(line)
            kept = [s for s in sentences if not any(leak in s.casefold() for leak in lowered)]
            dropped += len(sentences) - len(kept)
            if kept:
                lines.append(" ".join(kept))
        if lines:
            parts.append(f"{section.title}:\n" + "\n".join(lines))
    return "\n\n".join(parts), dropped


def _case(task: str, record: PatientRecord, cohort: list[PatientRecord], seed: int) -> Case | None:
    question = _question(task, record, cohort)
    rng = random.Random(f"dischargeqa:{task}:{seed}:{record.id}")
    pool = list(dict.fromkeys(c for c in question.candidates if c not in question.gold))
    if len(pool) < question.need:
        return None
    options = [*question.gold, *rng.sample(pool, question.need)]
    rng.shuffle(options)
    text, dropped = _visible_text(record, task, question.leaks)
    codes = {field: list(values) for field, values in record.codes.items()}
    if task == "diagnosis":
        codes["diagnoses"] = [c for c in codes["diagnoses"] if c != record.structured["principal_diagnosis"]]
    elif task == "medication":
        del codes["medications"]
    metadata = record.metadata
    single = len(question.gold) == 1 and task != "medication"
    return Case(
        id=record.id,
        task=TASK_KIND[task],
        question=QUESTIONS[task],
        patient=PatientProfile(
            initial_presentation=text,
            demographics=Demographics(age=metadata.get("age"), sex=metadata.get("sex")),
            codes=codes,
        ),
        options={option: option for option in options},
        gold=Gold(answer=question.gold[0] if single else None, answers=list(question.gold)),
        meta={
            "source": SOURCE,
            "synthetic": NOTICE,
            "seed": seed,
            "sections": list(VISIBLE[task]),
            "dropped_sentences": dropped,
        },
    )


def _labels(task: str, record: PatientRecord) -> list[str]:
    if task == "diagnosis":
        return [_principal(record)]
    if task == "medication":
        return list(record.codes["medications"])
    return [_instructions(record)]


def dischargeqa_loader(task: str) -> Callable[[Path], Dataset]:
    if task not in TASKS:
        raise InvalidInputError(f"unknown DischargeQA task {task!r}; expected one of {', '.join(TASKS)}")

    def load(path: Path) -> Dataset:
        size, seed = parse_spec(path)
        cohort = generate_cohort(size, seed)
        cases, skipped = [], []
        for record in cohort:
            case = _case(task, record, cohort, seed)
            if case is None:
                skipped.append(record.id)
            else:
                cases.append(case)
        notes = [f"SYNTHETIC cohort of {size} patients (seed {seed}), {NOTICE}"]
        notes += [f"skipped {len(skipped)} {NOT_ENOUGH}: {skipped[:10]}"] if skipped else []
        labels = {record.id: _labels(task, record) for record in cohort}
        return finish(f"dischargeqa-{task}", cases, [], records=cohort, labels=labels, notes=notes)

    return load


register(
    *(
        DatasetSpec(
            f"dischargeqa-{task}",
            f"DischargeQA-style {task} questions over a SYNTHETIC cohort (generated, not real patients)",
            DEFAULT_SPEC,
            dischargeqa_loader(task),
            generated=True,
        )
        for task in TASKS
    )
)
