"""Text-generation metrics on real answer text (PubMedQA long answers, a DialMed dialogue turn).

Every expected value is counted by hand in the comment beside it; none is a pasted output of the code."""

from __future__ import annotations

import json
import math
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import nltk
import numpy as np
import pytest

from clinrag.core.errors import ConfigError, InvalidInputError
from clinrag.embed.minilm_onnx import MiniLMOnnxEmbedder, packaged_model_files
from clinrag.eval import text_metrics
from clinrag.eval.text_metrics import (
    BERTSCORE_METRIC,
    BertScore,
    bertscore,
    bleu4,
    meteor,
    rouge_l,
    text_scores,
)
from tests.conftest import shared_data

REPO = Path(__file__).resolve().parents[2]
SUBLINGUAL = "An association was found between sublingual varices and hypertension."  # PMID 26163474
LITT = (
    "LITT induces a locoregional passage of chemotherapeutic agents into the brain tissue."  # PMID 12913878
)
LITT_INTEREST = "This is of potential interest for the treatment of brain tumors."  # PMID 12913878
TONGUE = "Examining the lateral borders of the tongue"  # PMID 26163474
PHYSICIANS = (  # PMID 18537964
    "Physicians appear to document more frequently and in greater depth medication history information"
)


@pytest.fixture(scope="module")
def pubmedqa(data_dir: Path) -> dict[str, str]:
    """LONG_ANSWER by PMID; each test sentence is checked to be real text from it."""
    path = shared_data(data_dir / "pubmedqa" / "test_set.json", "the PubMedQA test set")
    records = json.loads(path.read_text(encoding="utf-8"))
    return {pmid: record["LONG_ANSWER"] for pmid, record in records.items()}


@pytest.fixture(scope="module")
def dialmed_turn(data_dir: Path) -> str:
    path = shared_data(data_dir / "dialmed" / "test.txt", "the DialMed test file")
    with path.open(encoding="utf-8") as lines:
        return json.loads(next(lines))["dialog"][2]


@pytest.fixture
def wordnet() -> None:
    """Skips where WordNet was never installed (scripts/install_wordnet.sh needs the Debian packages)."""
    try:
        text_metrics._wordnet()
    except ConfigError as exc:
        pytest.skip(str(exc))


@pytest.fixture
def fresh_wordnet() -> Iterator[None]:
    """Forget the cached reader so a test can point NLTK elsewhere, and forget that one afterwards."""
    text_metrics._wordnet.cache_clear()
    yield
    text_metrics._wordnet.cache_clear()


def test_sentences_are_real(pubmedqa: dict[str, str]) -> None:
    assert SUBLINGUAL in pubmedqa["26163474"]
    assert TONGUE in pubmedqa["26163474"]
    assert LITT in pubmedqa["12913878"]
    assert LITT_INTEREST in pubmedqa["12913878"]
    assert PHYSICIANS in pubmedqa["18537964"]


# ROUGE-L


def test_rouge_l_counts_the_longest_common_subsequence(pubmedqa: dict[str, str]) -> None:
    # Stemmed reference: an associ was found between sublingu varic and hypertens (9 tokens);
    # prediction: sublingu varic were associ with hypertens (6). "associ" comes before "sublingu" in the
    # reference and after it in the prediction, so the LCS is sublingu varic hypertens = 3.
    # P = 3/6, R = 3/9, F = 2PR / (P + R) = 2/5.
    prediction = "Sublingual varices were associated with hypertension."
    assert rouge_l(prediction, SUBLINGUAL) == pytest.approx(2 / 5)


def test_rouge_l_stems_english(pubmedqa: dict[str, str]) -> None:
    # "associations" and "association" share the Porter stem "associ", so the LCS is
    # associ found between sublingu varic and hypertens = 7 of 8 predicted and 9 reference tokens:
    # F = 2 (7/8)(7/9) / (7/8 + 7/9) = 14/17. Without stemming it would be 6 matches.
    prediction = "The associations found between sublingual varices and hypertension"
    assert rouge_l(prediction, SUBLINGUAL) == pytest.approx(14 / 17)


