"""EXPRAG on the SYNTHETIC DischargeQA tasks, and its retrieval at scale (one JSON line).

(i) Experience alone, every case of the cohort: `exprag llm=false` (the similar patients' label vote) with
    the EHR ranker (weighted Jaccard over coded fields) vs the text ranker (BM25 over the narratives), and
    `knn-vote`. The base is the whole cohort: each method leaves the case's own record out itself, and the
    run counts any case whose own record was retrieved (`own_record_retrieved`, must be 0).
(ii) With the embedded model (SmolLM2-135M) on a seeded sample of cases, the rest of the cohort being the
    patient base (as `clinrag eval run` does): `exprag` (EHR ranker), `exprag ranker=text`,
    `exprag ranker=none`, `direct` and `knn-vote` on the diagnosis (accuracy), medication (exact-set
    accuracy, F1) and instruction (accuracy) tasks, and on the instructions asked as free text (the options
    removed: ROUGE-L, BLEU-4, METEOR; knn-vote's text is its most voted label; `exprag_written` is
    `exprag prior=false`, the model writing from the passages, where `exprag` adopts the similar patients'
    outcome the model and their vote favour). Seconds per case, and each method's time as a ratio to
    `direct`'s.
Each metric is [mean, 95 % CI low, high] (`clinrag.eval.stats.mean_ci`: Wilson for 0/1 scores, bootstrap
otherwise); EHR vs text ranker is paired case by case (bootstrap CI of the difference, and the exact McNemar
test on the discordant cases for 0/1 scores), and `ehr_vs_text_rel` is the mean over the three tasks of
EHR / text − 1 on the task's main metric (accuracy, F1, accuracy), the paper's "average relative
improvement".
(iii) Retrieval latency, coarse (ranker) + fine (BM25 passages of the top patients' reports), at 100k and 1M
    patients: coded sets drawn as in bench_jaccard (Zipf over vocabularies sized like ICD-10-CM, drugs and
    ICD-10-PCS) and given to the ranker pre-encoded; the reports read are those of a pool of synthetic
    patients (row i has pool report i mod pool size). p50 ms per query, the 1M / 100k ratio and the share
    of the fine stage.

    python benchmarks/bench_exprag.py --cases 10 --text-cases 5 --queries 100   # about 12 min on 2 cores
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import numpy as np
from scipy.stats import binomtest

from bench_jaccard import FIELDS, cohort
from clinrag.core.models import Answer, Case, Gold, PatientProfile
from clinrag.core.settings import Settings
from clinrag.eval.datasets import Dataset, load_dataset
from clinrag.eval.metrics import score_case
from clinrag.eval.sampling import sample_cases
from clinrag.eval.stats import mean_ci, paired
from clinrag.eval.text_metrics import text_scores
from clinrag.llm.factory import build_chat_model
from clinrag.methods.base import MethodContext
from clinrag.methods.exprag import CodedRanker, ExperienceRetriever, ExpRAGConfig
from clinrag.methods.registry import get_method
from clinrag.patients.ranker import CodedSetRanker
from clinrag.patients.record import PatientRecord
from clinrag.patients.synthetic import generate_cohort

TASKS = ("diagnosis", "medication", "instruction")
MAIN = {"diagnosis": "accuracy", "medication": "f1", "instruction": "accuracy"}
REPORTED = {
    "diagnosis": ("accuracy",),
    "medication": ("exact_set", "f1"),
    "instruction": ("accuracy",),
    "instruction_text": ("rouge_l", "bleu4", "meteor"),
}
EXPERIENCE_ONLY = {
    "exprag": ("exprag", {"llm": False}),
    "exprag_text": ("exprag", {"llm": False, "ranker": "text"}),
    "knn_vote": ("knn-vote", {}),
}
WITH_MODEL = {
    "exprag": ("exprag", {}),
    "exprag_text": ("exprag", {"ranker": "text"}),
    "exprag_none": ("exprag", {"ranker": "none"}),
    "direct": ("direct", {}),
    "knn_vote": ("knn-vote", {}),
}
WITH_MODEL_TEXT = {**WITH_MODEL, "exprag_written": ("exprag", {"prior": False})}


def ci(values: list[float]) -> list[float]:
    return [round(v, 4) for v in mean_ci(values)]


def mcnemar_p(a: list[float], b: list[float]) -> float:
    """Exact McNemar test: the cases only A got right against those only B got right."""
    only_a = sum(x > y for x, y in zip(a, b, strict=True))
    only_b = sum(y > x for x, y in zip(a, b, strict=True))
    return float(binomtest(only_a, only_a + only_b, 0.5).pvalue) if only_a + only_b else 1.0


def comparison(a: list[float], b: list[float]) -> dict[str, object]:
    stats = paired(a, b)
    result: dict[str, object] = {
        "diff": round(stats.mean_diff, 4),
        "diff_ci": [round(stats.diff_ci_low, 4), round(stats.diff_ci_high, 4)],
        "wins_ties_losses": [stats.wins, stats.ties, stats.losses],
    }
    if set(a) | set(b) <= {0.0, 1.0}:
        result["mcnemar_p"] = round(mcnemar_p(a, b), 4)
    else:
        result["paired_t_p"] = round(stats.p_value, 4)
    return result


def as_free_text(case: Case) -> Case:
    """The instruction question without its options: the model writes the instructions."""
    return Case(
        id=case.id,
        task="free_text",
        question=case.question,
        patient=case.patient,
        gold=Gold(answer=case.gold.answer),
        meta=case.meta,
    )


def case_scores(case: Case, answer: Answer, method: str) -> dict[str, float]:
    if case.task != "free_text":
        return score_case(case, answer)[0]
    text = answer.text
    if method == "knn_vote":
        text = answer.result.ddx[0].name if answer.result.ddx else ""
    return text_scores(text, case.gold.answer)


def evaluate(
    methods: dict[str, tuple[str, dict]],
    dataset: Dataset,
    cases: list[Case],
    experience: list[PatientRecord],
    settings: Settings,
    model=None,
) -> tuple[dict[str, dict[str, list[float]]], dict[str, float], int]:
    """Per method: metric → per-case values (in case order); seconds per case; cases whose own record was
    among the method's evidence."""
    scores: dict[str, dict[str, list[float]]] = {}
    seconds: dict[str, float] = {}
    leaks = 0
    for label, (name, params) in methods.items():
        context = MethodContext(
            settings=settings,
            params=params,
            experience=experience,
            labels=dataset.labels,
            chat_model_factory=(lambda _: model) if model is not None else None,
        )
        method = get_method(name).build(context)
        values: dict[str, list[float]] = {}
        started = time.perf_counter()
        for case in cases:
            answer = method.answer(case)
            leaks += any(case.id in (item.id, item.source) for item in answer.evidence)
            for metric, value in case_scores(case, answer, label).items():
                values.setdefault(metric, []).append(value)
        seconds[label] = (time.perf_counter() - started) / len(cases)
        scores[label] = values
    return scores, seconds, leaks


