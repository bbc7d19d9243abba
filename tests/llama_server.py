"""llama.cpp's OpenAI-compatible server (the `server` extra of llama-cpp-python) serving the packaged SmolLM2
GGUF on loopback: the real production path, started once per test session by the `llama_server` fixture."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from pathlib import Path

import httpx

from clinrag.llm.embedded_common import packaged_model_path
from tests.loopback import free_port


def server_missing() -> str | None:
    """Why the server cannot run here, or None."""
    if importlib.util.find_spec("llama_cpp") is None:
        return "llama-cpp-python is not installed (scripts/install.sh --source-runtime)"
    for module in ("sse_starlette", "starlette_context"):
        if importlib.util.find_spec(module) is None:
            return f"llama-cpp-python's server extra is not installed ({module}): see scripts/install.sh"
    return None


class LlamaServer:
    """`python -m llama_cpp.server` on 127.0.0.1 with every position's logits kept (for echo)."""

    def __init__(self, log_path: Path, model_path: Path | None = None, startup_s: float = 120.0) -> None:
        self.model_path = model_path or packaged_model_path()
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.model = "smollm2"
        command = [
            sys.executable, "-m", "llama_cpp.server",
            "--model", str(self.model_path), "--model_alias", self.model,
            "--host", "127.0.0.1", "--port", str(self.port),
            "--n_ctx", "4096", "--logits_all", "true", "--n_threads", "1", "--n_threads_batch", "1",
        ]  # fmt: skip
        self._log = log_path.open("wb")
        self._process = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT)
        self._wait_ready(startup_s, log_path)

    def _wait_ready(self, startup_s: float, log_path: Path) -> None:
        deadline = time.monotonic() + startup_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                log = log_path.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"llama.cpp's server exited: {log}")
            try:
                if httpx.get(f"{self.base_url}/models", timeout=2.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        self.close()
        raise RuntimeError(f"llama.cpp's server did not start in {startup_s:.0f} s")

    def close(self) -> None:
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._log.close()
