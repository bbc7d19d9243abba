"""Retrieval indexes: dense (faiss), lexical (bm25s), rank fusion, concept-constrained dense search."""