def test_rouge_l_chinese_is_character_level(dialmed_turn: str) -> None:
    assert dialmed_turn == "患者：这几天都是两到三次"
    # Reference characters without the colon: 患者这几天都是两到三次 (11); prediction 这几天都是三次 (7),
    # all in order inside the reference: LCS 7, P = 1, R = 7/11, F = 2 (7/11) / (1 + 7/11) = 7/9.
    assert rouge_l("这几天都是三次", dialmed_turn, "zh") == pytest.approx(7 / 9)
    # rouge-score's own tokenizer keeps only [a-z0-9]: it sees no tokens at all in Chinese.
    assert rouge_l("这几天都是三次", dialmed_turn, "en") == 0.0


def test_rouge_l_french_keeps_accented_words() -> None:
    # la fièvre persiste depuis trois jours (6) against la fièvre persiste (3): LCS 3, P = 1/2, R = 1,
    # F = 2/3. The default tokenizer would split "fièvre" into "fi" and "vre".
    assert rouge_l("La fièvre persiste depuis trois jours", "La fièvre persiste", "fr") == pytest.approx(
        2 / 3
    )


# BLEU-4


def test_bleu4_identical_is_one() -> None:
    assert bleu4(LITT, LITT) == 1.0


def test_bleu4_brevity_penalty_on_a_prefix() -> None:
    # Reference with 13a tokens: This is of potential interest for the treatment of brain tumors . (12);
    # the prediction is its first 8 tokens, so every n-gram precision is 1 and BLEU = BP = exp(1 - 12/8).
    prediction = "This is of potential interest for the treatment"
    assert bleu4(prediction, LITT_INTEREST) == pytest.approx(math.exp(1 - 12 / 8))


def test_bleu4_one_substituted_word() -> None:
    # 13 tokens (with the final "."), "brain" (index 10) replaced: the n-grams covering index 10 miss.
    # p1 = 12/13, p2 = 10/12, p3 = 8/11, p4 = 7/10, BP = 1: BLEU = (56/143) ** (1/4).
    prediction = LITT.replace("brain", "liver")
    assert bleu4(prediction, LITT) == pytest.approx((56 / 143) ** 0.25)


def test_bleu4_exp_smoothing_when_no_4gram_matches() -> None:
    # Examining the lateral {borders -> edges} of the tongue (7 tokens, "the" twice in both):
    # p1 = 6/7, p2 = 4/6 (Examining-the, the-lateral, of-the, the-tongue), p3 = 2/5, p4 = 0/4 -> smoothed to
    # 1 / (2 * 4). BLEU = (6/7 * 4/6 * 2/5 * 1/8) ** (1/4) = (1/35) ** (1/4).
    prediction = "Examining the lateral edges of the tongue"
    assert bleu4(prediction, TONGUE) == pytest.approx((1 / 35) ** 0.25)


def test_bleu4_chinese_splits_characters(dialmed_turn: str) -> None:
    # zh tokenizer: 患 者 ： 这 几 天 都 是 两 到 三 次 (12) against 这 几 天 都 是 三 次 (7).
    # p1 = 7/7, p2 = 5/6 (all but 是三), p3 = 3/5 (这几天 几天都 天都是), p4 = 2/4 (这几天都 几天都是),
    # BP = exp(1 - 12/7): BLEU = BP * (5/6 * 3/5 * 1/2) ** (1/4) = BP * (1/4) ** (1/4).
    expected = math.exp(1 - 12 / 7) * (1 / 4) ** 0.25
    assert bleu4("这几天都是三次", dialmed_turn, "zh") == pytest.approx(expected)


# METEOR


def test_meteor_identical(wordnet: None) -> None:
    # 10 tokens (the final "." is one), all matched in one chunk: P = R = 1, penalty 0.5 * (1/10) ** 3.
    assert meteor(SUBLINGUAL, SUBLINGUAL) == pytest.approx(1 - 0.5 / 10**3)


def test_meteor_wordnet_synonym_beats_an_unrelated_word(wordnet: None) -> None:
    # 13 tokens. "Doctors" matches "Physicians" through WordNet (doctor.n.01 lists physician): 13 matches
    # in one chunk, 1 - 0.5 / 13**3. "Bananas" matches nothing: P = R = 12/13, one chunk of 12,
    # (12/13) * (1 - 0.5 / 12**3).
    synonym = meteor(PHYSICIANS.replace("Physicians", "Doctors"), PHYSICIANS)
    unrelated = meteor(PHYSICIANS.replace("Physicians", "Bananas"), PHYSICIANS)
    assert synonym == pytest.approx(1 - 0.5 / 13**3)
    assert unrelated == pytest.approx(12 / 13 * (1 - 0.5 / 12**3))
    assert synonym > unrelated


