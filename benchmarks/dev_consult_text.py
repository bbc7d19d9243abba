"""The consultation from DDXPlus text, on development samples only (one JSON line): what the consultation's
changes were judged on, kept apart from the sample `bench_consult.py` reports.

The bench's sample (`ddxplus-text --limit 200 --seed 0`) is reproduced with `sample_cases` and left out;
development samples are drawn from the rest with other seeds. For each, GTPA@1 and @3 of the differential
from the findings understood in the text, and two ceilings that show what extraction could still give:
`gold_present` — the patient's own yes/no DDXPlus evidences given straight to the same differential (perfect
extraction of what the text says) — and `gold_closed` — the same with every other evidence the past patients
were asked about set absent (the closed world that coded methods such as knn-vote have implicitly).

    .venv/bin/python benchmarks/dev_consult_text.py --data ../shared/data/ddxplus --size 200 --seeds 1 2
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from clinrag.core.settings import load_settings
from clinrag.eval.datasets import load_dataset
from clinrag.eval.sampling import sample_cases
from clinrag.methods.base import MethodContext
from clinrag.methods.consult import ConsultConfig, build_consultant

BENCH_LIMIT, BENCH_SEED = 200, 0  # bench_consult.py's defaults: never used here


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data/ddxplus"))
    parser.add_argument("--size", type=int, default=200)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    folder = args.data.resolve()
    coded, text = load_dataset("ddxplus", folder), load_dataset("ddxplus-text", folder)
    held_out = {case.id for case in sample_cases(coded.cases, BENCH_LIMIT, BENCH_SEED)}
    pool = [case for case in text.cases if case.id not in held_out]
    context = MethodContext(
        settings=load_settings(data_dir=folder.parent), experience=coded.records, labels=coded.labels
    )
    consultant = build_consultant(context, ConsultConfig(sources=f"ddxplus:{folder}"))
    names = [disease.name for disease in consultant.differential.model.diseases]
    by_id = {alias: c.id for c in consultant.differential.vocabulary.concepts for alias in c.ids}
    records = {record.id: record for record in coded.records}

    def ranks(posterior: np.ndarray, gold: str) -> tuple[bool, bool]:
        top = [names[i] for i in np.argsort(-posterior, kind="stable")[:3]]
        return top[0] == gold, gold in top

    results = {}
    for seed in args.seeds:
        sample = sample_cases(pool, args.size, seed)
        assert held_out.isdisjoint(case.id for case in sample)
        hits = {"text": [], "gold_present": [], "gold_closed": []}
        for case in sample:
            own = consultant.leaving_out(case.id)
            differential, record = own.differential, records[case.id]
            asked = differential.experience.asked
            codes = {part for code in record.codes["evidence"] for part in (code, code.split("_@_")[0])}
            present = {by_id[f"ddxplus:{c}"]: True for c in codes if f"ddxplus:{c}" in by_id}
            present = {concept: True for concept in present if concept in asked}
            closed = {concept: concept in present for concept in asked}
            gold = record.structured["diagnosis"]
            state = own.start(case.patient.initial_presentation)
            said, sex = state.known(), state.findings.sex
            for name, known in (("text", said), ("gold_present", present), ("gold_closed", closed)):
                hits[name].append(ranks(differential.posterior(known, sex), gold))
        results[str(seed)] = {
            name: {"gtpa@1": round(float(np.mean([h[0] for h in rows])), 4),
                   "gtpa@3": round(float(np.mean([h[1] for h in rows])), 4)}
            for name, rows in hits.items()
        }  # fmt: skip
    print(json.dumps({"benchmark": "dev_consult_text", "size": args.size, "dev": results}))


if __name__ == "__main__":
    main()
