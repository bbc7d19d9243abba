"""Choose the consultation's prior settings for clinrag's knowledge base on the open-world tuning set only.

The presentations of tests/data/consult/open_dev_tune.jsonl (written apart from the code) are answered by the
default consultation under each value of the grid below; open_dev_report.jsonl is never read here (it is
what the README reports, from benchmarks/bench_consult.py --only knowledge). The lay DDXPlus development set
is scored beside, as the set that must not fall. The knowledge is compiled once; only the likelihood
settings change between runs. Prints one JSON line per setting, then the chosen one (the best sum of tune
GTPA@1 and @3; ties: the first in the grid).

    .venv/bin/python benchmarks/tune_knowledge.py
"""

from __future__ import annotations

import argparse
import json
import tempfile
from dataclasses import replace
from pathlib import Path

from clinrag.core.settings import Settings
from clinrag.eval.datasets import load_dataset
from clinrag.eval.metrics import AnswerSpace, gold_rank
from clinrag.methods.base import MethodContext
from clinrag.methods.consult import ConsultConfig, ConsultMethod, build_consultant

CONSULT_DATA = Path(__file__).parents[1] / "tests" / "data" / "consult"
TUNE = CONSULT_DATA / "open_dev_tune.jsonl"
NO_FALL = CONSULT_DATA / "ddxplus_lay_dev.jsonl"
# (prevalence_exponent, typical_background): the prior's weight on how common a condition is, and the leak of
# a common finding a typical-findings list does not name
GRID = [(0.25, 0.25), (0.25, 0.5), (0.5, 0.25), (0.5, 0.5), (0.5, 1.0), (1.0, 0.5)]


def scores(method: ConsultMethod, path: Path) -> dict[str, float]:
    cases = load_dataset("text-cases", path).cases
    ranks = []
    for case in cases:
        answer = method.answer(case)
        ddx = answer.result.ddx if answer.result is not None else []
        gold = case.gold
        assert gold is not None and gold.answer is not None
        ranks.append(gold_rank(ddx, gold.answer, AnswerSpace({}), gold.answers, case.meta.get("icd10")))
    return {f"gtpa@{k}": round(sum(r <= k for r in ranks) / len(ranks), 4) for k in (1, 3, 10)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        context = MethodContext(settings=Settings(home=Path(home)))
        consultant = build_consultant(context, ConsultConfig())
        base = consultant.differential
        results = []
        for exponent, background in GRID:
            settings = replace(base.settings, prevalence_exponent=exponent, typical_background=background)
            consultant.differential = base.with_settings(settings)
            method = ConsultMethod(consultant)
            row = {
                "prevalence_exponent": exponent,
                "typical_background": background,
                "tune": scores(method, TUNE),
                "lay_ddxplus": scores(method, NO_FALL),
            }
            print(json.dumps(row), flush=True)
            results.append(row)
    best = max(results, key=lambda r: r["tune"]["gtpa@1"] + r["tune"]["gtpa@3"])
    print(json.dumps({"chosen": best}))


if __name__ == "__main__":
    main()
