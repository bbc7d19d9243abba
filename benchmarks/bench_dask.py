"""Single process vs a Dask LocalCluster (`--workers` processes bound to 127.0.0.1), measured in the same run:

1. embedding `--passages` passages with the packaged MiniLM (no embedding cache): one process with
   `--workers` ONNX threads vs `--workers` workers with one thread each — the same cores either way;
   identity = largest absolute difference between the two matrices and agreement of each passage's nearest
   neighbours among 1,000 probes;
2. a `--cases`-case `knn-vote` evaluation on DDXPlus (coded-set similarity, no model): `clinrag eval run`
   locally vs `--executor dask`; identity = every case's scores, differential and evidence equal;
3. sharded search: the embedded passages in `--shards` exact shards (scatter-gather) vs one exact index on
   `--queries` random queries (unit vectors near random passages); identity = the same top-10 ids, and
   the same top-10 scores rank by rank (passages with identical vectors may swap places: a tie).

Passages are sentences of the real corpora in the data folder (MedMCQA explanations and questions, PubMedQA
contexts, iCraft-MD vignettes, DDXPlus profile rows), numbered so that each is distinct. Prints one JSON line;
ratios are single-process time / Dask time (> 1: Dask faster; on 2 cores it may well be < 1).

    python benchmarks/bench_dask.py --data ../shared/data --passages 200000 --cases 2000 --queries 10000
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
from pathlib import Path

import numpy as np

from clinrag.core.settings import Settings
from clinrag.embed.factory import build_embedder
from clinrag.eval.results import RunDirectory
from clinrag.eval.runner import EvalRunner, RunRequest
from clinrag.index.dense import DenseConfig, DenseIndex
from clinrag.index.sharded import ShardedDenseIndex
from clinrag.scale.cluster import dask_client
from clinrag.scale.embedding import DistributedEmbedder


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="the data folder (shared/data)")
    parser.add_argument("--passages", type=int, default=200_000)
    parser.add_argument("--cases", type=int, default=2_000)
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


def corpus_sentences(data: Path) -> list[str]:
    texts: list[str] = []
    for line in (data / "medmcqa" / "dev.json").read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        texts += [str(item.get("exp") or ""), str(item.get("question") or "")]
    for item in json.loads((data / "pubmedqa" / "test_set.json").read_text(encoding="utf-8")).values():
        texts += [str(context) for context in item.get("CONTEXTS", [])]
    for line in (data / "icraft_md" / "craft_md.jsonl").read_text(encoding="utf-8").splitlines():
        context = json.loads(line).get("context") or []
        texts += [str(fact) for fact in (context if isinstance(context, list) else [context])]
    texts += (data / "ddxplus" / "test_patients_mini.csv").read_text(encoding="utf-8").splitlines()[1:]
    sentences = (s.strip() for text in texts for s in re.split(r"(?<=[.!?])\s+", text))
    return list(dict.fromkeys(s for s in sentences if len(s) >= 20))


def passages(data: Path, count: int) -> list[str]:
    sentences = corpus_sentences(data)
    return [f"{sentences[i % len(sentences)][:400]} ({i // len(sentences) + 1})" for i in range(count)]


def timed(function, *args, **kwargs):
    started = time.perf_counter()
    value = function(*args, **kwargs)
    return value, time.perf_counter() - started


def neighbours(vectors: np.ndarray, probes: np.ndarray, k: int = 10) -> np.ndarray:
    return np.argsort(-(vectors @ vectors[probes].T), axis=0)[:k].T


def embedding_part(args: argparse.Namespace, texts: list[str], client) -> tuple[dict, np.ndarray]:
    local = build_embedder(Settings(embed_cache_enabled=False, embed_threads=args.workers))
    one_thread = Settings(embed_cache_enabled=False, embed_threads=1)
    distributed = DistributedEmbedder(client, one_thread, local, partition_size=5_000)
    single, single_s = timed(local.encode, texts)
    spread, dask_s = timed(distributed.encode, texts)
    probes = np.random.default_rng(args.seed).choice(len(texts), 1_000, replace=False)
    same = float((neighbours(single, probes) == neighbours(spread, probes)).all(axis=1).mean())
    return {
        "embed_passages": len(texts),
        "embed_single_s": round(single_s, 1),
        "embed_dask_s": round(dask_s, 1),
        "embed_speedup": round(single_s / dask_s, 3),
        "embed_max_abs_diff": float(np.abs(single - spread).max()),
        "embed_same_top10_share": same,
    }, single


def evaluation_part(args: argparse.Namespace, scheduler: str) -> dict:
    times, results = {}, {}
    with tempfile.TemporaryDirectory() as folder:
        for executor in ("local", "dask"):
            request = RunRequest(
                dataset="ddxplus", method="knn-vote", out=Path(folder) / executor,
                data_path=args.data / "ddxplus", limit=args.cases, seed=args.seed,
                executor=executor, scheduler=scheduler if executor == "dask" else None,
            )  # fmt: skip
            outcome, times[executor] = timed(EvalRunner(Settings(), progress=False).run, request)
            results[executor] = {
                r.case_id: (r.scores, r.answer.result.model_dump(), [e.id for e in r.answer.evidence])
                for r in RunDirectory(request.out).results()
            }
            assert outcome.summary.n_finished == args.cases
    return {
        "eval_cases": args.cases,
        "eval_single_s": round(times["local"], 1),
        "eval_dask_s": round(times["dask"], 1),
        "eval_speedup": round(times["local"] / times["dask"], 3),
        "eval_identical": results["local"] == results["dask"],
    }


def sharded_part(args: argparse.Namespace, vectors: np.ndarray, client) -> dict:
    exact = DenseConfig(exact_threshold=len(vectors) + 1)
    ids = [f"p{i}" for i in range(len(vectors))]
    rng = np.random.default_rng(args.seed + 1)
    queries = vectors[rng.choice(len(vectors), args.queries)] + rng.normal(
        0, 0.05, (args.queries, vectors.shape[1])
    )
    queries = (queries / np.linalg.norm(queries, axis=1, keepdims=True)).astype(np.float32)
    single = DenseIndex("bench", vectors.shape[1], exact)
    single.add(vectors, ids)
    expected, single_s = timed(single.search, queries, 10)
    sharded = ShardedDenseIndex.build(
        vectors, ids, args.shards, embedder="bench", config=exact, client=client
    )
    remote = sharded.serve(client)
    found, sharded_s = timed(remote.search, queries, 10)
    pairs = list(zip(expected, found, strict=True))
    same = [[h.id for h in a] == [h.id for h in b] for a, b in pairs]
    # Passages that tokenize alike have identical vectors: their order is the index's arbitrary tie order.
    same_scores = [np.allclose([h.score for h in a], [h.score for h in b], atol=1e-5) for a, b in pairs]
    gaps = rank_score_gaps(vectors, queries, pairs)
    return {
        "search_queries": args.queries,
        "search_shards": args.shards,
        "search_single_s": round(single_s, 2),
        "search_sharded_dask_s": round(sharded_s, 2),
        "search_speedup": round(single_s / sharded_s, 3),
        "search_same_top10_share": sum(same) / len(same),
        "search_same_top10_scores_share": sum(same_scores) / len(same_scores),
        "search_max_rank_gap_float64": float(gaps.max()),
        "search_queries_differing_beyond_1e-6": int((gaps > 1e-6).sum()),
    }


def rank_score_gaps(vectors: np.ndarray, queries: np.ndarray, pairs: list) -> np.ndarray:
    """Per query, the largest difference, rank by rank, between the float64 scores of the two top-k lists.

    Both lists re-scored exactly from the same vectors: a gap near float32 rounding (~1e-7) means the lists
    differ only in the order of tied passages; a real miss would leave a gap of a score difference.
    """
    ids = np.array([[int(h.id[1:]) for h in a] + [int(h.id[1:]) for h in b] for a, b in pairs])
    k = ids.shape[1] // 2
    scores = np.einsum("qd,qkd->qk", queries.astype(np.float64), vectors[ids].astype(np.float64))
    return np.abs(np.sort(scores[:, :k], axis=1) - np.sort(scores[:, k:], axis=1)).max(axis=1)


def main() -> None:
    args = parse_args()
    texts = passages(args.data, args.passages)
    result: dict = {"benchmark": "dask_scale_out", "workers": args.workers}
    with dask_client(workers=args.workers) as client:
        embedding, vectors = embedding_part(args, texts, client)
        result |= embedding
        result |= evaluation_part(args, client.scheduler.address)
        result |= sharded_part(args, vectors, client)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
