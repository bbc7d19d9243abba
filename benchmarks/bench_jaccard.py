"""EXPRAG coded-set ranker at scale: 1M synthetic patients, three coded fields, the sparse ranker vs a plain
Python set-intersection loop (timed on a subsample of the base and scaled to the full size).

Synthetic data (no real patients): each patient has 5–40 codes per field drawn from Zipf-distributed
vocabularies of 70k / 5k / 8k codes (diagnoses / medications / procedures sized like ICD-10-CM, drugs,
ICD-10-PCS subsets). Prints one JSON line.

    python benchmarks/bench_jaccard.py --n 1000000 --queries 200
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
import psutil

from clinrag.patients.ranker import CodedSetRanker, preset_weights

FIELDS = {"diagnoses": 70_000, "medications": 5_000, "procedures": 8_000}


def zipf_codes(rng: np.random.Generator, vocabulary: int, count: int) -> list[str]:
    ranks = np.minimum(rng.zipf(1.3, size=count * 3), vocabulary) - 1
    return [f"c{r}" for r in dict.fromkeys(ranks.tolist())][:count]


def patients(rng: np.random.Generator, n: int) -> list[dict[str, list[str]]]:
    return [
        {field: zipf_codes(rng, size, int(rng.integers(5, 41))) for field, size in FIELDS.items()}
        for _ in range(n)
    ]


def python_top(query, records, ids, weights, k):
    scores = []
    sets = {f: set(query[f]) for f in weights}
    for index, record in enumerate(records):
        total = 0.0
        for field, weight in weights.items():
            other = set(record[field])
            union = len(sets[field] | other)
            if union:
                total += weight * len(sets[field] & other) / union
        scores.append((-total, index))  # ties broken by insertion order, as the ranker does
    return [ids[index] for score, index in sorted(scores)[:k] if score < 0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--subsample", type=int, default=20_000, help="base size for the Python loop")
    parser.add_argument("--k", type=int, default=15)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    records = patients(rng, args.n)
    queries = patients(rng, args.queries)
    generate_s = time.perf_counter() - started
    ids = [f"p{i}" for i in range(args.n)]
    rss_before = psutil.Process().memory_info().rss

    started = time.perf_counter()
    ranker = CodedSetRanker(ids, records, list(FIELDS))
    build_s = time.perf_counter() - started
    ranker_mb = (psutil.Process().memory_info().rss - rss_before) / 2**20
    weights = preset_weights("uniform", list(FIELDS))

    sparse_ms = []
    for query in queries:
        started = time.perf_counter()
        ranker.rank(query, args.k, weights)
        sparse_ms.append((time.perf_counter() - started) * 1000)

    # Correctness and the baseline on a subsample: identical top-k, then time per patient scaled to n.
    sub = min(args.subsample, args.n)
    small = CodedSetRanker(ids[:sub], records[:sub], list(FIELDS))
    identical = 0
    loop_s = []
    for query in queries[:20]:
        started = time.perf_counter()
        expected = python_top(query, records[:sub], ids[:sub], weights, args.k)
        loop_s.append(time.perf_counter() - started)
        identical += [h.id for h in small.rank(query, args.k, weights)] == expected
    loop_ms_full = statistics.median(loop_s) * 1000 * args.n / sub
    p50 = statistics.median(sparse_ms)
    print(
        json.dumps(
            {
                "benchmark": "jaccard_ranker",
                "synthetic": True,
                "n": args.n,
                "queries": args.queries,
                "k": args.k,
                "fields": FIELDS,
                "generate_s": round(generate_s, 1),
                "build_s": round(build_s, 1),
                "ranker_rss_mb": round(ranker_mb),
                "peak_rss_mb": round(psutil.Process().memory_info().rss / 2**20),
                "sparse_p50_ms": round(p50, 2),
                "sparse_p95_ms": round(float(np.percentile(sparse_ms, 95)), 2),
                "python_loop_ms_per_query_scaled": round(loop_ms_full),
                "python_loop_subsample": sub,
                "speedup_p50": round(loop_ms_full / p50, 1),
                "identical_topk": f"{identical}/20",
            }
        )
    )


if __name__ == "__main__":
    main()
