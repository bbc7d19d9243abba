"""BM25 lexical index on real English (MedQA), Chinese (DialMed) and French (DDXPlus) text."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from clinrag.core.errors import ConfigError, IndexMismatchError, InvalidInputError
from clinrag.index.dense import DenseIndex
from clinrag.index.lexical import LexicalIndex
from clinrag.index.tokenize import Tokenizer

FRACTURE_FORMS = re.compile(r"\bfractur(?:e|es|ed|ing)\b", re.IGNORECASE)


@pytest.fixture(scope="module")
def medqa_index(medqa_questions: list[str]) -> LexicalIndex:
    index = LexicalIndex("en")
    index.add([f"medqa-{i}" for i in range(len(medqa_questions))], medqa_questions)
    return index


def _row(hit_id: str) -> int:
    return int(hit_id.rsplit("-", 1)[1])


def test_english_tokenizer_lowercases_drops_stopwords_and_stems() -> None:
    tokens = Tokenizer("en")("The patient FRACTURED his wrists; fractures are common.")
    assert tokens == ["patient", "fractur", "his", "wrist", "fractur", "common"]


def test_stemmed_query_finds_every_inflected_form(
    medqa_index: LexicalIndex, medqa_questions: list[str]
) -> None:
    hits = medqa_index.search("fractures", 100)
    expected = {i for i, q in enumerate(medqa_questions) if FRACTURE_FORMS.search(q)}
    assert {_row(h.id) for h in hits} == expected
    # Questions 411 and 472 say only "fractured": found through the stem, not the literal word.
    for row in (411, 472):
        assert "fractured" in medqa_questions[row] and "fractures" not in medqa_questions[row]
        assert row in expected
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_multi_term_query_ranks_the_matching_question_first(
    medqa_index: LexicalIndex, medqa_questions: list[str]
) -> None:
    (top, *_) = medqa_index.search("fractured rib widened mediastinum collision", 5)
    assert _row(top.id) == 411
    assert "widened mediastinum" in medqa_questions[411]


def test_queries_without_known_terms_find_nothing(medqa_index: LexicalIndex) -> None:
    assert medqa_index.search("qwertyuiop zxcvbnm", 5) == []
    assert medqa_index.search("the and of", 5) == []  # stopwords only
    for empty in ("", "   "):
        with pytest.raises(InvalidInputError, match="non-empty"):
            medqa_index.search(empty, 5)
    with pytest.raises(InvalidInputError, match="k must be"):
        medqa_index.search("fracture", 0)


def test_chinese_query_finds_its_dialogue(dialmed_dialogues: list[str]) -> None:
    index = LexicalIndex("zh")
    index.add([f"dialmed-{i}" for i in range(len(dialmed_dialogues))], dialmed_dialogues)
    assert "第二针新冠疫苗接种后手臂肿了发痒" in dialmed_dialogues[3]
    (top, *_) = index.search("打了新冠疫苗以后手臂又肿又痒", 5)
    assert top.id == "dialmed-3"
    assert "喝完酒" in dialmed_dialogues[0]
    (top, *_) = index.search("喝酒后拉肚子，吃了思密达和诺氟沙星还不好", 5)
    assert top.id == "dialmed-0"


def test_chinese_tokenizer_segments_words_without_stemming() -> None:
    tokens = Tokenizer("zh")("急性胃肠炎，打喷嚏 Allergies")
    # Search mode: the long words and the words inside them; ASCII words lowercased but not stemmed.
    assert set(tokens) == {"急性", "胃肠", "肠炎", "胃肠炎", "喷嚏", "打喷嚏", "allergies"}


def test_french_stemming_matches_other_inflections(ddxplus_french_questions: dict[str, str]) -> None:
    index = LexicalIndex("fr")
    codes = sorted(ddxplus_french_questions)
    index.add(codes, [ddxplus_french_questions[c] for c in codes])
    # "fièvres" (plural) and "ressentie" find "Avez-vous objectivé ou ressenti de la fièvre?"
    (top, *_) = index.search("fièvres ressentie", 3)
    assert top.id == "E_91"
    assert Tokenizer("fr")("l'hôpital") == ["hôpital"]


def test_incremental_add_equals_one_add(medqa_questions: list[str]) -> None:
    ids = [f"q{i}" for i in range(300)]
    whole = LexicalIndex()
    whole.add(ids, medqa_questions[:300])
    parts = LexicalIndex()
    parts.add(ids[:120], medqa_questions[:120])
    parts.add(ids[120:], medqa_questions[120:300])
    for query in ("chest pain radiating to the jaw", "fractures", "pregnant woman with fever"):
        assert parts.search(query, 10) == whole.search(query, 10)
    with pytest.raises(InvalidInputError, match="duplicate id 'q5'"):
        parts.add(["q5"], ["again"])
    with pytest.raises(InvalidInputError, match="not str"):
        parts.add(["new"], [None])
    with pytest.raises(InvalidInputError, match="empty or whitespace"):
        parts.add(["new"], ["  "])
    with pytest.raises(ConfigError, match="unsupported language"):
        LexicalIndex("de")


@pytest.mark.parametrize("language", ["en", "zh"])
def test_save_load_round_trip_then_add(
    tmp_path: Path, medqa_questions: list[str], dialmed_dialogues: list[str], language: str
) -> None:
    texts = (medqa_questions if language == "en" else dialmed_dialogues)[:200]
    queries = (
        ["fractures", "chest pain", "pregnant woman"] if language == "en" else ["拉肚子", "鼻塞 头疼", "皮炎"]
    )
    index = LexicalIndex(language)
    index.add([f"d{i}" for i in range(150)], texts[:150])
    index.save(tmp_path / "lexical")
    loaded = LexicalIndex.load(tmp_path / "lexical")
    assert loaded.language == language and len(loaded) == 150
    for query in queries:
        assert loaded.search(query, 10) == index.search(query, 10)
    # A reloaded index keeps its documents' terms, so it can grow and re-score like a fresh one.
    loaded.add([f"d{i}" for i in range(150, 200)], texts[150:])
    fresh = LexicalIndex(language)
    fresh.add([f"d{i}" for i in range(200)], texts)
    for query in queries:
        assert loaded.search(query, 10) == fresh.search(query, 10)


def test_empty_and_stopword_only_indexes_round_trip(tmp_path: Path) -> None:
    empty = LexicalIndex()
    assert empty.search("anything", 3) == []
    empty.save(tmp_path / "empty")
    assert LexicalIndex.load(tmp_path / "empty").search("anything", 3) == []
    stopwords = LexicalIndex()
    stopwords.add(["a", "b"], ["the and", "of the"])  # no terms at all: nothing to score yet
    assert stopwords.search("the", 3) == []
    stopwords.save(tmp_path / "stopwords")
    grown = LexicalIndex.load(tmp_path / "stopwords")
    grown.add(["c"], ["a fractured femur"])
    assert [h.id for h in grown.search("fracture", 3)] == ["c"]


def test_loading_another_kind_is_a_mismatch(tmp_path: Path) -> None:
    DenseIndex("e", 4).save(tmp_path / "dense")
    with pytest.raises(IndexMismatchError, match="'dense' index, not a 'lexical'"):
        LexicalIndex.load(tmp_path / "dense")
