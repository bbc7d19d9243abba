"""The embedded backend on a prebuilt llama.cpp: `cyllama`, a manylinux2014 wheel (glibc 2.17) with
llama.cpp compiled in behind Cython bindings, so installing it compiles nothing (the source build of
llama-cpp-python needs a C++ toolchain and CMake).

It reproduces `EmbeddedLlama` (llama-cpp-python built from source) step for step: the same chat-template
rendering, context settings, sampler chain (repeat penalty over the last 64 generated tokens, grammar, greedy
or top-k/typical/top-p/min-p/temperature/dist), stop handling and option-scoring arithmetic. The JSON schema
is compiled to GBNF by `embedded_common`, accepting the same language as llama-cpp-python's converter for the
schemas clinrag sends (llama.cpp's own converter, which cyllama exposes, allows other whitespace and so other
outputs).
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from clinrag.core.errors import InvalidInputError, ModelUnavailableError
from clinrag.core.usage import Usage
from clinrag.llm.base import ChatModel, ChatRequest, Completion, OptionScores
from clinrag.llm.embedded_common import (
    MIN_P,
    N_BATCH,
    PENALTY_LAST_N,
    TOP_K,
    TOP_P,
    TYPICAL_P,
    chat_template_renderer,
    check_context,
    json_schema_to_gbnf,
    log_softmax,
    output_settings,
    packaged_model_path,
    unfinished_utf8,
)


def _byte_decoder() -> dict[str, int]:
    """Byte-level BPE spells each byte as one printable character: bytes that are printable Latin-1 stand for
    themselves, the others take the code points from 256 up, in byte order."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
    others = [b for b in range(256) if b not in printable]
    table = {chr(b): b for b in printable}
    table.update({chr(256 + i): b for i, b in enumerate(others)})
    return table


def _runtime() -> Any:
    try:
        from cyllama.llama import llama_cpp
    except ImportError as exc:
        raise ModelUnavailableError(
            "the prebuilt embedded runtime is not installed: run `pip install cyllama==0.2.18` (no wheel "
            "for Linux aarch64: there run scripts/install.sh --source-runtime, which builds llama-cpp-python)"
        ) from exc
    return llama_cpp