def summary(scores: dict[str, dict[str, dict[str, list[float]]]]) -> dict[str, object]:
    """Metrics with CIs per task and method; EHR vs text ranker, paired, per task and on average."""
    out: dict[str, object] = {}
    relative = []
    for task, by_method in scores.items():
        out[task] = {
            label: {metric: ci(values[metric]) for metric in REPORTED[task]}
            for label, values in by_method.items()
        }
        main = MAIN.get(task, "rouge_l")
        ehr, text = by_method["exprag"][main], by_method["exprag_text"][main]
        out[task]["ehr_vs_text"] = {"metric": main, **comparison(ehr, text)}
        if task in MAIN and statistics.mean(text) > 0:
            relative.append(statistics.mean(ehr) / statistics.mean(text) - 1)
    out["ehr_vs_text_rel"] = round(statistics.mean(relative), 4)
    return out


# --- (iii) retrieval at scale -------------------------------------------------------------------------------


class PooledReports(Mapping[str, PatientRecord]):
    """Row i's record is pool record i mod len(pool), under the row's id: reports without 1M records."""

    def __init__(self, pool: list[PatientRecord], n: int) -> None:
        self.pool, self.n = pool, n

    def __getitem__(self, pid: str) -> PatientRecord:
        return self.pool[int(pid[1:]) % len(self.pool)].model_copy(update={"id": pid})

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[str]:
        return (f"p{i}" for i in range(self.n))


