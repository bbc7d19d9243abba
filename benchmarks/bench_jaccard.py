"""EXPRAG coded-set ranker at scale: 1M synthetic patients, three coded fields, the ranker vs a plain Python
set-intersection loop, both over the full base.

Synthetic data (no real patients): each patient has 5–40 codes per field, the first distinct ones among
three times as many Zipf(1.3) draws from vocabularies of 70k / 5k / 8k codes (diagnoses / medications /
procedures sized like ICD-10-CM, drugs, ICD-10-PCS subsets). The cohort is generated as numpy arrays and
given to the ranker pre-encoded (`CodedSetRanker.from_codes`); `--from-records` builds it from Python
records instead, as the patient base does.

The loop is the fair one: every patient's sets are built once, outside the timing (a slice of the base at a
time, to bound memory), and a query's time is its loop over all n patients with a bounded heap for the top
k. It runs `--loop-queries` queries at full size; top-k lists (ids and scores) are compared on those, and on
every query against a `--check-n` prefix of the base. Prints one JSON line.

    python benchmarks/bench_jaccard.py --n 1000000 --queries 200 --loop-queries 5
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import json
import os
import resource
import statistics
import time

import numpy as np
import psutil

from clinrag.patients.ranker import CodedSetRanker, EncodedField, preset_weights

FIELDS = {"diagnoses": 70_000, "medications": 5_000, "procedures": 8_000}
Cohort = dict[str, tuple[np.ndarray, np.ndarray]]  # field → (indptr, codes), patient-major


def zipf_field(
    rng: np.random.Generator, vocabulary: int, n: int, chunk: int = 50_000
) -> tuple[np.ndarray, np.ndarray]:
    """(indptr, codes) for n patients: each keeps the first `count` distinct codes (count uniform in 5–40)
    of 3 · count Zipf draws capped at the vocabulary."""
    counts = rng.integers(5, 41, size=n)
    kept_codes, kept_counts = [], []
    for start in range(0, n, chunk):
        wanted = counts[start : start + chunk]
        patient = np.repeat(np.arange(wanted.size, dtype=np.int64), 3 * wanted)
        codes = np.minimum(rng.zipf(1.3, size=patient.size), vocabulary) - 1
        # First occurrence of each (patient, code): a stable sort keeps the earliest draw first.
        key = patient * vocabulary + codes
        order = np.argsort(key, kind="stable")
        first = np.ones(key.size, dtype=bool)
        first[1:] = key[order[1:]] != key[order[:-1]]
        distinct = np.zeros(key.size, dtype=bool)
        distinct[order[first]] = True
        patient, codes = patient[distinct], codes[distinct]
        per_patient = np.bincount(patient, minlength=wanted.size)
        starts = np.cumsum(per_patient) - per_patient
        position = np.arange(patient.size) - np.repeat(starts, per_patient)
        keep = position < wanted[patient]
        kept_codes.append(codes[keep].astype(np.int32))
        kept_counts.append(np.minimum(per_patient, wanted))
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.concatenate(kept_counts), out=indptr[1:])
    return indptr, np.concatenate(kept_codes)


def cohort(rng: np.random.Generator, n: int) -> Cohort:
    return {field: zipf_field(rng, size, n) for field, size in FIELDS.items()}


def split_rows(indptr: np.ndarray, codes: np.ndarray, lo: int, hi: int) -> list[list[int]]:
    flat = codes[indptr[lo] : indptr[hi]].tolist()
    return [flat[s:e] for s, e in itertools.pairwise((indptr[lo : hi + 1] - indptr[lo]).tolist())]


def records(data: Cohort, names: dict[str, list[str]], lo: int, hi: int) -> list[dict[str, list[str]]]:
    """Rows lo..hi as Python records of code strings, the form the patient base gives the ranker."""
    fields = {f: split_rows(indptr, codes, lo, hi) for f, (indptr, codes) in data.items()}
    return [{f: [names[f][c] for c in rows[r]] for f, rows in fields.items()} for r in range(hi - lo)]


def set_columns(data: Cohort, lo: int, hi: int) -> dict[str, list[frozenset[int]]]:
    """Each patient's code sets for rows lo..hi, built once for every query of the loop."""
    return {f: list(map(frozenset, split_rows(indptr, codes, lo, hi))) for f, (indptr, codes) in data.items()}


def loop_chunk(
    query: dict[str, frozenset[int]],
    columns: dict[str, list[frozenset[int]]],
    weights: dict[str, float],
    offset: int,
    heap: list[tuple[float, int]],
    k: int,
) -> None:
    """Scores rows offset.. into `heap`, a min-heap of the k best (score, −row) so far (score > 0 only)."""
    fields = [(columns[f], query[f], len(query[f]), w) for f, w in weights.items()]
    for row in range(len(fields[0][0])):
        total = 0.0
        for column, a, size, weight in fields:
            b = column[row]
            inter = len(a & b)
            union = size + len(b) - inter
            if union:
                total += weight * inter / union
        # Rows come in insertion order, so a tie with the worst kept row loses: ties by insertion order.
        if len(heap) < k:
            if total > 0:
                heapq.heappush(heap, (total, -(offset + row)))
        elif total > heap[0][0]:
            heapq.heapreplace(heap, (total, -(offset + row)))