class EmbeddedLlamaWheel(ChatModel):
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
        cy = self._cy = _runtime()

        class Model(cy.LlamaModel):
            # cyllama 0.2's logits accessors read `model.n_vocab`, which its LlamaModel lacks.
            @property
            def n_vocab(self) -> int:
                return self.get_vocab().n_vocab

        path = model_path or packaged_model_path()
        if not path.is_file():
            raise ModelUnavailableError(f"model file not found: {path}")
        cy.disable_logging()
        model_params = cy.LlamaModelParams()
        model_params.n_gpu_layers = 0
        n_batch = min(n_ctx, N_BATCH)
        params = cy.LlamaContextParams()
        params.n_ctx, params.n_batch, params.n_ubatch = n_ctx, n_batch, n_batch
        # One thread count for generation and batched prompt evaluation: one thread per CPU would
        # oversubscribe cores shared between processes.
        params.n_threads = params.n_threads_batch = n_threads
        # llama-cpp-python turns flash attention off unless asked; llama.cpp's default (auto) turns it on on
        # the CPU, which rounds differently.
        params.flash_attn_type = 0
        try:
            self._model = Model(str(path), model_params)
            self._ctx = cy.LlamaContext(self._model, params)
        except (ValueError, RuntimeError, MemoryError) as exc:
            raise ModelUnavailableError(f"llama.cpp could not load {path}: {exc}") from exc
        self._vocab = self._model.get_vocab()
        self._batch = cy.LlamaBatch(n_tokens=n_batch, embd=0, n_seq_max=1)
        self._n_batch = n_batch
        self._bytes = _byte_decoder() if self._vocab.vocab_type == 2 else None  # 2: byte-level BPE
        self._pieces: dict[int, bytes] = {}
        template = self._model.meta_val_str("tokenizer.chat_template")
        if not template:
            raise ModelUnavailableError(
                f"{path.name} has no chat template: it is a base model, not an instruct one"
            )
        self._eos = self._vocab.token_eos()
        self._eos_text = self._vocab.token_to_piece(self._eos, 0, True)
        bos_text = self._vocab.token_to_piece(self._vocab.token_bos(), 0, True)
        self._render = chat_template_renderer(template, eos_token=self._eos_text, bos_token=bos_text)
        self.model = path.stem
        self.n_ctx = n_ctx
        self.repeat_penalty = repeat_penalty
        self.seed = seed
        self.default_max_tokens = default_max_tokens
        self.max_prompt_chars = max_prompt_chars
        self._lock = threading.Lock()  # a llama.cpp context serves one call at a time
        self._grammars: dict[str, str] = {}

    @property
    def output_settings(self) -> str:
        return output_settings(self.repeat_penalty, self.seed)

    # -- runtime helpers ---

    def _piece(self, token: int) -> bytes:
        """A token's bytes. cyllama returns pieces as text, which loses the bytes of a token that ends inside
        a UTF-8 character; byte-level BPE tokens are then rebuilt from their vocabulary spelling."""
        if token not in self._pieces:
            piece = self._vocab.token_to_piece(token, 0, False)
            if "\ufffd" in piece and self._bytes is not None:
                self._pieces[token] = bytes(self._bytes[c] for c in self._vocab.get_text(token))
            else:
                self._pieces[token] = piece.encode("utf-8")
        return self._pieces[token]

    def _detokenize(self, tokens: list[int]) -> bytes:
        return b"".join(self._piece(token) for token in tokens)

    def _decode(self, tokens: list[int], position: int, *, all_logits: bool) -> None:
        """Decode tokens from `position` in chunks of n_batch, with logits for the last token of each chunk or
        for every token. Anything cached from `position` on is dropped first."""
        self._ctx.memory_seq_rm(-1, position, -1)
        for start in range(0, len(tokens), self._n_batch):
            self._batch.set_batch(tokens[start : start + self._n_batch], position + start, all_logits)
            status = self._ctx.decode(self._batch)
            if status != 0:
                raise InvalidInputError(f"llama.cpp could not evaluate the prompt (decode returned {status})")

    def _logprobs_at(self, index: int) -> np.ndarray:
        """Log-softmax of the logits of output `index` of the last decode (-1: its last output)."""
        return log_softmax(np.asarray(self._ctx.get_logits_ith(index), dtype=np.float64))

    def _sampler(self, request: ChatRequest) -> Any:
        """llama-cpp-python's chain: penalties, grammar, then greedy (temperature 0) or its defaults."""
        sampler = self._cy.LlamaSampler()
        sampler.add_penalties(PENALTY_LAST_N, self.repeat_penalty, 0.0, 0.0)
        if request.json_schema:
            sampler.add_grammar(self._vocab, self._grammar(request.json_schema), "root")
        if request.temperature == 0.0:
            sampler.add_greedy()
        else:
            sampler.add_top_k(TOP_K)
            sampler.add_typical(TYPICAL_P, 1)
            sampler.add_top_p(TOP_P, 1)
            sampler.add_min_p(MIN_P, 1)
            sampler.add_temp(request.temperature)
            sampler.add_dist((request.seed if request.seed is not None else self.seed) & 0xFFFFFFFF)
        return sampler

    def _grammar(self, schema: dict) -> str:
        key = json.dumps(schema)
        if key not in self._grammars:
            try:
                self._grammars[key] = json_schema_to_gbnf(schema)
            except (ValueError, KeyError, TypeError) as exc:
                raise InvalidInputError(f"this JSON schema cannot be compiled to a grammar: {exc}") from exc
        return self._grammars[key]

    # -- the ChatModel contract ---

    def _prompt_tokens(self, request: ChatRequest, reserve: int) -> list[int]:
        tokens = self._vocab.tokenize(self._render([m.model_dump() for m in request.messages]), False, True)
        check_context(len(tokens), reserve, self.n_ctx)
        return tokens

    def _complete(self, request: ChatRequest) -> Completion:
        max_tokens = request.max_tokens or self.default_max_tokens
        stops = [s.encode("utf-8") for s in [self._eos_text, *request.stop]]
        started = time.perf_counter()
        with self._lock:
            prompt = self._prompt_tokens(request, reserve=max_tokens)
            sampler = self._sampler(request)
            self._decode(prompt, 0, all_logits=False)  # from an empty cache: no prefix reuse
            generated: list[int] = []
            text, finish_reason, unfinished = b"", "length", 0
            while True:
                token = sampler.sample(self._ctx, -1)
                if self._vocab.is_eog(token):
                    text, finish_reason = self._detokenize(generated), "stop"
                    break
                generated.append(token)
                text = self._detokenize(generated)
                unfinished = unfinished_utf8(text, unfinished)
                if unfinished > 0:
                    # Mid-character: no stop or length check until it can be complete (llama-cpp-python).
                    unfinished -= 1
                else:
                    hits = [stop for stop in stops if stop in text]
                    if hits:
                        text, finish_reason = text[: text.index(hits[0])], "stop"
                        break
                    if len(generated) >= max_tokens:
                        break
                self._decode([token], len(prompt) + len(generated) - 1, all_logits=False)
        return Completion(
            text=text.decode("utf-8", errors="ignore").strip(),
            model=self.model,
            finish_reason=finish_reason,
            usage=Usage(
                calls=1,
                prompt_tokens=len(prompt),
                completion_tokens=len(generated),
                wall_time_s=time.perf_counter() - started,
            ),
        )

    def _score_options(self, request: ChatRequest, options: list[str]) -> OptionScores:
        """Log-likelihood of each option as the complete assistant reply (option tokens + end of turn): the
        prompt is evaluated once from an empty cache, then each option's tokens but the last in one batch
        after it, with logits at every position."""
        started = time.perf_counter()
        encoded = [[*self._vocab.tokenize(option, False, False), self._eos] for option in options]
        with self._lock:
            prompt = self._prompt_tokens(request, reserve=max(map(len, encoded)))
            self._decode(prompt, 0, all_logits=False)
            first = self._logprobs_at(-1)
            logprobs = []
            for tokens in encoded:
                total = float(first[tokens[0]])
                if len(tokens) > 1:
                    self._decode(tokens[:-1], len(prompt), all_logits=True)
                    total += sum(
                        float(self._logprobs_at(index)[following])
                        for index, following in enumerate(tokens[1:])
                    )
                logprobs.append(total)
        evaluated = len(prompt) + sum(len(t) - 1 for t in encoded)
        return OptionScores(
            options=options,
            logprobs=logprobs,
            token_counts=[len(t) for t in encoded],
            method="loglik",
            usage=Usage(calls=1, prompt_tokens=evaluated, wall_time_s=time.perf_counter() - started),
        )