def latency(sizes: list[int], queries: int, pool: int, template: Case, seed: int) -> dict[str, object]:
    rng = np.random.default_rng(seed)
    data = cohort(rng, max(sizes))
    query_data = cohort(rng, queries)
    names = {f: [f"c{i}" for i in range(size)] for f, size in FIELDS.items()}
    cases = [
        template.model_copy(
            update={
                "id": f"q{q}",
                "patient": PatientProfile(
                    initial_presentation=template.patient.initial_presentation,
                    codes={
                        f: [names[f][c] for c in codes[ip[q] : ip[q + 1]]]
                        for f, (ip, codes) in query_data.items()
                    },
                ),
            }
        )
        for q in range(queries)
    ]
    reports = generate_cohort(pool, seed=seed + 1)
    config = ExpRAGConfig(llm=False)
    result: dict[str, object] = {"k_patients": config.k_patients, "k_passages": config.k_passages}
    for n in sorted(sizes):
        encoded = {f: (names[f], indptr[: n + 1], codes[: indptr[n]]) for f, (indptr, codes) in data.items()}
        started = time.perf_counter()
        ranker = CodedRanker(CodedSetRanker.from_codes([f"p{i}" for i in range(n)], encoded))
        build_s = time.perf_counter() - started
        retriever = ExperienceRetriever(PooledReports(reports, n), ranker, config)
        coarse_ms, total_ms = [], []
        for case in cases:
            started = time.perf_counter()
            ranker.rank(case, config.k_patients)
            coarse_ms.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            experience = retriever.retrieve(case)
            total_ms.append((time.perf_counter() - started) * 1000)
            assert len(experience.passages) == config.k_passages
        coarse, total = statistics.median(coarse_ms), statistics.median(total_ms)
        result[str(n)] = {
            "build_s": round(build_s, 1),
            "coarse_p50_ms": round(coarse, 2),
            "total_p50_ms": round(total, 2),
            "total_p95_ms": round(float(np.percentile(total_ms, 95)), 2),
            "fine_share": round(1 - coarse / total, 3),
        }
        del ranker, retriever
    small, large = (result[str(n)]["total_p50_ms"] for n in (min(sizes), max(sizes)))
    result["largest_vs_smallest_p50"] = round(large / small, 2)
    return result


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cohort", default="synthetic:300:0", help="DischargeQA generator spec")
    parser.add_argument("--cases", type=int, default=10, help="cases per task answered with the model")
    parser.add_argument("--text-cases", type=int, default=5, help="instruction cases asked as free text")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sizes", default="100000,1000000", help="patient-base sizes for the latency")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--pool", type=int, default=1000, help="synthetic reports behind the large bases")
    args = parser.parse_args()

    datasets = {task: load_dataset(f"dischargeqa-{task}", args.cohort) for task in TASKS}
    wall: dict[str, float] = {}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch:
        settings = Settings(home=Path(scratch) / "home")  # an empty LLM cache: every call is made

        # (i) experience alone, every case, leave-one-out.
        alone, leaks = {}, 0
        for task, dataset in datasets.items():
            alone[task], _, leaked = evaluate(
                EXPERIENCE_ONLY, dataset, dataset.cases, dataset.records, settings
            )
            leaks += leaked
        wall["experience_only"] = time.perf_counter() - started

        # (ii) with the model, a sample per task (the same patients in every task), leave-sample-out.
        started = time.perf_counter()
        model = build_chat_model(settings)
        with_model, seconds = {}, {}
        for task, dataset in datasets.items():
            cases = sample_cases(dataset.cases, args.cases, args.seed)
            experience = dataset.experience([case.id for case in cases])
            with_model[task], seconds[task], leaked = evaluate(
                WITH_MODEL, dataset, cases, experience, settings, model
            )
            leaks += leaked
        instruction = datasets["instruction"]
        text_cases = sample_cases(instruction.cases, args.text_cases, args.seed)
        with_model["instruction_text"], seconds["instruction_text"], leaked = evaluate(
            WITH_MODEL_TEXT,
            instruction,
            [as_free_text(case) for case in text_cases],
            instruction.experience([case.id for case in text_cases]),
            settings,
            model,
        )
        leaks += leaked
    model_name = getattr(model, "model", "?")
    del model
    wall["with_model"] = time.perf_counter() - started

    # (iii) latency at scale.
    sizes = [int(size) for size in args.sizes.split(",")]
    started = time.perf_counter()
    scale = latency(sizes, args.queries, args.pool, datasets["diagnosis"].cases[0], args.seed)
    wall["latency"] = time.perf_counter() - started

    per_case = {
        label: round(statistics.mean(by_task[label] for by_task in seconds.values()), 2)
        for label in WITH_MODEL
    }
    print(
        json.dumps(
            {
                "benchmark": "exprag",
                "synthetic": True,
                "cohort": args.cohort,
                "own_record_retrieved": leaks,
                "experience_only": {"cases_per_task": len(datasets["diagnosis"].cases), **summary(alone)},
                "with_model": {
                    "model": model_name,
                    "cases_per_task": args.cases,
                    "text_cases": args.text_cases,
                    "seed": args.seed,
                    **summary(with_model),
                    "s_per_case": per_case,
                    "time_vs_direct": {
                        label: round(per_case[label] / per_case["direct"], 2) for label in WITH_MODEL
                    },
                },
                "latency": {"queries": args.queries, **scale},
                "peak_rss_mb": round(peak_rss_mb()),
                "wall_s": {part: round(s) for part, s in wall.items()},
            }
        )
    )


if __name__ == "__main__":
    main()
