"""The consultation on free-text presentations, case by case (development only): GTPA@1/3, abstentions and
findings read per case as one JSON line, and with `--show` every case the leading diagnosis misses, with the
findings the consultation read (present +, absent -) and its top three, so a reader sees what was not
understood. Run it on the tuning halves only (`*_tune.jsonl`); the report halves are for `bench_consult.py`.

    .venv/bin/python benchmarks/dev_lay_text.py tests/data/consult/ddxplus_lay_fr_tune.jsonl --show
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from bench_languages import answered, summary  # run as a script: benchmarks/ is on the path
from clinrag.core.settings import Settings
from clinrag.eval.datasets import load_dataset
from clinrag.methods.base import MethodContext
from clinrag.methods.consult import ConsultConfig, build


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", type=Path, nargs="+", help="text-cases JSONL files")
    parser.add_argument("--show", action="store_true", help="print every case the leading diagnosis misses")
    parser.add_argument("--home", type=Path, default=None, help="CLINRAG_HOME to reuse compiled knowledge")
    parser.add_argument("--param", action="append", default=[], help="a consult parameter, NAME=VALUE")
    args = parser.parse_args()
    home = args.home or Path(tempfile.mkdtemp(prefix="clinrag-dev-"))
    method = build(
        MethodContext(settings=Settings(home=home)),
        ConsultConfig.from_params(dict(p.split("=", 1) for p in args.param)),
    )
    results = []
    for path in args.cases:
        for case in load_dataset("text-cases", path).cases:
            answer, rank = answered(method, case)
            results.append((answer, rank))
            if args.show and rank > 1:
                findings = answer.details.get("findings", [])
                marks = [("+" if f["status"] == "present" else "-") + f["name"] for f in findings]
                print(f"\n[{case.id}] gold {case.gold.answer} at {rank if rank <= 10 else '>10'}")
                print("  text:", case.question)
                print("  read:", ", ".join(marks) or "nothing")
                ddx = answer.result.ddx if answer.result else []
                print("  top3:", [f"{d.name} {d.probability:.2f}" for d in ddx[:3]])
    print(json.dumps(summary(results)))


if __name__ == "__main__":
    main()
