"""Measure the share of a condition's listed yes/no symptoms that a DDXPlus patient shows: the value the
DDXPlus importer declares as its `SourceTraits.listed_share`.

DDXPlus's generator gives each patient a draw from its condition's symptoms; the release states no
probabilities (every entry is empty), so the consultation needs a share for a listed finding. Whether it is
one share whatever the list's length (a constant share) or one count spread over the list (a plain list's
`spectrum` / its length) is read off the patients: the script prints, per list length, the mean count and
the mean share, and the overall mean share.

Only development patients are read: the evaluation samples of `benchmarks/bench_consult.py` (`--limit 200`
at `--seed 0`) and of `benchmarks/tune_experience.py` (seeds 0 and 7) are reproduced with `sample_cases` and
left out. Prints one JSON line.

    .venv/bin/python benchmarks/measure_ddxplus_share.py --data ../shared/data/ddxplus
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path

from clinrag.core.files import read_json
from clinrag.eval.datasets import load_dataset
from clinrag.eval.sampling import sample_cases

EVAL_LIMIT, EVAL_SEEDS = 200, (0, 7)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="the DDXPlus folder")
    args = parser.parse_args()
    conditions = read_json(args.data / "release_conditions.json")
    evidences = read_json(args.data / "release_evidences.json")
    cases = load_dataset("ddxplus", args.data).cases
    held_out = {case.id for seed in EVAL_SEEDS for case in sample_cases(cases, EVAL_LIMIT, seed)}
    by_name = {c["condition_name"]: c for c in conditions.values()}
    by_name.update({c["cond-name-eng"]: c for c in conditions.values() if c.get("cond-name-eng")})
    by_length: dict[int, list[tuple[int, float]]] = defaultdict(list)
    shares = []
    for case in cases:
        if case.id in held_out or case.gold is None or case.patient is None:
            continue
        condition = by_name[case.gold.answer]
        listed = [e for e in condition["symptoms"] if evidences[e]["data_type"] == "B"]
        shown = {code.split("_@_")[0] for code in case.patient.codes.get("evidence", [])}
        count = sum(e in shown for e in listed)
        by_length[len(listed)].append((count, count / len(listed)))
        shares.append(count / len(listed))
    rows = {
        length: {
            "patients": len(found),
            "mean_count": round(statistics.mean(c for c, _ in found), 2),
            "mean_share": round(statistics.mean(s for _, s in found), 3),
        }
        for length, found in sorted(by_length.items())
    }
    print(
        json.dumps(
            {
                "development_patients": len(shares),
                "held_out": len(held_out),
                "listed_share": round(statistics.mean(shares), 3),
                "by_list_length": rows,
            }
        )
    )


if __name__ == "__main__":
    main()
