"""Embedded default on MedQA-USMLE: option scoring by log-likelihood vs free generation + parsing.

Same questions, same prompt, same model; prints one JSON line. Accuracy figures carry Wilson 95 % intervals;
`ratio_*` compare each mode with the generation baseline measured in this run.

    python benchmarks/embedded_medqa.py --data ../shared/data/medqa/us_4options_test.jsonl --limit 100
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from pathlib import Path

from clinrag.core.errors import AnswerParseError
from clinrag.core.models import Case, Gold
from clinrag.core.settings import Settings
from clinrag.llm.base import ChatModel, ChatRequest
from clinrag.llm.embedded import from_settings
from clinrag.tasks.parsing import parse_choice
from clinrag.tasks.templates import task_prompt


def wilson(correct: int, total: int, z: float = 1.96) -> tuple[float, float]:
    p = correct / total
    centre = (p + z * z / (2 * total)) / (1 + z * z / total)
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / (1 + z * z / total)
    return round(centre - half, 3), round(centre + half, 3)


def load_cases(path: Path, limit: int, seed: int) -> list[Case]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    chosen = sorted(random.Random(seed).sample(range(len(rows)), min(limit, len(rows))))
    return [
        Case(
            id=f"medqa-{i}",
            task="multiple_choice",
            question=rows[i]["question"],
            options=rows[i]["options"],
            gold=Gold(answer=rows[i]["answer_idx"]),
        )
        for i in chosen
    ]


def render_prompt(case: Case) -> str:
    return task_prompt(case).render(case)


def _letters(model: ChatModel, case: Case) -> str:
    return list(case.options)[
        model.score_options(ChatRequest.of(render_prompt(case)), list(case.options)).best()
    ]


def _texts(mode: str):
    def choose(model: ChatModel, case: Case) -> str:
        scores = model.score_options(ChatRequest.of(render_prompt(case)), list(case.options.values()))
        return list(case.options)[scores.best(mode)]

    return choose


def _generate(model: ChatModel, case: Case) -> str:
    completion = model.complete(ChatRequest.of(render_prompt(case), max_tokens=48))
    return parse_choice(completion.text, case.options)


MODES = {
    "score_letters": _letters,
    "score_texts_sum": _texts("sum"),
    "score_texts_mean": _texts("mean"),
    "generate_parse": _generate,
}


def accuracy_by_mode(cases: list[Case], model: ChatModel) -> dict:
    """One pass over all questions per mode, so every mode pays for its own prompt evaluation."""
    results: dict[str, dict] = {}
    for mode, choose in MODES.items():
        correct = failures = 0
        started = time.perf_counter()
        for case in cases:
            try:
                correct += choose(model, case) == case.gold.answer
            except AnswerParseError:
                failures += 1
        results[mode] = {
            "accuracy": round(correct / len(cases), 3),
            "ci95": wilson(correct, len(cases)),
            "seconds_per_question": round((time.perf_counter() - started) / len(cases), 3),
            "unparseable": failures,
        }
    baseline = results["generate_parse"]
    for result in results.values():
        result["ratio_accuracy_vs_generate_parse"] = (
            round(result["accuracy"] / baseline["accuracy"], 3) if baseline["accuracy"] else None
        )
        result["ratio_time_vs_generate_parse"] = round(
            result["seconds_per_question"] / baseline["seconds_per_question"], 3
        )
    return results


def decode_speed(model: ChatModel, repeats: int = 3) -> float:
    """Completion tokens per second on a free-text clinical prompt (fresh prompt each time: no cache)."""
    tokens, seconds = 0, 0.0
    for i in range(repeats):
        completion = model.chat(
            f"Patient {i}: list the causes of chest pain and how to tell them apart.", max_tokens=200
        )
        tokens += completion.usage.completion_tokens
        seconds += completion.usage.wall_time_s
    return round(tokens / seconds, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_data = (
        Path(__file__).resolve().parents[2] / "shared" / "data" / "medqa" / "us_4options_test.jsonl"
    )
    parser.add_argument("--data", type=Path, default=default_data)
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--runtime", choices=["auto", "wheel", "source"], default="auto")
    args = parser.parse_args()

    cases = load_cases(args.data, args.limit, args.seed)
    model = from_settings(
        Settings(embedded_runtime=args.runtime, embedded_n_ctx=2048, embedded_n_threads=args.threads)
    )
    started = time.perf_counter()
    results = accuracy_by_mode(cases, model)
    print(
        json.dumps(
            {
                "benchmark": "embedded_medqa",
                "model": model.model,
                "runtime": type(model).__name__,
                "questions": len(cases),
                "seed": args.seed,
                "chance": 0.25,
                **results,
                "decode_tokens_per_second": decode_speed(model),
                "wall_s": round(time.perf_counter() - started, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
