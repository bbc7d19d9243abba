"""Retrieval indexes: dense (faiss), lexical (bm25s), rank fusion, concept-constrained dense search. Import
the module you need (`clinrag.index.dense`, …): importing the package loads none of them."""
