"""Triage: where the consultation sends a person (emergency, urgent, soon, self-care), against the
disposition a clinician gave each vignette, beside the rule it replaced and Semigran et al.'s checkers.

The vignettes were written apart from the code, by writers who never read it, in English, French and Chinese
(adults, children, pregnancy, crises, vague texts): `tests/data/consult/triage_dev_*.jsonl` and the
dispositions of the open-world presentations `open_dev_*.jsonl`. The settings (`TriageSettings`) may be
chosen on the tuning half only (`--tune` searches them there); the report half is never tuned on. Each case
is read as the product reads it (`consult` with its default configuration, the case's stated age and sex
standing in where the text leaves them out). Prints one JSON line:

    .venv/bin/python benchmarks/bench_triage.py [--tune]

The baseline in the same run is the rule this replaced: the most urgent of the red flags raised and of the
dangerous diagnoses at 2 % or more, else a routine appointment (counted here as `soon`); it had no self-care.
"""

from __future__ import annotations

import argparse
import itertools
import json
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

from clinrag.consult.answer.report import ConsultationReport
from clinrag.consult.reason.triage import LEVELS, Triage, TriageSettings
from clinrag.consult.understand.crises import CrisisMention
from clinrag.core.settings import Settings
from clinrag.eval.datasets import load_dataset
from clinrag.methods.base import MethodContext
from clinrag.methods.consult import ConsultConfig, build

CONSULT_DATA = Path(__file__).parents[1] / "tests" / "data" / "consult"
SETS = {
    "tune": ["triage_dev_tune.jsonl", "open_dev_tune.jsonl"],
    "report": ["triage_dev_report.jsonl", "open_dev_report.jsonl", "open_dev_multilingual.jsonl"],
}
# Semigran HL, Linder JA, Gidengil C, Mehrotra A. Evaluation of symptom checkers for self diagnosis and
# triage: audit study. BMJ 2015;351:h3480 — 23 symptom checkers, 45 vignettes: appropriate triage advice
SEMIGRAN_2015 = {"appropriate": 0.57, "emergent": 0.80, "non_emergent": 0.55, "self_care": 0.33}
GRID = {
    "emergency_above": [0.2, 0.3, 0.4, 0.5, 0.6],
    "danger_above": [0.02, 0.03, 0.05, 0.1, 0.15, 0.2],
    "urgent_above": [0.2, 0.3, 0.4, 0.5, 0.6],
    "self_care_above": [0.3, 0.4, 0.5, 0.6],
}


@dataclass
class Read:
    """What the triage decides from, for one case, and the disposition the vignette gives."""

    gold: str
    language: str
    report: ConsultationReport
    understood: bool
    crises: list[CrisisMention]


def read_cases(method, names: list[str]) -> list[Read]:
    reads = []
    for name in names:
        for case in load_dataset("text-cases", CONSULT_DATA / name).cases:
            consultant, state = method.start(case)
            report, _ = consultant.report(state)
            understood = any(state.known().values())
            reads.append(
                Read(case.meta["disposition"], case.language, report, understood, state.findings.crises)
            )
    return reads


def decided(triage: Triage, read: Read) -> str:
    report = read.report
    return triage.decide(
        crises=read.crises,
        red_flags=[(f.urgency, f.finding, f.evidence) for f in report.red_flags],
        shares=report.triage.shares or None,
        understood=read.understood,
        abstained=report.abstained,
    ).disposition


def baseline(read: Read) -> str:
    raised = {item.urgency for item in [*read.report.red_flags, *read.report.dangers]}
    return next((level for level in ("emergency", "urgent") if level in raised), "soon")


def scores(pairs: list[tuple[str, str, Read]]) -> dict:
    """Exact, safe (not below the correct level), under- and over-triage, per correct level, and the
    confusion matrix (correct → told)."""
    n = len(pairs)
    rank = {level: i for i, level in enumerate(LEVELS)}  # 0: most urgent
    under = [p for p in pairs if rank[p[1]] > rank[p[0]]]
    by_gold = Counter(gold for gold, _, _ in pairs)
    exact_by = Counter(gold for gold, told, _ in pairs if gold == told)
    return {
        "n": n,
        "exact": round(sum(g == t for g, t, _ in pairs) / n, 4),
        "safe": round(1 - len(under) / n, 4),
        "under_triage": round(len(under) / n, 4),
        "over_triage": round(sum(rank[t] < rank[g] for g, t, _ in pairs) / n, 4),
        "emergencies_below_urgent": sum(g == "emergency" and rank[t] > rank["urgent"] for g, t, _ in pairs),
        "self_care_when_not_understood": sum(t == "self_care" and not r.understood for _, t, r in pairs),
        "exact_by_level": {
            level: round(exact_by[level] / by_gold[level], 4) for level in LEVELS if by_gold[level]
        },
        "confusion": {g: {t: sum(p[0] == g and p[1] == t for p in pairs) for t in LEVELS} for g in LEVELS},
    }


def evaluate(triage: Triage, reads: list[Read]) -> dict:
    return scores([(r.gold, decided(triage, r), r) for r in reads])


def tune(tables, reads: list[Read]) -> TriageSettings:
    """The grid's setting with the fewest emergencies told less than urgent on the tuning half, then the most
    exact, then the fewest under-triaged; ties: the first. (The fewest under-triaged first sends nearly
    everyone to be seen today: safe, and of no use to the person nor to the services.)"""
    best, best_key = TriageSettings(), None
    for values in itertools.product(*GRID.values()):
        settings = TriageSettings(**dict(zip(GRID, values, strict=True)))
        s = evaluate(Triage(tables, settings), reads)
        key = (s["emergencies_below_urgent"], -s["exact"], round(s["under_triage"] * s["n"]))
        if best_key is None or key < best_key:
            best, best_key = settings, key
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tune", action="store_true", help="search TriageSettings on the tuning half")
    args = parser.parse_args()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as home:
        context = MethodContext(settings=Settings(home=Path(home)))
        method = build(context, ConsultConfig())
        reads = {name: read_cases(method, files) for name, files in SETS.items()}
        tables = method.consultant.differential.clinical
        settings = tune(tables, reads["tune"]) if args.tune else method.consultant.triage.settings
        triage = Triage(tables, settings)
        out: dict = {"benchmark": "triage", "settings": asdict(settings), "semigran_2015": SEMIGRAN_2015}
        for name, cases in reads.items():
            out[name] = evaluate(triage, cases)
            out[f"{name}_baseline"] = scores([(r.gold, baseline(r), r) for r in cases])
            for language in sorted({r.language for r in cases}):
                out[f"{name}_{language}_exact"] = evaluate(
                    triage, [r for r in cases if r.language == language]
                )["exact"]
    out["seconds"] = round(time.perf_counter() - started, 1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