def loop_top(
    queries: list[dict[str, frozenset[int]]], data: Cohort, n: int, weights: dict[str, float], k: int
) -> tuple[list[list[tuple[int, float]]], list[float]]:
    """The loop's top-k (row, score) per query over rows 0..n, and each query's loop time in seconds."""
    heaps: list[list[tuple[float, int]]] = [[] for _ in queries]
    seconds = [0.0] * len(queries)
    for lo in range(0, n, 100_000):
        columns = set_columns(data, lo, min(lo + 100_000, n))
        for i, query in enumerate(queries):
            started = time.perf_counter()
            loop_chunk(query, columns, weights, lo, heaps[i], k)
            seconds[i] += time.perf_counter() - started
        del columns
    tops = [[(-row, score) for score, row in sorted(heap, key=lambda x: (-x[0], -x[1]))] for heap in heaps]
    return tops, seconds


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--loop-queries", type=int, default=5, help="queries the Python loop runs at size n")
    parser.add_argument("--check-n", type=int, default=20_000, help="base prefix for checking every query")
    parser.add_argument("--k", type=int, default=15)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--from-records", action="store_true", help="build from Python records of strings")
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    data = cohort(rng, args.n)
    query_data = cohort(rng, args.queries)
    generate_s = time.perf_counter() - started
    names = {f: [f"c{i}" for i in range(size)] for f, size in FIELDS.items()}
    ids = [f"p{i}" for i in range(args.n)]
    queries = records(query_data, names, 0, args.queries)
    query_sets = [
        {f: frozenset(codes[indptr[q] : indptr[q + 1]].tolist()) for f, (indptr, codes) in query_data.items()}
        for q in range(args.queries)
    ]
    weights = preset_weights("uniform", list(FIELDS))

    def encoded(m: int) -> dict[str, EncodedField]:
        return {f: (names[f], indptr[: m + 1], codes[: indptr[m]]) for f, (indptr, codes) in data.items()}

    rss_before = psutil.Process().memory_info().rss
    if args.from_records:
        base = records(data, names, 0, args.n)
        started = time.perf_counter()
        ranker = CodedSetRanker(ids, base, list(FIELDS))
        build_s = time.perf_counter() - started
        del base
    else:
        started = time.perf_counter()
        ranker = CodedSetRanker.from_codes(ids, encoded(args.n))
        build_s = time.perf_counter() - started
    ranker_mb = (psutil.Process().memory_info().rss - rss_before) / 2**20

    load = os.getloadavg()
    ranker_ms, ranker_tops = [], []
    for query in queries:
        started = time.perf_counter()
        hits = ranker.rank(query, args.k, weights)
        ranker_ms.append((time.perf_counter() - started) * 1000)
        ranker_tops.append([(int(h.id[1:]), h.score) for h in hits])
    peak_ranker_mb = peak_rss_mb()

    # The loop at full size on a few queries: measured time, and the top-k compared with the ranker's.
    full = min(args.loop_queries, args.queries)
    loop_tops, loop_s = loop_top(query_sets[:full], data, args.n, weights, args.k)
    identical_full = sum(loop_tops[i] == ranker_tops[i] for i in range(full))
    speedups = [loop_s[i] * 1000 / ranker_ms[i] for i in range(full)]

    # Every query against a prefix of the base: a second ranker over that prefix, the loop over it.
    m = min(args.check_n, args.n)
    small = CodedSetRanker.from_codes(ids[:m], encoded(m))
    expected, _ = loop_top(query_sets, data, m, weights, args.k)
    identical_small = sum(
        [(int(h.id[1:]), h.score) for h in small.rank(query, args.k, weights)] == expected[i]
        for i, query in enumerate(queries)
    )
    loop_p50_ms = statistics.median(loop_s) * 1000
    print(
        json.dumps(
            {
                "benchmark": "jaccard_ranker",
                "synthetic": True,
                "n": args.n,
                "queries": args.queries,
                "k": args.k,
                "fields": FIELDS,
                "build_path": "records" if args.from_records else "from_codes",
                "loadavg_1m": round(load[0], 2),
                "generate_s": round(generate_s, 1),
                "build_s": round(build_s, 1),
                "ranker_rss_mb": round(ranker_mb),
                "peak_rss_mb_ranker": round(peak_ranker_mb),
                "peak_rss_mb": round(peak_rss_mb()),
                "ranker_p50_ms": round(statistics.median(ranker_ms), 2),
                "ranker_p95_ms": round(float(np.percentile(ranker_ms, 95)), 2),
                "loop_queries_full_size": full,
                "loop_p50_ms": round(loop_p50_ms),
                "speedup_p50": round(statistics.median(speedups), 1),
                "identical_topk_full_size": f"{identical_full}/{full}",
                "identical_topk_check_n": f"{identical_small}/{args.queries}",
                "check_n": m,
            }
        )
    )


if __name__ == "__main__":
    main()
