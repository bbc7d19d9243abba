"""Retrieval indexes: dense (faiss), lexical (bm25s), rank fusion, concept-constrained dense search."""

from clinrag.index.baseline import MaskedSearch, masked_search
from clinrag.index.concept import ConceptIndex, ConceptResult
from clinrag.index.dense import DenseConfig, DenseIndex
from clinrag.index.fusion import rrf
from clinrag.index.hits import Hit
from clinrag.index.lexical import LexicalIndex
from clinrag.index.store import Manifest

__all__ = [
    "ConceptIndex",
    "ConceptResult",
    "DenseConfig",
    "DenseIndex",
    "Hit",
    "LexicalIndex",
    "Manifest",
    "MaskedSearch",
    "masked_search",
    "rrf",
]
