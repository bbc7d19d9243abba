"""The consultation in English, French and Chinese, side by side in one run (one JSON line):

(i) Lay presentations of the 49 DDXPlus conditions in each language's own words, written apart from the code
    by writers who never saw it: English (ddxplus_lay_dev.jsonl, 49), French and Chinese
    (ddxplus_lay_{fr,zh}_{tune,report}.jsonl, 35 + 35 each; rules were written looking at the tuning halves
    only, the report halves are reported and never tuned on). GTPA@1/3, abstentions and findings read per
    case on the default knowledge, and each language's GTPA@1 as a ratio of English's.
(ii) A closed-world check on DDXPlus's own French: DDXPlus patients (`--limit`, `--seed`) in the first
    person from the dataset's French (`question_fr` rewritten as a statement by
    data/ddxplus_first_person_fr.json, with `value_meaning`'s "fr") beside the same patients as
    `ddxplus-text` renders them in English, both answered by the default knowledge: GTPA@1/3 of each, and
    French's as a ratio of English's. These patients were generated from the DDXPlus table the default
    knowledge includes: a check of reading, not of diagnosis in the open world; the English rendering is
    the product's, finer than this French one.

    .venv/bin/python benchmarks/bench_languages.py --data ../shared/data
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
from pathlib import Path

from clinrag.core.models import Answer, Case, PatientProfile
from clinrag.core.settings import Settings
from clinrag.eval.datasets import load_dataset
from clinrag.eval.metrics import AnswerSpace, gold_rank
from clinrag.eval.sampling import sample_cases
from clinrag.methods.base import MethodContext
from clinrag.methods.consult import ConsultConfig, ConsultMethod, build
from clinrag.patients.loaders import EvidenceDecoder

CONSULT_DATA = Path(__file__).parents[1] / "tests" / "data" / "consult"
LAY_SETS = {
    "en": ["ddxplus_lay_dev.jsonl"],
    "fr_tune": ["ddxplus_lay_fr_tune.jsonl"],
    "fr_report": ["ddxplus_lay_fr_report.jsonl"],
    "zh_tune": ["ddxplus_lay_zh_tune.jsonl"],
    "zh_report": ["ddxplus_lay_zh_report.jsonl"],
}
# DDXPlus's French questions as the patient's statements ("Avez-vous de la fièvre ?" → "J'ai de la fièvre"),
# ordered rewrites {pattern, replacement}: the closed-world check's rendering, not the product's
FIRST_PERSON_FR = Path(__file__).parent / "data" / "ddxplus_first_person_fr.json"
SEX_FR = {"male": "Je suis un homme de {age} ans.", "female": "Je suis une femme de {age} ans."}


def answered(method: ConsultMethod, case: Case) -> tuple[Answer, int]:
    """The answer to `case` and the gold diagnosis's place in its differential (11: not in the top 10)."""
    answer = method.answer(case)
    ddx = answer.result.ddx if answer.result else []
    return answer, gold_rank(
        ddx, case.gold.answer, AnswerSpace({}), case.gold.answers, case.meta.get("icd10")
    )


def summary(results: list[tuple[Answer, int]]) -> dict[str, float]:
    """GTPA@1/3, abstentions and findings read per case of `answered` results."""
    n = len(results)
    return {
        "cases": n,
        "gtpa@1": round(sum(rank <= 1 for _, rank in results) / n, 4),
        "gtpa@3": round(sum(rank <= 3 for _, rank in results) / n, 4),
        "abstained": sum(bool(answer.details.get("abstained")) for answer, _ in results),
        "findings_per_case": round(sum(len(a.details.get("findings", [])) for a, _ in results) / n, 2),
    }


def scored(method: ConsultMethod, cases: list[Case]) -> dict[str, float]:
    return summary([answered(method, case) for case in cases])


def in_french(case: Case, evidences: dict, rewrites: list[tuple[re.Pattern[str], str]]) -> Case:
    """The DDXPlus patient in the first person, from the dataset's French: each evidence they have as its
    question rewritten as a statement, with the French meaning of its values (a number on a scale: left
    out)."""
    demographics = case.patient.demographics
    lines = [SEX_FR.get(demographics.sex, "").format(age=demographics.age)]
    for name, chosen in EvidenceDecoder.values_by_evidence(case.patient.codes["evidence"]).items():
        entry = evidences[name]
        meanings = entry.get("value_meaning") or {}
        if chosen and not any(v in meanings for v in chosen):
            continue
        statement = entry["question_fr"].strip()
        for pattern, replacement in rewrites:
            statement = pattern.sub(replacement, statement)
        values = [meanings[v]["fr"] for v in sorted(chosen) if v in meanings]
        lines.append(f"{statement} : {', '.join(values)}." if values else f"{statement}.")
    text = " ".join(lines)
    return case.model_copy(
        update={
            "language": "fr",
            "question": text,
            "patient": PatientProfile(initial_presentation=text, demographics=demographics),
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    folder = (args.data / "ddxplus").resolve()
    evidences = json.loads((folder / "release_evidences.json").read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory() as scratch:
        method = build(MethodContext(settings=Settings(home=Path(scratch))), ConsultConfig())
        lay = {
            name: scored(
                method, [c for f in files for c in load_dataset("text-cases", CONSULT_DATA / f).cases]
            )
            for name, files in LAY_SETS.items()
        }
        rewrites = [
            (re.compile(r["pattern"]), r["replacement"])
            for r in json.loads(FIRST_PERSON_FR.read_text("utf-8"))
        ]
        coded = {c.id: c for c in load_dataset("ddxplus", folder).cases}
        english = sample_cases(load_dataset("ddxplus-text", folder).cases, args.limit, args.seed)
        ddxplus = {
            "en": scored(method, english),
            "fr": scored(method, [in_french(coded[case.id], evidences, rewrites) for case in english]),
        }
    figures = {f"lay_{name}_{key}": value for name, scores in lay.items() for key, value in scores.items()}
    for name in ("fr_report", "zh_report"):
        figures[f"lay_{name}_vs_en_gtpa@1"] = round(lay[name]["gtpa@1"] / lay["en"]["gtpa@1"], 3)
    figures |= {
        f"ddxplus_{lang}_{key}": value for lang, scores in ddxplus.items() for key, value in scores.items()
    }
    figures["ddxplus_fr_vs_en_gtpa@1"] = round(ddxplus["fr"]["gtpa@1"] / ddxplus["en"]["gtpa@1"], 3)
    print(json.dumps({"benchmark": "consult_languages", "knowledge": "default", **figures}))


if __name__ == "__main__":
    main()
