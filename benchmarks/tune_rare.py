"""Choose the differential's settings for annotated spectra (HPO's rare diseases) by cross-validation over the
development cohorts of the phenopacket-store, and say how well the choice generalises. Prints one JSON line.

The cohorts are split as `bench_rare` splits them (`bench_rare.cohort_halves`): only the "tune" half is read
here; `bench_rare` reports on the other half. The tune half's cohorts are dealt into `--folds` folds by a hash
of their names (a cohort's patients share a gene and a paper, so a fold never splits one). Every setting of
the grid ranks every sampled case once, from its HPO codes (observed and excluded terms, sex); then, for each
fold, the setting with the best GTPA@1 on the other folds (ties: GTPA@10, then the grid's order) is scored
on that fold. The mean of those scores is the cross-validated estimate of the choice, printed beside the
defaults' score on the same cases: the setting chosen on all folds together replaces the defaults only
where that estimate beats them (where it does not, the grid's best is noise fitted to these cases).

The grid holds the settings that act on annotated spectra only (a plain list's constants, which serve the
common-disease tables, were set a priori and are not tuned here).

    .venv/bin/python benchmarks/tune_rare.py --data ../shared/data --cases 800
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import itertools
import json
import random
import tempfile
import time
from pathlib import Path

import numpy as np

from bench_rare import cohort_halves
from clinrag.consult.consultant import Consultant
from clinrag.consult.reason.differential import Differential
from clinrag.core.models import Case
from clinrag.core.settings import Settings
from clinrag.eval.datasets.phenopackets import load_phenopackets
from clinrag.methods.base import MethodContext
from clinrag.methods.consult import ConsultConfig, build, read_case
from clinrag.terms.hpo import onset_ages

GRID = {
    "unstated_share": [0.2, 0.3, 0.5],
    "annotated_spectrum": [5.0, 10.0, 1000.0],
    "annotated_leak": [0.0003, 0.001, 0.003],
    "background_noise": [0.5, 1.0, 2.0],
    "onset_mismatch": [0.05, 0.2, 0.5],
    "specific_share": [0.0, 0.5],
}


def fold_of(cohort: str, folds: int) -> int:
    return int(hashlib.sha256(cohort.encode()).hexdigest(), 16) % folds


Coded = tuple[dict[str, bool], str | None, tuple[float, float] | None, list[int]]


def gold_ranks(differential: Differential, coded: list[Coded]) -> np.ndarray:
    """Each case's best gold rank (1 first; ties go to the lower row, as the consultation orders them; a
    gold disease the knowledge lacks: beyond every disease)."""
    ranks = []
    for known, sex, onset, gold_rows in coded:
        if not gold_rows:
            ranks.append(len(differential.model.diseases) + 1)
            continue
        posterior = differential.posterior(known, sex, unsaid=False, onset=onset)
        ranks.append(
            min(
                1 + int((posterior > posterior[row]).sum()) + int((posterior[:row] == posterior[row]).sum())
                for row in gold_rows
            )
        )
    return np.array(ranks)


def coded_cases(consultant: Consultant, cases: list[Case]) -> list[Coded]:
    """Each case as the consultation reads its codes (`read_case`): the findings known, the sex, the onset
    ages, and the rows of its gold."""
    rows = {disease.key: row for row, disease in enumerate(consultant.differential.model.diseases)}
    coded = []
    for case in cases:
        assert case.gold is not None
        state = read_case(consultant, case, reads="codes")
        gold = [rows[answer] for answer in case.gold.answers if answer in rows]
        coded.append((state.known(), state.findings.sex, onset_ages(state.findings.onset_classes), gold))
    return coded


def gtpa(ranks: np.ndarray, k: int) -> float:
    return float((ranks <= k).mean()) if len(ranks) else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--cases", type=int, default=800)
    parser.add_argument("--folds", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    folder = args.data / "phenopackets"
    tune, _ = cohort_halves(folder)
    dataset = load_phenopackets(folder, tune)
    cases = random.Random(args.seed).sample(dataset.cases, min(args.cases, len(dataset.cases)))
    folds = np.array([fold_of(case.meta["cohort"], args.folds) for case in cases])

    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch:
        context = MethodContext(settings=Settings(home=Path(scratch) / "home"))
        consultant = build(context, ConsultConfig(reads="codes")).consultant
        differential = consultant.differential
        coded = coded_cases(consultant, cases)
        names = list(GRID)
        settings = [dict(zip(names, values, strict=True)) for values in itertools.product(*GRID.values())]
        ranks = [
            gold_ranks(
                differential.with_settings(dataclasses.replace(differential.settings, **chosen)), coded
            )
            for chosen in settings
        ]
        defaults = gold_ranks(differential, coded)

    def best(mask: np.ndarray) -> int:
        return max(
            range(len(settings)), key=lambda k: (gtpa(ranks[k][mask], 1), gtpa(ranks[k][mask], 10), -k)
        )

    held_out = []
    for fold in range(args.folds):
        inside = folds == fold
        chosen = best(~inside)
        held_out.append(
            {
                "fold": fold,
                "cases": int(inside.sum()),
                "chosen": settings[chosen],
                "gtpa@1": round(gtpa(ranks[chosen][inside], 1), 4),
                "defaults_gtpa@1": round(gtpa(defaults[inside], 1), 4),
            }
        )
    everywhere = np.ones(len(cases), dtype=bool)
    chosen = best(everywhere)
    weights = np.array([entry["cases"] for entry in held_out]) / len(cases)
    print(
        json.dumps(
            {
                "benchmark": "tune_rare",
                "cohorts_tune": len(tune),
                "cases": len(cases),
                "folds": args.folds,
                "settings_tried": len(settings),
                "cross_validated_gtpa@1": round(float(weights @ [e["gtpa@1"] for e in held_out]), 4),
                "defaults_gtpa@1": round(gtpa(defaults, 1), 4),
                "per_fold": held_out,
                "chosen": settings[chosen],
                "chosen_gtpa@1/3/10": [round(gtpa(ranks[chosen], k), 4) for k in (1, 3, 10)],
                "defaults_gtpa@1/3/10": [round(gtpa(defaults, k), 4) for k in (1, 3, 10)],
                "seconds": round(time.perf_counter() - started, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
