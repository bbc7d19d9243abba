"""Embedding in Dask partitions with the real MiniLM embedder: the same vectors as in one process, and a
knowledge base built distributed that answers searches exactly as the one built locally."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from clinrag.core.settings import Settings
from clinrag.embed.factory import build_embedder
from clinrag.knowledge.base import KnowledgeBase
from clinrag.knowledge.builder import KnowledgeBaseBuilder
from clinrag.knowledge.tagging import EmbeddingTagger
from clinrag.patients.loaders import load_patient_dataset
from clinrag.scale.embedding import DistributedEmbedder


def settings_for(home: Path) -> Settings:
    return Settings(home=home, embed_cache_enabled=False)  # every vector computed, none from a cache


def test_partitions_give_the_vectors_of_one_process(client, data_dir: Path, tmp_path: Path) -> None:
    records, _ = load_patient_dataset("icraft", data_dir / "icraft_md" / "craft_md.jsonl", 0)
    texts = [r.narrative for r in records] * 3
    settings = settings_for(tmp_path)
    local = build_embedder(settings)
    distributed = DistributedEmbedder(client, settings, local, partition_size=100)
    together, apart = local.encode(texts), distributed.encode(texts)
    assert apart.shape == together.shape == (len(texts), local.dimension)
    assert np.abs(apart - together).max() < 1e-5
    assert (
        np.argsort(-(apart @ apart[:20].T), axis=0)[:5]
        == np.argsort(-(together @ together[:20].T), axis=0)[:5]
    ).all()


def test_a_distributed_build_searches_like_the_local_one(client, tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    local = build_embedder(settings)
    bases = {}
    for name, embedder in (
        ("local", local),
        ("dask", DistributedEmbedder(client, settings, local, partition_size=50)),
    ):
        builder = KnowledgeBaseBuilder(
            embedder=embedder,
            tagger=EmbeddingTagger(embedder),
            rewriter=None,
            raw_records=True,
            batch_size=4_096,
        )
        builder.build(["packaged:faker-diseases"], tmp_path / name, progress=False)
        bases[name] = KnowledgeBase.load(tmp_path / name, local)
    a, b = bases["local"], bases["dask"]
    assert {s.id: s.tags for s in a.statements.values()} == {s.id: s.tags for s in b.statements.values()}
    for query in ("itching and a red rash", "chest pain on exertion", "fever and a productive cough"):
        for mode in ("dense", "concept"):
            hits_a = [h[0].id for h in a.search(query, k=5, mode=mode, tagger=EmbeddingTagger(local)).hits]
            hits_b = [h[0].id for h in b.search(query, k=5, mode=mode, tagger=EmbeddingTagger(local)).hits]
            assert hits_a == hits_b
