"""Embedded runtimes side by side: the prebuilt `cyllama` wheel vs llama-cpp-python built from source.

Same packaged model, same MedQA questions, same settings, one process; the two runtimes take turns question
by question, each going first on alternate questions, so that load from other work on the machine falls on
both alike. Prints one JSON line: each speed figure is a ratio wheel / source measured in this run (tokens per
second: > 1 is faster; latency and load time: < 1 is faster), next to whether the greedy texts,
grammar-constrained JSON and option log-likelihoods of the two are equal.

    python benchmarks/bench_embedded_runtime.py --data ../shared/data/medqa/us_4options_test.jsonl --limit 20
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
from pathlib import Path

from clinrag.llm.base import ChatModel, ChatRequest
from clinrag.llm.embedded import EmbeddedLlama
from clinrag.llm.embedded_wheel import EmbeddedLlamaWheel
from clinrag.llm.structured import choice_request


def load_questions(path: Path, limit: int, seed: int) -> list[tuple[str, list[str]]]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    chosen = random.Random(seed).sample(rows, min(limit, len(rows)))
    return [
        (
            row["question"] + "\n" + "\n".join(f"{key}. {text}" for key, text in row["options"].items()),
            list(row["options"].values()),
        )
        for row in chosen
    ]


def timed(call, *args, **kwargs):
    started = time.perf_counter()
    result = call(*args, **kwargs)
    return result, time.perf_counter() - started


def run(models: dict[str, ChatModel], questions: list[tuple[str, list[str]]], max_tokens: int) -> dict:
    seconds = {name: {"generate": 0.0, "score": 0.0} for name in models}
    tokens = dict.fromkeys(models, 0)
    score_latency: dict[str, list[float]] = {name: [] for name in models}
    equal = {"greedy_text": 0, "json_text": 0, "option_scores": 0}
    max_diff = 0.0
    for index, (question, options) in enumerate(questions):
        free = ChatRequest.of(question + "\nExplain briefly, then answer.", max_tokens=max_tokens)
        constrained = choice_request(ChatRequest.of(question, max_tokens=32), options)
        out: dict[str, dict] = {}
        order = list(models) if index % 2 == 0 else list(reversed(models))  # neither always runs first
        for name in order:
            model = models[name]
            completion, spent = timed(model.complete, free)
            seconds[name]["generate"] += spent
            tokens[name] += completion.usage.completion_tokens
            structured = model.complete(constrained)
            scores, spent = timed(model.score_options, ChatRequest.of(question), options)
            seconds[name]["score"] += spent
            score_latency[name].append(spent)
            out[name] = {"text": completion.text, "json": structured.text, "logprobs": scores.logprobs}
        wheel, source = out["wheel"], out["source"]
        equal["greedy_text"] += wheel["text"] == source["text"]
        equal["json_text"] += wheel["json"] == source["json"]
        equal["option_scores"] += wheel["logprobs"] == source["logprobs"]
        max_diff = max(
            max_diff, *(abs(a - b) for a, b in zip(wheel["logprobs"], source["logprobs"], strict=True))
        )
    tokens_per_s = {name: tokens[name] / seconds[name]["generate"] for name in models}
    return {
        "questions": len(questions),
        "ratio_tokens_per_s": round(tokens_per_s["wheel"] / tokens_per_s["source"], 3),
        "ratio_option_scoring_latency": round(seconds["wheel"]["score"] / seconds["source"]["score"], 3),
        "ratio_option_scoring_latency_median": round(
            statistics.median(score_latency["wheel"]) / statistics.median(score_latency["source"]), 3
        ),
        "equal_greedy_text": f"{equal['greedy_text']}/{len(questions)}",
        "equal_json_text": f"{equal['json_text']}/{len(questions)}",
        "equal_option_scores": f"{equal['option_scores']}/{len(questions)}",
        "max_abs_logprob_diff": max_diff,
        "completion_tokens": tokens,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data/medqa/us_4options_test.jsonl"))
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    settings = {"n_ctx": 4096, "n_threads": args.threads}
    source, source_load_s = timed(EmbeddedLlama, **settings)
    wheel, wheel_load_s = timed(EmbeddedLlamaWheel, **settings)
    models: dict[str, ChatModel] = {"source": source, "wheel": wheel}
    result = run(models, load_questions(args.data, args.limit, args.seed), args.max_tokens)
    result["ratio_load_time"] = round(wheel_load_s / source_load_s, 3)
    result["threads"] = args.threads
    result["load_average_1min"] = round(os.getloadavg()[0], 2)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