# Blank inputs, languages, the per-case dictionary


@pytest.mark.parametrize("prediction", ["", "   \n"])
def test_blank_prediction_scores_zero(prediction: str) -> None:
    assert rouge_l(prediction, SUBLINGUAL) == 0.0
    assert bleu4(prediction, SUBLINGUAL) == 0.0
    assert meteor(prediction, SUBLINGUAL) == 0.0
    assert text_scores(prediction, SUBLINGUAL, "en") == {"rouge_l": 0.0, "bleu4": 0.0, "meteor": 0.0}


@pytest.mark.parametrize("metric", [rouge_l, bleu4, meteor, text_scores])
def test_blank_reference_is_invalid(metric) -> None:
    with pytest.raises(InvalidInputError, match="reference"):
        metric(SUBLINGUAL, " ")


def test_unknown_language_is_invalid() -> None:
    with pytest.raises(InvalidInputError, match="de"):
        rouge_l(SUBLINGUAL, SUBLINGUAL, "de")  # type: ignore[arg-type]


def test_text_scores_keys_by_language(dialmed_turn: str, wordnet: None) -> None:
    english = text_scores(SUBLINGUAL, SUBLINGUAL, "en")
    assert set(english) == {"rouge_l", "bleu4", "meteor"}
    assert english["rouge_l"] == 1.0
    assert english["bleu4"] == 1.0
    chinese = text_scores("这几天都是三次", dialmed_turn, "zh")
    assert set(chinese) == {"rouge_l", "bleu4"}
    assert chinese["rouge_l"] == pytest.approx(7 / 9)
    assert set(text_scores("La fièvre persiste", "La fièvre persiste", "fr")) == {"rouge_l", "bleu4"}


# Token embeddings and BERTScore


def test_token_embeddings_one_row_per_word_piece(minilm_embedder: MiniLMOnnxEmbedder) -> None:
    # an association was found between sub ##ling ##ual var ##ices and hyper ##tension . = 14 word pieces
    (vectors,) = minilm_embedder.token_embeddings([SUBLINGUAL])
    assert vectors.shape == (14, 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)

    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(packaged_model_files()[1]))
    tokenizer.no_padding()
    texts = [LITT, "heart", LITT_INTEREST]
    for text, matrix in zip(texts, minilm_embedder.token_embeddings(texts), strict=True):
        assert matrix.shape == (len(tokenizer.encode(text, add_special_tokens=False).ids), 384)


def test_token_embeddings_do_not_depend_on_the_batch(minilm_embedder: MiniLMOnnxEmbedder) -> None:
    (alone,) = minilm_embedder.token_embeddings([SUBLINGUAL])
    padded = minilm_embedder.token_embeddings([LITT + " " + LITT, SUBLINGUAL])[1]
    np.testing.assert_allclose(alone, padded, atol=1e-4)


def test_token_embeddings_truncate_and_reject_blank(minilm_embedder: MiniLMOnnxEmbedder) -> None:
    (long,) = minilm_embedder.token_embeddings([" ".join([SUBLINGUAL] * 40)])
    assert long.shape == (minilm_embedder.max_seq_length - 2, 384)  # [CLS] and [SEP] take two positions
    assert minilm_embedder.token_embeddings([]) == []
    with pytest.raises(InvalidInputError):
        minilm_embedder.token_embeddings([SUBLINGUAL, "  "])


def test_bertscore_identical_paraphrase_unrelated(minilm_embedder: MiniLMOnnxEmbedder) -> None:
    paraphrase = "Sublingual varices were associated with high blood pressure."
    same, para, other, blank = bertscore(
        [SUBLINGUAL, paraphrase, LITT, ""], [SUBLINGUAL] * 4, minilm_embedder
    )
    assert same.f1 == pytest.approx(1.0, abs=1e-5)
    assert same.precision == pytest.approx(1.0, abs=1e-5)
    assert para.f1 > other.f1 + 0.3
    assert blank == BertScore(precision=0.0, recall=0.0, f1=0.0)
    assert same.metric == BERTSCORE_METRIC == "bertscore_minilm_l6"
    assert "NOT comparable" in (BertScore.__doc__ or "")


