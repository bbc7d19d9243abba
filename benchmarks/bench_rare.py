"""Rare diseases from real published cases, measured (one JSON line).

The cases are GA4GH phenopackets of the phenopacket-store (`../shared/data/phenopackets`, one folder per
cohort). Its cohorts are split by a hash of their names (`split_cohorts`, seed 0): the "tune" half is where
the differential's settings may be chosen, and the cases reported here are drawn from the other half only.
The cohorts judged later are in neither.

On the same cases, in the same run:
(i) `consult` from the HPO codes (observed and excluded terms, onset class, age, sex) and from the rendered
    text (observed and excluded labels in words), against the Phenomizer-style baseline (`phenomizer`:
    Resnik similarity, IC from OMIM, funSimAvg) — GTPA@1/3/10 and the ratio of each GTPA@1 to the
    baseline's. `consult` runs on its packaged default knowledge (common diseases, OMIM and Orphanet: a
    larger answer space, where an Orphanet group can outrank its OMIM subtype) and, from the codes, on OMIM's
    diseases alone (`packaged:omim-diseases`: the baseline's answer space). Cases whose gold disease is not
    annotated in the packaged HPO release are counted (they are misses for every method);
(ii) speed: structured consultations per second in process, against the baseline's;
(iii) interactive: meddx's structured HPO patient answers from the packet (observed terms and the terms above
    them "yes", excluded terms and the terms below them "no", anything else "don't know"); each case starts
    from its first 3 observed terms (and its onset class) and the consultation asks its most informative
    question, one at a time: GTPA@1 after 0, 1, … questions.

    python benchmarks/bench_rare.py --data ../shared/data --cases 300 --seed 0
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from clinrag.consult.consultant import Consultant
from clinrag.core.models import HPO_OBSERVED, HPO_ONSET, Case, RankedDiagnosis
from clinrag.core.settings import Settings
from clinrag.eval.datasets.phenopackets import cohort_names, load_phenopackets, split_cohorts
from clinrag.eval.metrics import AnswerSpace, gold_rank
from clinrag.methods.base import MethodContext
from clinrag.methods.consult import ConsultConfig, build
from clinrag.methods.meddx.hpo_patient import HpoPatient
from clinrag.methods.phenomizer import Phenomizer
from clinrag.terms.hpo import hpo_diseases, is_hpo_id

TUNE_SHARE = 0.5  # of the cohorts, for choosing settings; the rest are reported on
START_TERMS = 3
QUESTIONS = 10
INTERACTIVE_CASES = 100


def cohort_halves(folder: Path) -> tuple[list[str], list[str]]:
    """(tune, report): the store's cohorts split by a hash of their names, the same split for every script
    that tunes (`tune_rare`) or reports."""
    return split_cohorts(cohort_names(folder), TUNE_SHARE, seed=0)


def rank(ddx: Sequence[RankedDiagnosis], case: Case) -> int:
    assert case.gold is not None
    return gold_rank(ddx, case.gold.answer or "", AnswerSpace({}), also=case.gold.answers)


def scores(ranks: Sequence[int]) -> dict[str, float]:
    return {f"gtpa@{k}": round(sum(r <= k for r in ranks) / len(ranks), 4) for k in (1, 3, 10)}


def ranked(
    answer_of: Callable[[Case], list[RankedDiagnosis]], cases: Sequence[Case]
) -> tuple[list[int], float]:
    """Each case's gold rank, and cases per second."""
    answer_of(cases[0])  # built and warmed
    started = time.perf_counter()
    ranks = [rank(answer_of(case), case) for case in cases]
    return ranks, len(cases) / (time.perf_counter() - started)


