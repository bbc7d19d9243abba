"""Knowledge-base build from the shared corpora (MedQA + MedMCQA + PubMedQA) and search latency.

Prints one JSON line. Ratios compare with baselines measured in the same run: the full build against
embedding the same statements alone (what tagging + indexing add), the LLM pipeline per item (declarative
rewrite + LLM tagging with the embedded model) against the model-free pipeline on the same items, and each
search mode's latency against unconstrained dense search.

    python benchmarks/bench_kb_build.py --data ../shared/data --llm-items 20
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from clinrag.core.settings import Settings
from clinrag.embed.cache import CachedEmbedder
from clinrag.embed.minilm_onnx import MiniLMOnnxEmbedder
from clinrag.knowledge.base import KnowledgeBase
from clinrag.knowledge.builder import KnowledgeBaseBuilder
from clinrag.knowledge.rewrite import DeclarativeRewriter
from clinrag.knowledge.tagging import EmbeddingTagger, LLMTagger
from clinrag.llm.embedded import from_settings


def sources(data: Path) -> list[Path]:
    return [
        data / "medqa" / "us_4options_test.jsonl",
        data / "medmcqa" / "dev.json",
        data / "pubmedqa" / "test_set.json",
    ]


def timed_build(builder: KnowledgeBaseBuilder, paths: list[Path], out: Path, limit: int | None):
    started = time.perf_counter()
    report = builder.build(paths, out, limit=limit, progress=False)
    return report, time.perf_counter() - started


def search_latency(kb: KnowledgeBase, queries: list[str], tagger: EmbeddingTagger) -> dict:
    tags = [t.tags for t in tagger.tag_many(queries)]
    result = {}
    for mode in ("dense", "concept", "hybrid", "lexical"):
        times = []
        for query, query_tags in zip(queries, tags, strict=True):
            started = time.perf_counter()
            kb.search(query, mode=mode, tags=query_tags, k=10)
            times.append(time.perf_counter() - started)
        result[mode] = round(statistics.median(times) * 1000, 2)
    return {
        "p50_ms": result,
        "ratio_p50_vs_dense": {mode: round(ms / result["dense"], 3) for mode, ms in result.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    parser.add_argument("--llm-items", type=int, default=20, help="items per source for the LLM pipeline")
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args()

    embedder = MiniLMOnnxEmbedder()
    paths = sources(args.data)
    with tempfile.TemporaryDirectory() as work:
        work = Path(work)

        def model_free() -> KnowledgeBaseBuilder:
            # As `clinrag kb build` does: a (fresh) embedding cache lets the index reuse the tagger's vectors.
            cached = CachedEmbedder(embedder, work / f"cache-{time.monotonic_ns()}.sqlite")
            return KnowledgeBaseBuilder(embedder=cached, tagger=EmbeddingTagger(cached), rewriter=None)

        report, build_s = timed_build(model_free(), paths, work / "full", None)
        kb = KnowledgeBase.load(work / "full", embedder)
        started = time.perf_counter()
        embedder.encode([s.text for s in kb.statements.values()])
        embed_only_s = time.perf_counter() - started

        questions = [
            json.loads(line)["question"] for line in paths[0].read_text().splitlines()[: args.queries]
        ]
        latency = search_latency(kb, questions, EmbeddingTagger(embedder))

        model = from_settings(Settings(embedded_n_ctx=2048))  # the default embedded runtime
        llm = KnowledgeBaseBuilder(
            embedder=embedder, tagger=LLMTagger(model), rewriter=DeclarativeRewriter(model)
        )
        llm_report, llm_s = timed_build(llm, paths, work / "llm", args.llm_items)
        _, fast_small_s = timed_build(model_free(), paths, work / "small", args.llm_items)

    print(
        json.dumps(
            {
                "benchmark": "kb_build",
                "statements": report.statements,
                "by_source": kb.stats()["by_source"],
                "skipped": list(report.sources.values()),
                "build_s": round(build_s, 1),
                "statements_per_s": round(report.statements / build_s, 1),
                "embed_only_s": round(embed_only_s, 1),
                "ratio_build_vs_embed_only": round(build_s / embed_only_s, 3),
                "search": latency,
                "llm_pipeline": {
                    "items": llm_report.items,
                    "statements": llm_report.statements,
                    "rewrite_failures": llm_report.rewrite_failures,
                    "untagged": llm_report.untagged,
                    "chapter_1_share": round(
                        llm_report.tag_counts.get(1, 0) / max(llm_report.statements, 1), 3
                    ),
                    "seconds_per_item": round(llm_s / llm_report.items, 2),
                    "ratio_vs_model_free_per_item": round(llm_s / fast_small_s, 1),
                },
            }
        )
    )


if __name__ == "__main__":
    main()