def test_greedy_matching_by_hand() -> None:
    # One prediction piece [1, 0] against reference pieces [1, 0] and [0, 1]: cosines 1 and 0.
    # Precision = mean over prediction of its best = 1; recall = mean(1, 0) = 1/2; F1 = 2 * 1/2 / (3/2) = 2/3.
    score = text_metrics._greedy_match(
        np.array([[1.0, 0.0]], dtype=np.float32), np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    )
    assert (score.precision, score.recall) == (1.0, 0.5)
    assert score.f1 == pytest.approx(2 / 3)
    # Two pieces [0.6, 0.8] and [0, 1] against [1, 0]: best cosines 0.6 and 0, so precision 0.3; recall 0.6.
    score = text_metrics._greedy_match(
        np.array([[0.6, 0.8], [0.0, 1.0]], dtype=np.float32), np.array([[1.0, 0.0]], dtype=np.float32)
    )
    assert score.precision == pytest.approx(0.3)
    assert score.recall == pytest.approx(0.6)
    assert score.f1 == pytest.approx(2 * 0.3 * 0.6 / 0.9)


def test_bertscore_rejects_bad_input(minilm_embedder: MiniLMOnnxEmbedder) -> None:
    with pytest.raises(InvalidInputError, match="2 predictions but 1 references"):
        bertscore([SUBLINGUAL, LITT], [SUBLINGUAL], minilm_embedder)
    with pytest.raises(InvalidInputError, match="reference at index 0"):
        bertscore([SUBLINGUAL], [""], minilm_embedder)
    with pytest.raises(InvalidInputError, match="single string"):
        bertscore(SUBLINGUAL, SUBLINGUAL, minilm_embedder)
    with pytest.raises(ConfigError, match="all-MiniLM-L6-v2"):
        bertscore([SUBLINGUAL], [SUBLINGUAL], object())  # type: ignore[arg-type]


# WordNet installation (last: these swap the cached reader, which then has to be loaded again)


def test_meteor_without_wordnet_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_wordnet: None
) -> None:
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path)])
    with pytest.raises(ConfigError, match=r"install_wordnet\.sh"):
        meteor(SUBLINGUAL, SUBLINGUAL)
    # A directory without lexnames (the Debian files copied by hand) is reported the same way.
    (tmp_path / "corpora" / "wordnet").mkdir(parents=True)
    with pytest.raises(ConfigError, match="incomplete"):
        meteor(SUBLINGUAL, SUBLINGUAL)


@pytest.mark.integration  # the install script in a shell of its own
def test_install_wordnet_script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_wordnet: None) -> None:
    if not Path("/usr/share/wordnet/data.noun").is_file():
        pytest.skip("the Debian packages wordnet-base and wordnet-sense-index are not installed")
    venv = tmp_path / "venv"
    venv.mkdir()
    for _ in range(2):  # idempotent
        subprocess.run(["bash", str(REPO / "scripts" / "install_wordnet.sh"), str(venv)], check=True)
    lexnames = (venv / "nltk_data" / "corpora" / "wordnet" / "lexnames").read_text().splitlines()
    assert len(lexnames) == 45
    assert lexnames[0] == "00\tadj.all\t3"
    assert lexnames[18] == "18\tnoun.person\t1"
    monkeypatch.setattr(nltk.data, "path", [str(venv / "nltk_data")])
    assert meteor("Doctors appear", "Physicians appear") == pytest.approx(1 - 0.5 / 2**3)
    assert text_metrics._wordnet().synset("physician.n.01").lexname() == "noun.person"


@pytest.mark.integration
def test_install_wordnet_script_warns_without_the_database(tmp_path: Path) -> None:
    env = {**os.environ, "CLINRAG_WORDNET_SOURCE": str(tmp_path / "absent")}
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "install_wordnet.sh"), str(tmp_path / "venv")],
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0
    assert "WARNING" in done.stderr
    assert "wordnet-base wordnet-sense-index" in done.stderr
    assert not (tmp_path / "venv").exists()
