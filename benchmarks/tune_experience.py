"""Re-derive the defaults of `meddx-experience` (its question policy and stopping rule) on DDXPlus development
patients that the evaluation never questions.

The evaluation sample (`clinrag eval run --dataset ddxplus-interactive --limit 200 --seed 0`) is reproduced
with `sample_cases` and left out; development sets are drawn from the rest with fixed seeds, and each is
questioned against a patient base without the evaluation sample and without itself. The policy's choice of
question does not depend on the stopping rule, so each model setting is run once for `--max-questions`
questions per patient and every stopping rule is scored on those trajectories exactly as the method would
have stopped. Among the settings whose mean number of questions is within `--budget`, the one with the best
mean development GTPA@1 is chosen (ties: fewer questions). Prints one JSON line.

    .venv/bin/python benchmarks/tune_experience.py --data /work/shared/data/ddxplus
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from clinrag.core.models import Case
from clinrag.eval.datasets import load_dataset
from clinrag.eval.sampling import sample_cases
from clinrag.methods.meddx.experience_policy import ExperienceModel
from clinrag.methods.meddx.structured_patient import StructuredPatient, evidence_catalogue

EVAL_LIMIT, EVAL_SEED = 200, 0  # the evaluation sample reported in the README
MODEL_GRID = {
    "mismatch": [0.02, 0.1, 0.3, 1.0],
    "unseen": [1e-4, 1e-3, 1e-2],
    "use_age": [False, True],
}
OTHER_SEX = [0.01, 0.05, 0.2]  # tuned second, at the best setting of MODEL_GRID (0.05 during the first pass)
STOP_GRID = {
    "confidence": [0.99, 0.995, 0.999, 0.9999, 0.99999],
    "min_questions": [0, 2, 4],
    "max_questions": [10, 15],
}


@dataclass
class Trajectory:
    """One patient questioned without stopping: after q questions, the top diagnosis, its probability and
    the gold diagnosis's rank."""

    top: list[float]
    rank: list[int]


def interview(model: ExperienceModel, case: Case, questions: int, use_age: bool) -> Trajectory:
    patient = StructuredPatient(case, evidence_catalogue(case.meta["evidence_catalogue"]))
    demographics = case.patient.demographics if case.patient else None
    age = demographics.age if demographics and use_age else None
    first = patient.initial()
    weights = model.prior(demographics.sex if demographics else None, age)
    weights = model.update(weights, first.evidence, first.present, first.values)
    asked, trajectory = {first.evidence}, Trajectory([], [])
    for _ in range(questions + 1):
        ranked = list(model.distribution(weights).items())
        names = [name for name, _ in ranked]
        trajectory.top.append(ranked[0][1] if ranked else 0.0)
        trajectory.rank.append(names.index(case.gold.answer) + 1 if case.gold.answer in names else 99)
        choice = model.next_question(weights, asked)
        if choice is None:
            break
        reply = patient.ask(choice.evidence)
        weights = model.update(weights, reply.evidence, reply.present, reply.values)
        asked.add(choice.evidence)
    return trajectory


def stop_at(trajectory: Trajectory, confidence: float | None, min_questions: int, max_questions: int) -> int:
    """How many questions the method asks before stopping (same rule as `ExperienceQuestioning`)."""
    last = min(max_questions, len(trajectory.top) - 1)
    for asked in range(last):
        if confidence is not None and asked >= min_questions and trajectory.top[asked] >= confidence:
            return asked
    return last


def score(trajectories: list[Trajectory], **rule: float | int | None) -> dict[str, float]:
    stops = [stop_at(t, **rule) for t in trajectories]  # type: ignore[arg-type]
    ranks = [t.rank[s] for t, s in zip(trajectories, stops, strict=True)]
    return {
        "gtpa@1": float(np.mean([r == 1 for r in ranks])),
        "gtpa@3": float(np.mean([r <= 3 for r in ranks])),
        "questions": float(np.mean(stops)),
    }


def grid(space: dict[str, list]) -> list[dict]:
    return [dict(zip(space, values, strict=True)) for values in itertools.product(*space.values())]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=Path("../shared/data/ddxplus"))
    parser.add_argument("--dev-size", type=int, default=300)
    parser.add_argument("--dev-seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--budget", type=float, default=7.0, help="most questions on average")
    parser.add_argument("--quick", action="store_true", help="one model setting only (a smoke run)")
    args = parser.parse_args()
    started = time.perf_counter()

    dataset = load_dataset("ddxplus-interactive", args.data)
    evaluation = {c.id for c in sample_cases(dataset.cases, EVAL_LIMIT, EVAL_SEED)}
    pool = [c for c in dataset.cases if c.id not in evaluation]
    dev_sets = [sample_cases(pool, args.dev_size, seed) for seed in args.dev_seeds]
    disjoint = all(evaluation.isdisjoint(c.id for c in dev) for dev in dev_sets)
    assert disjoint, "a development patient is in the evaluation sample"

    longest = max(STOP_GRID["max_questions"])
    bases = [dataset.experience(exclude=evaluation | {c.id for c in dev}) for dev in dev_sets]

    def evaluate(setting: dict) -> list[dict]:
        """Every stopping rule of STOP_GRID under one model setting, scored on each development set."""
        params = {k: v for k, v in setting.items() if k != "use_age"}
        runs = []
        for dev, base in zip(dev_sets, bases, strict=True):
            model = ExperienceModel(base, dataset.labels, **params)
            runs.append([interview(model, case, longest, setting["use_age"]) for case in dev])
        print(f"done {setting}", file=sys.stderr, flush=True)
        rows = []
        for rule in grid(STOP_GRID):
            per_set = [score(trajectories, **rule) for trajectories in runs]
            mean = {k: round(float(np.mean([s[k] for s in per_set])), 4) for k in per_set[0]}
            rows.append({**setting, **rule, **mean, "per_set": per_set})
        return rows

    def best(rows: list[dict]) -> dict:
        within = [r for r in rows if r["questions"] <= args.budget] or rows
        return max(within, key=lambda r: (r["gtpa@1"], -r["questions"]))

    settings = grid(MODEL_GRID)[:1] if args.quick else grid(MODEL_GRID)
    rows = [row for setting in settings for row in evaluate({**setting, "other_sex": 0.05})]
    first = best(rows)
    for other_sex in OTHER_SEX:
        if other_sex != 0.05 and not args.quick:
            rows += evaluate({**{k: first[k] for k in MODEL_GRID}, "other_sex": other_sex})
    chosen = best(rows)
    keys = [*MODEL_GRID, "other_sex", *STOP_GRID]
    print(
        json.dumps(
            {
                "benchmark": "tune_experience",
                "eval_sample": {"limit": EVAL_LIMIT, "seed": EVAL_SEED, "cases": len(evaluation)},
                "dev_sets": {str(s): len(d) for s, d in zip(args.dev_seeds, dev_sets, strict=True)},
                "dev_eval_disjoint": disjoint,
                "grid": {**MODEL_GRID, "other_sex": OTHER_SEX, **STOP_GRID},
                "budget_questions": args.budget,
                "chosen": {k: chosen[k] for k in keys},
                "chosen_dev": {k: chosen[k] for k in ("gtpa@1", "gtpa@3", "questions", "per_set")},
                "results": [{k: r[k] for k in [*keys, "gtpa@1", "gtpa@3", "questions"]} for r in rows],
                "wall_s": round(time.perf_counter() - started, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
