"""Parity of the production path with the embedded runtime: the packaged SmolLM2 GGUF served by llama.cpp's
OpenAI-compatible server (llama-cpp-python's `server` extra, on loopback) against the same GGUF run
in-process by llama-cpp-python. Prints one JSON line with, per dataset (MedQA questions scored as answer
letters, DDXPlus cases scored as the 49 pathology names, as the `direct` method asks them):

- `echo` mode on the first `--echo-*` cases: the share of identical rankings and of identical top-1 choices,
  and the maximum |Δ log-probability| in nats (the target is top-1 identical everywhere and |Δ| ≤ 1e-3);
- `ranking` mode (rank rule) on every case: the share of top-1 choices equal to the embedded one and the mean
  Spearman correlation of the option probabilities with the embedded ones;
- the `auto` mode the probe chose, and the probe's findings;
- eval throughput of `direct` on MedQA against the one server at CLINRAG_LLM_CONCURRENCY 1 and 4, as cases
  per second and their ratio (llama-cpp-python's server answers one request at a time: it has no slots).

The world is closed in one respect only: both sides run the same weights, so the figures measure the path,
not accuracy. The cases are the first of each dataset's seeded sample (seed 0), from `--data`.

    python benchmarks/bench_server_parity.py --data ../shared/data [--medqa 50] [--ddxplus 50]
        [--echo-medqa 10] [--echo-ddxplus 2] [--throughput-cases 20]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

from scipy.stats import spearmanr

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/llama_server.py starts the server

from tests.llama_server import LlamaServer

from clinrag.core.models import Case
from clinrag.core.settings import Settings
from clinrag.eval.datasets import load_dataset
from clinrag.eval.runner import EvalRunner, RunRequest
from clinrag.eval.sampling import sample_cases
from clinrag.llm.base import ChatModel, ChatRequest, OptionScores
from clinrag.llm.embedded import EmbeddedLlama
from clinrag.llm.openai_compat import from_settings
from clinrag.methods.answering import by_letter
from clinrag.tasks.templates import get_task_prompt, task_prompt


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="the shared data folder")
    parser.add_argument("--medqa", type=int, default=50)
    parser.add_argument("--ddxplus", type=int, default=50)
    parser.add_argument("--echo-medqa", type=int, default=10, help="MedQA questions also scored by echo")
    parser.add_argument("--echo-ddxplus", type=int, default=2, help="DDXPlus cases also scored by echo")
    parser.add_argument("--throughput-cases", type=int, default=20)
    return parser.parse_args()


def scored_request(case: Case) -> tuple[ChatRequest, list[str], str]:
    """The request, the scored replies and their normalisation, as the `direct` method scores a case."""
    asked = get_task_prompt("diagnosis", case.language) if case.task == "ddx" else task_prompt(case)
    request = ChatRequest.of(asked.render(case), max_tokens=8, temperature=0.0)
    if by_letter(case):
        return request, list(case.options), "sum"
    return request, list(case.options.values()), "mean"


def ranking_of(scores: OptionScores, normalisation: str) -> list[int]:
    values = scores.normalized(normalisation)
    return sorted(range(len(values)), key=lambda i: -values[i])


def compare(
    cases: list[Case], served: ChatModel, embedded: ChatModel, echo_cases: int, echo: ChatModel
) -> dict[str, object]:
    same_echo_rank = same_echo_top = 0
    max_delta = 0.0
    ranking_top, correlations = 0, []
    for index, case in enumerate(cases):
        request, targets, normalisation = scored_request(case)
        reference = embedded.score_options(request, targets)
        reference_order = ranking_of(reference, normalisation)
        if index < echo_cases:
            echoed = echo.score_options(request, targets)
            order = ranking_of(echoed, normalisation)
            same_echo_rank += order == reference_order
            same_echo_top += order[0] == reference_order[0]
            deltas = [abs(a - b) for a, b in zip(echoed.logprobs, reference.logprobs, strict=True)]
            max_delta = max(max_delta, *deltas)
        ranked = served.score_options(request, targets)
        ranking_top += ranking_of(ranked, normalisation)[0] == reference_order[0]
        rho = spearmanr(ranked.probabilities(normalisation), reference.probabilities(normalisation)).statistic
        correlations.append(0.0 if math.isnan(rho) else float(rho))
    echoed_n = min(echo_cases, len(cases))
    return {
        "cases": len(cases),
        "echo_cases": echoed_n,
        "echo_identical_ranking": round(same_echo_rank / echoed_n, 3) if echoed_n else None,
        "echo_identical_top1": round(same_echo_top / echoed_n, 3) if echoed_n else None,
        "echo_max_abs_delta_nats": round(max_delta, 6) if echoed_n else None,
        "ranking_top1_as_embedded": round(ranking_top / len(cases), 3),
        "ranking_spearman_mean": round(sum(correlations) / len(correlations), 3),
    }


def throughput(settings: Settings, data: Path, cases: int, concurrency: int, out: Path) -> float:
    runner = EvalRunner(settings.model_copy(update={"llm_concurrency": concurrency}), progress=False)
    started = time.perf_counter()
    runner.run(
        RunRequest(
            dataset="medqa", method="direct", out=out, data_path=data / "medqa", limit=cases, concurrency=4
        )
    )
    return cases / (time.perf_counter() - started)


def main() -> None:
    args = parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="bench-server-parity-"))
    server = LlamaServer(scratch / "server.log")
    try:
        settings = Settings(
            home=scratch / "home",
            llm_backend="openai",
            llm_model=server.model,
            llm_base_url=server.base_url,
            llm_chat_template=server.model_path,
            cache_enabled=False,
        )
        auto = from_settings(settings)
        ranking = from_settings(settings.model_copy(update={"llm_scoring": "ranking"}))
        echo = from_settings(settings.model_copy(update={"llm_scoring": "echo"}))
        embedded = EmbeddedLlama(n_ctx=4096)
        medqa = sample_cases(load_dataset("medqa", args.data / "medqa").cases, args.medqa, 0)
        ddxplus = sample_cases(load_dataset("ddxplus", args.data / "ddxplus").cases, args.ddxplus, 0)
        result = {
            "benchmark": "server_parity",
            "server": "llama-cpp-python server (llama.cpp) on loopback, packaged SmolLM2-135M-Instruct Q4_1",
            "probe": auto.capabilities.model_dump(exclude={"probed_at"}),
            "auto_scoring": auto.scoring_name,
            "medqa": compare(medqa, ranking, embedded, args.echo_medqa, echo),
            "ddxplus": compare(ddxplus, ranking, embedded, args.echo_ddxplus, echo),
        }
        one = throughput(settings, args.data, args.throughput_cases, 1, scratch / "run-1")
        four = throughput(settings, args.data, args.throughput_cases, 4, scratch / "run-4")
        result["throughput_cases_per_s"] = {"concurrency_1": round(one, 3), "concurrency_4": round(four, 3)}
        result["throughput_ratio_4_to_1"] = round(four / one, 3)
        print(json.dumps(result))
    finally:
        server.close()


if __name__ == "__main__":
    main()
