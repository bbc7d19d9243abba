"""Loopback isolation test of `clinrag serve` (the real server, a subprocess): what one client's traffic
costs the others. Prints one JSON line with

- the server's RSS before and after `--sessions` interactive consultations, each started with parameters no
  other session used (a distinct `mention_rate`), and its ratio to the RSS before;
- the p95 latency of default consultations (`POST /v1/consult`, the grounded consultation) sent one at a
  time, alone (the baseline), and again while another client keeps asking for `graph-infer` on a graph
  server that accepts connections and never answers (an allowed URI, so the request is served, not
  refused), and the ratio of the two.

The cases are the README's example and its variations: the world is the packaged knowledge, and the
figures are about the service, not about accuracy.

    python benchmarks/bench_api_isolation.py [--sessions 50] [--requests 30] [--timeout-s 10]

The server runs with the caller's CLINRAG_HOME (a fresh home first builds the packaged knowledge and
embeds the default patient base, a few minutes on two cores).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import time

import httpx
import psutil

from bench_api_load import free_port, percentile, wait_ready

EXAMPLE = (
    "I am 45 and have had a fever, a productive cough and pain on the right side of my chest when I breathe "
    "for three days."
)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=50, help="sessions, each with its own parameters")
    parser.add_argument("--requests", type=int, default=30, help="default consultations per measurement")
    parser.add_argument("--timeout-s", type=float, default=10.0, help="the server's per-request deadline")
    return parser.parse_args()


def start_server(port: int, silent_graph: str, timeout_s: float) -> subprocess.Popen:
    environment = {
        **os.environ,
        "CLINRAG_API_GRAPH_URIS": silent_graph,
        "CLINRAG_API_TIMEOUT_S": str(timeout_s),
    }
    command = [sys.executable, "-m", "clinrag", "serve", "--port", str(port), "--log-level", "warning"]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=environment)


async def consultations(client: httpx.AsyncClient, url: str, count: int) -> tuple[list[float], int]:
    """`count` default consultations one after another: their latencies and how many failed."""
    took, failed = [], 0
    for index in range(count):
        body = {"text": f"{EXAMPLE} (visit {index})"}
        started = time.perf_counter()
        response = await client.post(f"{url}/v1/consult", json=body, timeout=600)
        took.append(time.perf_counter() - started)
        failed += response.status_code != 200
    return took, failed


async def warm_up(client: httpx.AsyncClient, url: str, timeout_s: float = 900) -> None:
    """Ask until the default method answers: its first build outlasts the deadline (504), and goes on."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        response = await client.post(f"{url}/v1/consult", json={"text": EXAMPLE}, timeout=600)
        if response.status_code == 200:
            return
        if response.status_code != 504:
            raise SystemExit(f"the warm-up consultation failed: {response.status_code} {response.text}")
    raise SystemExit("the default method was not built in time")


async def hostile(client: httpx.AsyncClient, url: str, graph: str, stop: asyncio.Event) -> list[int]:
    """Ask for `graph-infer` on the silent graph, again and again, until told to stop."""
    statuses = []
    body = {"method": "graph-infer", "text": EXAMPLE, "task": "diagnosis", "params": {"graph": graph}}
    while not stop.is_set():
        response = await client.post(f"{url}/v1/consult", json=body, timeout=600)
        statuses.append(response.status_code)
    return statuses


async def measure(url: str, server: psutil.Process, graph: str, args: argparse.Namespace) -> dict:
    async with httpx.AsyncClient() as client:
        await warm_up(client, url)
        alone, failed_alone = await consultations(client, url, args.requests)
        stop = asyncio.Event()
        attacker = asyncio.create_task(hostile(client, url, graph, stop))
        await asyncio.sleep(0.5)
        beside, failed_beside = await consultations(client, url, args.requests)
        stop.set()
        hostile_statuses = await attacker
        rss_before = server.memory_info().rss
        refused = 0
        for index in range(args.sessions):
            body = {"text": EXAMPLE, "params": {"mention_rate": round(0.01 + index * 0.9 / args.sessions, 4)}}
            response = await client.post(f"{url}/v1/consult/sessions", json=body, timeout=600)
            refused += response.status_code != 201
        rss_after = server.memory_info().rss
    p95_alone, p95_beside = percentile(alone, 0.95), percentile(beside, 0.95)
    return {
        "benchmark": "api_isolation",
        "world": "service (the README example on the packaged knowledge)",
        "sessions": args.sessions,
        "sessions_failed": refused,
        "rss_before_mb": round(rss_before / 1e6, 1),
        "rss_after_mb": round(rss_after / 1e6, 1),
        "rss_growth_mb": round((rss_after - rss_before) / 1e6, 1),
        "rss_ratio_after_vs_before": round(rss_after / rss_before, 3),
        "requests": args.requests,
        "p95_alone_s": round(p95_alone, 4),
        "p95_beside_silent_graph_s": round(p95_beside, 4),
        "p95_ratio_beside_vs_alone": round(p95_beside / p95_alone, 2),
        "failed_alone": failed_alone,
        "failed_beside": failed_beside,
        "silent_graph_requests": len(hostile_statuses),
        "silent_graph_statuses": sorted(set(hostile_statuses)),
    }


def main() -> None:
    args = parse_args()
    with socket.socket() as silent:  # accepts connections (the kernel's backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(256)
        graph = f"redis://127.0.0.1:{silent.getsockname()[1]}"
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        server = start_server(port, graph, args.timeout_s)
        try:
            wait_ready(url, server)
            print(json.dumps(asyncio.run(measure(url, psutil.Process(server.pid), graph, args))))
        finally:
            server.terminate()
            server.wait(timeout=60)


if __name__ == "__main__":
    main()
