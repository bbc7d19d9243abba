"""Embedder contract and backends: the packaged MiniLM ONNX model (default) and OpenAI-compatible servers."""

from clinrag.embed.base import Embedder
from clinrag.embed.cache import CachedEmbedder, EmbeddingCache
from clinrag.embed.factory import build_embedder
from clinrag.embed.minilm_onnx import MiniLMOnnxEmbedder
from clinrag.embed.openai_compat import OpenAIEmbedder

__all__ = [
    "CachedEmbedder",
    "Embedder",
    "EmbeddingCache",
    "MiniLMOnnxEmbedder",
    "OpenAIEmbedder",
    "build_embedder",
]
