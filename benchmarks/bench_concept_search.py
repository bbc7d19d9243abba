"""Concept-constrained dense search (DoctorRAG eq. 1): `ConceptIndex` (one HNSW sub-index per tag, the tag
constraint inside the index) vs the brute-force baseline `MaskedSearch` (score all statements with one
matrix product, mask those sharing no tag with the query to −∞, take the top k), measured in the same run.

Data are synthetic but not uniform: `--n` unit vectors (384-d) grouped in clusters, each cluster belonging to
one home chapter; a statement carries its cluster's chapter plus up to two more (1–3 in all), chapters drawn
from a Zipf law over 22 chapters; within a cluster the vectors vary along a shared low-dimensional latent
space plus isotropic noise, as sentence embeddings do. Queries are drawn the same way and carry 1–2 tags,
usually (not always) their cluster's chapter, so the mask changes many answers.

HNSW search breadth (efSearch) is tuned on separate tuning queries: the smallest value on a ladder whose
recall@k against the exact masked top-k reaches `--target-recall`; recall is then reported on the evaluation
queries. Latency is per single query (batch of one) on `--threads` threads for both methods (faiss via
OpenMP, numpy via OpenBLAS: the script re-executes itself with OPENBLAS_NUM_THREADS set, as BLAS reads it
only at start-up). Prints one JSON line.

    python benchmarks/bench_concept_search.py --n 1000000 --queries 1000 --seed 0 --threads 1
    python benchmarks/bench_concept_search.py --n 50000 --queries 200        # quick check
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time

import faiss
import numpy as np
import psutil

from clinrag.index.baseline import MaskedSearch
from clinrag.index.concept import ConceptIndex
from clinrag.index.dense import DenseConfig
from clinrag.index.hits import Hit

DIMENSION = 384
CHAPTERS = 22
EF_LADDER = (16, 24, 32, 48, 64, 80, 96, 128, 160, 192, 224, 256, 320, 384, 512, 768, 1024)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="statements")
    parser.add_argument("--queries", type=int, default=1_000, help="evaluation queries")
    parser.add_argument("--tuning-queries", type=int, default=1000, help="queries used to tune efSearch")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="threads while searching (both methods)")
    parser.add_argument("--build-threads", type=int, default=os.cpu_count() or 1, help="threads for HNSW")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--target-recall", type=float, default=0.99)
    parser.add_argument("--hnsw-m", type=int, default=32)
    parser.add_argument("--ef-construction", type=int, default=100)
    parser.add_argument(
        "--exact-threshold", type=int, default=20_000, help="sub-indexes up to this are exact"
    )
    parser.add_argument("--zipf", type=float, default=1.0, help="Zipf exponent of the chapter distribution")
    return parser.parse_args()


def log(message: str) -> None:
    print(f"[bench_concept_search {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class Generator:
    """Clustered, tag-correlated unit vectors and tag sets; statements and queries come from one law."""

    def __init__(self, n: int, rng: np.random.Generator, zipf: float) -> None:
        self.rng = rng
        ranks = rng.permutation(CHAPTERS) + 1  # which chapter is most frequent is itself random
        weights = 1.0 / ranks.astype(np.float64) ** zipf
        self.chapter_p = weights / weights.sum()
        self.clusters = max(20, n // 500)
        self.home = rng.choice(CHAPTERS, size=self.clusters, p=self.chapter_p) + 1
        chapter_centres = unit(rng.standard_normal((CHAPTERS + 1, DIMENSION), dtype=np.float32))
        # Clusters of one chapter lean towards a common direction: chapters are topics.
        own = unit(rng.standard_normal((self.clusters, DIMENSION), dtype=np.float32))
        self.centres = unit(0.6 * chapter_centres[self.home] + own)
        latent = 32
        self.basis = np.linalg.qr(rng.standard_normal((DIMENSION, latent)))[0].T.astype(np.float32)
        self.latent_scale = 0.7 / np.sqrt(latent)
        self.noise_scale = 0.3 / np.sqrt(DIMENSION)

    def vectors(self, clusters: np.ndarray) -> np.ndarray:
        out = np.empty((len(clusters), DIMENSION), dtype=np.float32)
        for start in range(0, len(clusters), 50_000):  # chunks keep the temporaries small
            part = clusters[start : start + 50_000]
            latent = self.rng.standard_normal((len(part), self.basis.shape[0]), dtype=np.float32)
            noise = self.rng.standard_normal((len(part), DIMENSION), dtype=np.float32)
            block = self.centres[part] + (latent * self.latent_scale) @ self.basis + noise * self.noise_scale
            out[start : start + len(part)] = unit(block)
        return out

    def statement_tags(self, clusters: np.ndarray) -> list[set[int]]:
        sizes = self.rng.choice(3, size=len(clusters), p=[0.55, 0.30, 0.15]) + 1
        extra = self.rng.choice(CHAPTERS, size=(len(clusters), 2), p=self.chapter_p) + 1
        home = self.home[clusters]
        # A drawn chapter equal to one already held collapses: sizes are 1–3, mostly as drawn.
        return [{int(h), *e[: s - 1].tolist()} for h, e, s in zip(home, extra, sizes, strict=True)]

    def query_tags(self, clusters: np.ndarray) -> list[set[int]]:
        sizes = self.rng.choice(2, size=len(clusters), p=[0.6, 0.4]) + 1
        drawn = self.rng.choice(CHAPTERS, size=(len(clusters), 2), p=self.chapter_p) + 1
        keep_home = self.rng.random(len(clusters)) < 0.75
        first = np.where(keep_home, self.home[clusters], drawn[:, 0])
        return [
            {int(f), *([int(d)] if s == 2 else [])} for f, d, s in zip(first, drawn[:, 1], sizes, strict=True)
        ]


def unit(vectors: np.ndarray) -> np.ndarray:
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def recall(found: list[list[Hit]], truth: list[list[Hit]]) -> float:
    shared = sum(len({h.id for h in f} & {h.id for h in t}) for f, t in zip(found, truth, strict=True))
    return shared / max(1, sum(len(t) for t in truth))


def recall_lower_bound(found: list[list[Hit]], truth: list[list[Hit]]) -> float:
    """Mean per-query recall minus 1.96 standard errors: tuning on its point estimate alone would pick an
    efSearch that falls short of the target on other queries about half the time."""
    per_query = np.array(
        [
            len({h.id for h in f} & {h.id for h in t}) / max(1, len(t))
            for f, t in zip(found, truth, strict=True)
        ]
    )
    return float(per_query.mean() - 1.96 * per_query.std(ddof=1) / np.sqrt(len(per_query)))


def percentile_ms(samples: list[float], q: float) -> float:
    return round(float(np.percentile(samples, q)) * 1000, 3)


def rss_mb() -> float:
    return psutil.Process().memory_info().rss / 2**20


def main() -> None:
    args = parse_args()
    if os.environ.get("OPENBLAS_NUM_THREADS") != str(args.threads):
        os.environ["OPENBLAS_NUM_THREADS"] = str(args.threads)
        os.execv(sys.executable, [sys.executable, *sys.argv])
    rng = np.random.default_rng(args.seed)
    k = args.k

    started = time.perf_counter()
    gen = Generator(args.n, rng, args.zipf)
    clusters = rng.integers(0, gen.clusters, size=args.n)
    vectors = gen.vectors(clusters)
    tags = gen.statement_tags(clusters)
    ids = [f"s{i}" for i in range(args.n)]
    query_clusters = rng.integers(0, gen.clusters, size=args.queries + args.tuning_queries)
    queries = gen.vectors(query_clusters)
    query_tags = gen.query_tags(query_clusters)
    tune_q, tune_tags = queries[args.queries :], query_tags[args.queries :]
    eval_q, eval_tags = queries[: args.queries], query_tags[: args.queries]
    generate_s = time.perf_counter() - started
    log(f"generated {args.n} statements, {gen.clusters} clusters, in {generate_s:.1f}s")

    baseline = MaskedSearch(vectors, ids, tags)
    rss_before_build = rss_mb()
    config = DenseConfig(
        exact_threshold=args.exact_threshold,
        hnsw_m=args.hnsw_m,
        ef_construction=args.ef_construction,
        ef_search=EF_LADDER[0],
    )
    index = ConceptIndex("synthetic-384", DIMENSION, config)
    faiss.omp_set_num_threads(args.build_threads)
    started = time.perf_counter()
    index.add(vectors, ids, tags, progress=True)
    build_s = time.perf_counter() - started
    index_rss_mb = rss_mb() - rss_before_build
    sizes = index.sub_index_sizes()
    log(f"built {len(sizes) - 1} sub-indexes ({sum(sizes.values())} vectors) in {build_s:.1f}s")
    faiss.omp_set_num_threads(args.threads)

    # Tune efSearch on queries that are not evaluated.
    tune_truth = baseline.search(tune_q, tune_tags, k)
    curve: dict[int, float] = {}
    ef_search, lower_bound = EF_LADDER[-1], 0.0
    for ef in EF_LADDER:
        found = [r.hits for r in index.search(tune_q, tune_tags, k, ef_search=ef)]
        curve[ef] = round(recall(found, tune_truth), 4)
        lower_bound = recall_lower_bound(found, tune_truth)
        if lower_bound >= args.target_recall:
            ef_search = ef
            break
    log(f"efSearch {ef_search} (tuning recall curve {curve}, lower bound {lower_bound:.4f})")

    # Warm both paths, then time every evaluation query alone.
    index.search(eval_q[:5], eval_tags[:5], k, ef_search=ef_search)
    baseline.search(eval_q[:2], eval_tags[:2], k)
    constrained: list[list[Hit]] = []
    constrained_s: list[float] = []
    for row in range(args.queries):
        t0 = time.perf_counter()
        (result,) = index.search(eval_q[row : row + 1], eval_tags[row : row + 1], k, ef_search=ef_search)
        constrained_s.append(time.perf_counter() - t0)
        constrained.append(result.hits)
    log("constrained search timed")
    truth: list[list[Hit]] = []
    baseline_s: list[float] = []
    for row in range(args.queries):
        t0 = time.perf_counter()
        truth.extend(baseline.search(eval_q[row : row + 1], eval_tags[row : row + 1], k))
        baseline_s.append(time.perf_counter() - t0)
    log("baseline timed")

    # Constraint violations must be zero; the mask's effect shows the task is not the unconstrained one.
    violations = sum(
        1
        for hits, qt in zip(constrained, eval_tags, strict=True)
        for h in hits
        if not index.tags_of(h.id) & qt
    )
    changed = []
    for start in range(0, args.queries, 64):
        plain = np.argpartition(-(eval_q[start : start + 64] @ vectors.T), k - 1, axis=1)[:, :k]
        for row, top in enumerate(plain):
            masked = {h.id for h in truth[start + row]}
            changed.append(len(masked - {ids[i] for i in top}) / max(1, len(masked)))

    baseline_p50 = float(np.percentile(baseline_s, 50))
    constrained_p50 = float(np.percentile(constrained_s, 50))
    result = {
        "benchmark": "concept_search",
        "n": args.n,
        "queries": args.queries,
        "k": k,
        "seed": args.seed,
        "threads": args.threads,
        "build_threads": args.build_threads,
        "clusters": gen.clusters,
        "hnsw_m": args.hnsw_m,
        "ef_construction": args.ef_construction,
        "exact_threshold": args.exact_threshold,
        "ef_search": ef_search,
        "tuning_recall_curve": curve,
        "tuning_recall_lower_bound": round(lower_bound, 4),
        "sub_indexes_hnsw": sum(1 for t in index.tags if sizes[t] > args.exact_threshold),
        "sub_indexes_exact": sum(1 for t in index.tags if sizes[t] <= args.exact_threshold),
        "stored_vectors": sum(sizes.values()),
        "mean_tags_per_statement": round(sum(len(t) for t in tags) / args.n, 3),
        "largest_sub_index": max(sizes[t] for t in index.tags),
        "recall_at_k": round(recall(constrained, truth), 4),
        "constraint_violations": violations,
        "mask_changed_fraction_of_topk": round(float(np.mean(changed)), 4),
        "constrained_p50_ms": percentile_ms(constrained_s, 50),
        "constrained_p95_ms": percentile_ms(constrained_s, 95),
        "baseline_p50_ms": percentile_ms(baseline_s, 50),
        "baseline_p95_ms": percentile_ms(baseline_s, 95),
        "speedup_p50": round(baseline_p50 / constrained_p50, 1),
        "generate_s": round(generate_s, 1),
        "build_s": round(build_s, 1),
        "index_rss_mb": round(index_rss_mb),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