def interactive(consultant: Consultant, cases: Sequence[Case]) -> list[float]:
    """GTPA@1 after 0, 1, …, QUESTIONS questions, over the cases with more than START_TERMS observed terms;
    meddx's structured HPO patient answers (`HpoPatient`)."""
    concepts = consultant.concepts
    hits = [0] * (QUESTIONS + 1)
    chosen = [c for c in cases if c.patient and len(c.patient.codes[HPO_OBSERVED]) > START_TERMS]
    for case in chosen:
        assert case.patient is not None
        patient = HpoPatient(case)
        codes = case.patient.codes
        state = consultant.start("", present=[*codes[HPO_OBSERVED][:START_TERMS], *codes.get(HPO_ONSET, ())])
        for asked in range(QUESTIONS + 1):
            report, _ = consultant.report(state)
            ddx = [RankedDiagnosis(name=d.name, code=d.icd10 or d.key) for d in report.differential]
            hits[asked] += rank(ddx, case) == 1
            if asked == QUESTIONS or not report.questions:
                hits[asked + 1 :] = [h + (rank(ddx, case) == 1) for h in hits[asked + 1 :]]
                break
            concept = report.questions[0].concept
            said = [patient.ask(code).present for code in concepts[concept].codes if is_hpo_id(code)]
            known = next((present for present in said if present is not None), None)
            consultant.answer(
                state, concept, "uncertain" if known is None else "present" if known else "absent"
            )
    return [round(h / len(chosen), 4) for h in hits]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--cases", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    folder = args.data / "phenopackets"
    tune, report = cohort_halves(folder)
    dataset = load_phenopackets(folder, report)
    cases = random.Random(args.seed).sample(dataset.cases, min(args.cases, len(dataset.cases)))
    annotated = {d.id for d in hpo_diseases("OMIM")} | {d.id for d in hpo_diseases("ORPHA")}
    missing = sum(not set(c.gold.answers) & annotated for c in cases if c.gold)

    with tempfile.TemporaryDirectory() as scratch:
        context = MethodContext(settings=Settings(home=Path(scratch) / "home"))
        coded = build(context, ConsultConfig(reads="codes"))
        coded_omim = build(context, ConsultConfig(reads="codes", sources="packaged:omim-diseases"))
        worded = build(context, ConsultConfig(reads="text"))
        baseline = Phenomizer()

        def ddx_of(method) -> Callable[[Case], list[RankedDiagnosis]]:
            return lambda case: answer.result.ddx if (answer := method.answer(case)).result else []

        coded_ranks, coded_rate = ranked(ddx_of(coded), cases)
        omim_ranks, _ = ranked(ddx_of(coded_omim), cases)
        worded_ranks, worded_rate = ranked(ddx_of(worded), cases)
        baseline_ranks, baseline_rate = ranked(ddx_of(baseline), cases)
        curve = interactive(coded.consultant, cases[:INTERACTIVE_CASES])

    base = scores(baseline_ranks)
    structured, text, omim = scores(coded_ranks), scores(worded_ranks), scores(omim_ranks)
    print(
        json.dumps(
            {
                "benchmark": "rare",
                "cohorts_tune": len(tune),
                "cohorts_reported": len(report),
                "cases": len(cases),
                "seed": args.seed,
                "gold_not_annotated": missing,
                "structured": structured,
                "structured_omim": omim,
                "text": text,
                "baseline_phenomizer": base,
                "structured_vs_baseline_gtpa@1": round(structured["gtpa@1"] / base["gtpa@1"], 3),
                "structured_omim_vs_baseline_gtpa@1": round(omim["gtpa@1"] / base["gtpa@1"], 3),
                "text_vs_baseline_gtpa@1": round(text["gtpa@1"] / base["gtpa@1"], 3),
                "structured_cases_per_s": round(coded_rate, 1),
                "text_cases_per_s": round(worded_rate, 1),
                "baseline_cases_per_s": round(baseline_rate, 1),
                "structured_vs_baseline_speed": round(coded_rate / baseline_rate, 2),
                "interactive_start_terms": START_TERMS,
                "interactive_gtpa@1_by_questions": curve,
            }
        )
    )


if __name__ == "__main__":
    main()
