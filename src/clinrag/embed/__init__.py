"""Embedder contract and backends: the packaged MiniLM ONNX model (default) and OpenAI-compatible servers.
Import the module you need (`clinrag.embed.minilm_onnx`, …): importing the package loads none of them."""
