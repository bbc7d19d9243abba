"""Reference-based metrics for free-text answers: ROUGE-L, BLEU-4, METEOR and a local BERTScore.

Every score is on a 0–1 scale. An empty (blank) prediction scores 0.0 — a method that produced nothing said
nothing right; a blank reference is an `InvalidInputError`, since there is nothing to measure against.

Languages: "en" and "fr" are scored on words, "zh" on characters (Chinese has no spaces between words).
METEOR is English only (WordNet synonyms and the Porter stemmer are English).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from clinrag.core.errors import ConfigError, InvalidInputError
from clinrag.core.models import Language
from clinrag.embed.minilm_onnx import MODEL_ID as MINILM_MODEL_ID
from clinrag.embed.minilm_onnx import MiniLMOnnxEmbedder

if TYPE_CHECKING:
    from nltk.corpus.reader.wordnet import WordNetCorpusReader
    from rouge_score.rouge_scorer import RougeScorer

BERTSCORE_METRIC = "bertscore_minilm_l6"
LANGUAGES: tuple[Language, ...] = ("en", "fr", "zh")
WORDNET_INSTALL_HINT = (
    "METEOR needs the WordNet 3.0 database for NLTK and clinrag never downloads it. Install it with "
    "`apt-get install -y wordnet-base wordnet-sense-index` (as root) and then "
    "`bash scripts/install_wordnet.sh` (copies it into .venv/nltk_data/corpora/wordnet; pass another venv "
    "path as its argument)"
)
# sacrebleu's tokenizers: 13a is the standard WMT one; "zh" splits Chinese characters apart.
_BLEU_TOKENIZE = {"en": "13a", "fr": "13a", "zh": "zh"}
_METEOR_TOKEN = re.compile(r"\w+|[^\w\s]")


class CharTokenizer:
    """rouge-score tokenizer for Chinese: one token per CJK (or other non-ASCII) letter or digit, ASCII
    words and numbers kept whole, punctuation and spaces dropped. rouge-score's default tokenizer keeps only
    [a-z0-9], so it would turn a Chinese answer into nothing."""

    _TOKEN = re.compile(r"[a-z0-9]+|[^\W_]")

    def tokenize(self, text: str) -> list[str]:
        return self._TOKEN.findall(text.lower())


class WordTokenizer:
    """rouge-score tokenizer for French: lower-cased Unicode words, no stemming (Porter is English), so
    accented letters stay inside their word instead of splitting it as the default tokenizer does."""

    _TOKEN = re.compile(r"[^\W_]+")

    def tokenize(self, text: str) -> list[str]:
        return self._TOKEN.findall(text.lower())


class BertScore(BaseModel):
    """Greedy-matching BERTScore of one prediction against one reference, computed with the packaged
    all-MiniLM-L6-v2 (int8 ONNX) instead of roberta-large, without idf weighting or baseline rescaling.
    It is NOT comparable to published BERTScore numbers; compare it only with other `bertscore_minilm_l6`
    scores."""

    model_config = ConfigDict(frozen=True)

    metric: Literal["bertscore_minilm_l6"] = BERTSCORE_METRIC
    precision: float
    recall: float
    f1: float


def rouge_l(prediction: str, reference: str, language: Language = "en") -> float:
    """ROUGE-L F-measure (longest common subsequence of tokens) from `rouge-score`: English with the Porter
    stemmer and its default tokenizer, French on Unicode words, Chinese on characters."""
    if _blank_prediction(prediction, reference, language):
        return 0.0
    return _rouge_scorer(language).score(reference, prediction)["rougeL"].fmeasure


def bleu4(prediction: str, reference: str, language: Language = "en") -> float:
    """Sentence BLEU-4 from `sacrebleu`, divided by 100 to lie in 0–1 (sacrebleu reports 0–100).

    Tokenizer "13a" for English and French, "zh" for Chinese; case-sensitive, as sacreBLEU's default.
    Smoothing "exp" (Chen & Cherry 2014, method 3; sacrebleu's sentence-level default): an n-gram order with
    no match counts as precision 1 / (2^k · number of n-grams), k = 1, 2, … for each such order, so one
    missing 4-gram does not zero an otherwise good sentence. A prediction shorter than four tokens uses
    only the n-gram orders it has (sacrebleu's effective order)."""
    import sacrebleu  # imported here, like nltk and rouge-score: `clinrag.eval` stays quick to import

    if _blank_prediction(prediction, reference, language):
        return 0.0
    score = sacrebleu.sentence_bleu(
        prediction, [reference], smooth_method="exp", tokenize=_BLEU_TOKENIZE[language]
    )
    return min(1.0, score.score / 100.0)  # a perfect match can round to 100.00000000000001


def meteor(prediction: str, reference: str) -> float:
    """METEOR (NLTK's implementation: exact, Porter-stem and WordNet-synonym matches; alpha 0.9, beta 3,
    gamma 0.5) of an English prediction. Words and punctuation are split by a regex (NLTK's punkt needs
    extra data). WordNet is read from a local NLTK data directory; if it is missing this raises
    `ConfigError` with the install steps — nothing is downloaded."""
    from nltk.translate.meteor_score import meteor_score

    if _blank_prediction(prediction, reference, "en"):
        return 0.0
    wordnet = _wordnet()
    return float(meteor_score([_meteor_tokens(reference)], _meteor_tokens(prediction), wordnet=wordnet))


def text_scores(prediction: str, reference: str, language: Language = "en") -> dict[str, float]:
    """The per-case text metrics: rouge_l, bleu4 and, for English only, meteor."""
    scores = {
        "rouge_l": rouge_l(prediction, reference, language),
        "bleu4": bleu4(prediction, reference, language),
    }
    if language == "en":
        scores["meteor"] = meteor(prediction, reference)
    return scores


def bertscore(
    predictions: Sequence[str], references: Sequence[str], embedder: MiniLMOnnxEmbedder
) -> list[BertScore]:
    """`bertscore_minilm_l6` of each (prediction, reference) pair — NOT comparable to published
    roberta-large BERTScore (see `BertScore`).

    Each word piece (no [CLS]/[SEP]) is embedded in context and L2-normalised; recall is the mean over
    reference pieces of their best cosine with a prediction piece, precision the same the other way round,
    f1 their harmonic mean. No idf weighting, no baseline rescaling. Texts are truncated like the embedder's
    (256 word pieces). A blank prediction scores 0.0."""
    if not isinstance(embedder, MiniLMOnnxEmbedder) or embedder.name != MINILM_MODEL_ID:
        raise ConfigError(f"{BERTSCORE_METRIC} must be computed with the packaged {MINILM_MODEL_ID} embedder")
    if isinstance(predictions, str) or isinstance(references, str):
        raise InvalidInputError("bertscore() takes sequences of strings, not a single string")
    if len(predictions) != len(references):
        raise InvalidInputError(f"{len(predictions)} predictions but {len(references)} references")
    for index, (prediction, reference) in enumerate(zip(predictions, references, strict=True)):
        _require_reference(reference, f"reference at index {index}")
        if not isinstance(prediction, str):
            raise InvalidInputError(f"prediction at index {index} is {type(prediction).__name__}, not str")
    scored = [i for i, prediction in enumerate(predictions) if prediction.strip()]
    vectors = embedder.token_embeddings([predictions[i] for i in scored] + [references[i] for i in scored])
    results = [BertScore(precision=0.0, recall=0.0, f1=0.0) for _ in predictions]
    for k, index in enumerate(scored):
        results[index] = _greedy_match(vectors[k], vectors[len(scored) + k])
    return results


def _greedy_match(prediction: np.ndarray, reference: np.ndarray) -> BertScore:
    if len(prediction) == 0 or len(reference) == 0:
        return BertScore(precision=0.0, recall=0.0, f1=0.0)
    similarity = prediction @ reference.T  # rows are unit vectors: cosine similarities
    precision = float(similarity.max(axis=1).mean())
    recall = float(similarity.max(axis=0).mean())
    total = precision + recall
    f1 = 2 * precision * recall / total if total > 0 else 0.0
    return BertScore(precision=precision, recall=recall, f1=f1)


def _blank_prediction(prediction: str, reference: str, language: str) -> bool:
    """Validates the pair; True when the prediction is blank (it then scores 0.0)."""
    if language not in LANGUAGES:
        raise InvalidInputError(f"unsupported language {language!r}; text metrics support {list(LANGUAGES)}")
    _require_reference(reference, "reference")
    if not isinstance(prediction, str):
        raise InvalidInputError(f"prediction is {type(prediction).__name__}, not str")
    return not prediction.strip()


def _require_reference(reference: object, what: str) -> None:
    if not isinstance(reference, str):
        raise InvalidInputError(f"{what} is {type(reference).__name__}, not str")
    if not reference.strip():
        raise InvalidInputError(f"{what} is empty: a text metric needs a reference answer")


@functools.cache
def _rouge_scorer(language: str) -> RougeScorer:
    from rouge_score import rouge_scorer

    if language == "zh":
        return rouge_scorer.RougeScorer(["rougeL"], tokenizer=CharTokenizer())
    if language == "fr":
        return rouge_scorer.RougeScorer(["rougeL"], tokenizer=WordTokenizer())
    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)


def _meteor_tokens(text: str) -> list[str]:
    return _METEOR_TOKEN.findall(text)


@functools.cache
def _wordnet() -> WordNetCorpusReader:
    """A WordNet reader over the first `corpora/wordnet` on NLTK's data path, built once. Our own instance
    rather than `nltk.corpus.wordnet`, so a missing or broken install is found here, as a `ConfigError`."""
    import nltk
    from nltk.corpus.reader import CorpusReader, WordNetCorpusReader
    from nltk.corpus.util import LazyCorpusLoader

    try:
        root = nltk.data.find("corpora/wordnet")
    except LookupError as exc:
        raise ConfigError(f"{WORDNET_INSTALL_HINT}. Searched: {', '.join(nltk.data.path)}") from exc
    # Open Multilingual WordNet, only loaded if a multilingual lookup asks for it (METEOR never does).
    omw = LazyCorpusLoader("omw-2.0", CorpusReader, r".*/wn-data-.*\.tab", encoding="utf8")
    try:
        return WordNetCorpusReader(root, omw)
    except (OSError, ValueError, AssertionError) as exc:  # a missing file, or a malformed lexnames line
        raise ConfigError(f"{WORDNET_INSTALL_HINT}. The WordNet at {root} is incomplete: {exc}") from exc
