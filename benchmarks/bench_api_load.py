"""Loopback load test of `clinrag serve`: `--requests` concurrent POST /v1/consult (DoctorRAG on the
embedded model, answers from the response cache after one warm-up request) against the baseline of the same
request sent one at a time, measured in the same run. Reports p50/p95 latency, errors and throughput, and
their ratios to the sequential baseline. Prints one JSON line.

    python benchmarks/bench_api_load.py --kb KB_DIR --patients-path ../shared/data/icraft_md/craft_md.jsonl
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

QUESTION = (
    "A 5-year-old boy has multiple dome-shaped skin-coloured papules with central umbilication on the chest "
    "and back. They are not itchy. What is it and what should we do?"
)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kb", type=Path, required=True, help="a built knowledge base")
    parser.add_argument("--patients-path", type=Path, required=True, help="iCraft-MD craft_md.jsonl")
    parser.add_argument("--requests", type=int, default=50, help="concurrent requests")
    parser.add_argument("--sequential", type=int, default=10, help="requests of the one-at-a-time baseline")
    return parser.parse_args()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_server(args: argparse.Namespace, port: int) -> subprocess.Popen:
    command = [
        sys.executable, "-m", "clinrag", "serve", "--port", str(port), "--kb", str(args.kb),
        "--patients-dataset", "icraft", "--patients-path", str(args.patients_path), "--log-level", "warning",
    ]  # fmt: skip
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=os.environ.copy())


def wait_ready(url: str, server: subprocess.Popen, timeout_s: float = 600) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"the server exited: {server.stderr.read().decode() if server.stderr else ''}")
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.5)
    raise SystemExit("the server did not become ready")


async def timed(client: httpx.AsyncClient, url: str) -> tuple[float, int]:
    body = {"method": "doctorrag", "text": QUESTION, "params": {"refine_iterations": 0}}
    started = time.perf_counter()
    response = await client.post(f"{url}/v1/consult", json=body, timeout=600)
    return time.perf_counter() - started, response.status_code


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def measure(url: str, args: argparse.Namespace) -> dict:
    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=args.requests)) as client:
        warm, status = await timed(client, url)
        if status != 200:
            raise SystemExit(f"the warm-up request failed with {status}")
        sequential = [await timed(client, url) for _ in range(args.sequential)]
        started = time.perf_counter()
        concurrent = await asyncio.gather(*(timed(client, url) for _ in range(args.requests)))
        wall = time.perf_counter() - started
    seq = [t for t, _ in sequential]
    conc = [t for t, _ in concurrent]
    p50_seq, p50, p95 = statistics.median(seq), percentile(conc, 0.5), percentile(conc, 0.95)
    return {
        "benchmark": "api_load",
        "requests": args.requests,
        "errors": sum(code != 200 for _, code in concurrent) + sum(code != 200 for _, code in sequential),
        "warmup_s": round(warm, 3),
        "sequential_p50_s": round(p50_seq, 4),
        "concurrent_p50_s": round(p50, 4),
        "concurrent_p95_s": round(p95, 4),
        "concurrent_wall_s": round(wall, 3),
        "throughput_rps": round(args.requests / wall, 2),
        "p50_ratio_vs_sequential": round(p50 / p50_seq, 2),
        "p95_ratio_vs_sequential": round(p95 / p50_seq, 2),
        "throughput_ratio_vs_sequential": round((args.requests / wall) * p50_seq, 2),
    }


def main() -> None:
    args = parse_args()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = start_server(args, port)
    try:
        wait_ready(url, server)
        print(json.dumps(asyncio.run(measure(url, args))))
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
