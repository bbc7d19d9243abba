"""Sentence-aware chunking on a real PubMedQA abstract and a real DialMed (Chinese) dialogue."""

import json
from itertools import pairwise

import pytest

from clinrag.core.errors import InvalidInputError
from clinrag.knowledge.chunking import DEFAULT_MAX_SIZE, chunk_text, split_sentences, text_size


@pytest.fixture(scope="module")
def abstract(data_dir) -> str:
    record = json.loads((data_dir / "pubmedqa" / "test_set.json").read_text(encoding="utf-8"))["12377809"]
    return "\n\n".join(record["CONTEXTS"])


@pytest.fixture(scope="module")
def dialogue(data_dir) -> list[str]:
    lines = (data_dir / "dialmed" / "test.txt").read_text(encoding="utf-8").splitlines()
    return json.loads(lines[16])["dialog"]


def _sentence_ranges(sentences: list[str], chunks: list[str]) -> list[range]:
    """Which consecutive sentences each chunk holds (every chunk must be a run of whole sentences)."""
    ranges = []
    for chunk in chunks:
        inner = split_sentences(chunk)
        starts = [i for i in range(len(sentences)) if sentences[i : i + len(inner)] == inner]
        assert len(starts) == 1, f"chunk is not a run of whole sentences: {chunk!r}"
        ranges.append(range(starts[0], starts[0] + len(inner)))
    return ranges


def test_sentences_of_a_real_abstract(abstract):
    sentences = split_sentences(abstract)
    # "(m.) puborectalis" and "m. puborectalis" do not end a sentence; "p<0.01" does not either
    assert sentences[:2] == [
        "Dyschesia can be provoked by inappropriate defecation movements.",
        "The aim of this prospective study was to demonstrate dysfunction of the anal sphincter and/or the "
        "musculus (m.) puborectalis in patients with dyschesia using anorectal endosonography.",
    ]
    assert len(sentences) == 9
    assert sentences[-1].startswith("Both the changes in length and thickness of the m. puborectalis")


@pytest.mark.parametrize("max_size", [40, 60, DEFAULT_MAX_SIZE])
def test_abstract_chunks_respect_max_keep_overlap_and_lose_no_sentence(abstract, max_size):
    sentences = split_sentences(abstract)
    sizes = [text_size(s) for s in sentences]
    assert max(sizes) <= 40  # so every chunk below is made of whole sentences
    chunks = chunk_text(abstract, max_size=max_size, overlap=1)
    assert len(chunks) > 1
    assert all(text_size(chunk) <= max_size for chunk in chunks)
    ranges = _sentence_ranges(sentences, chunks)
    assert ranges[0].start == 0 and ranges[-1].stop == len(sentences)
    for previous, current in pairwise(ranges):
        if sizes[previous.stop - 1] + sizes[previous.stop] <= max_size:
            assert current.start == previous.stop - 1  # the last sentence is repeated
        else:
            assert current.start == previous.stop  # no room to repeat it; nothing skipped either
        # a chunk is only closed when the next sentence does not fit
        assert sum(sizes[previous.start : previous.stop + 1]) > max_size


def test_without_overlap_chunks_partition_the_sentences(abstract):
    chunks = chunk_text(abstract, max_size=50, overlap=0)
    assert [s for chunk in chunks for s in split_sentences(chunk)] == split_sentences(abstract)


def test_a_sentence_longer_than_max_is_split_on_words(abstract):
    one_sentence = abstract.replace(".", "").replace("\n\n", " ")
    words = one_sentence.split()
    chunks = chunk_text(one_sentence, max_size=50, overlap=1)
    assert [len(chunk.split()) for chunk in chunks[:-1]] == [50] * (len(chunks) - 1)
    assert [word for chunk in chunks for word in chunk.split()] == words


def test_chinese_sentences_and_character_count(dialogue):
    assert text_size("医生：排气放屁多吗") == 9
    assert text_size("做过腹部CT，腹部肝胆胰B超") == 13  # "CT" and "B" are words, the rest characters
    first = split_sentences(dialogue[0])
    assert len(first) == 3 and all(s.endswith("。") for s in first)
    assert first[1] == "之前有幽门螺杆菌感染，两轮治疗后转为阴性。"


def test_chinese_dialogue_chunks(dialogue):
    text = "\n\n".join(dialogue)
    chunks = chunk_text(text, max_size=80, overlap=1)
    assert all(text_size(chunk) <= 80 for chunk in chunks)
    assert all(" " not in chunk for chunk in chunks)  # wrapping inside Chinese adds no spaces
    for sentence in split_sentences(text):
        if text_size(sentence) <= 80:
            assert any(sentence in chunk for chunk in chunks)
    parts = chunk_text(text, max_size=80, overlap=0)
    assert "".join("".join(parts).split()) == "".join(text.split())  # no character lost or repeated


def test_empty_and_whitespace_give_no_chunks():
    assert chunk_text("") == []
    assert chunk_text("  \n\n\t ") == []


def test_deterministic(abstract):
    assert chunk_text(abstract, 40) == chunk_text(abstract, 40)


def test_line_wrapping_is_not_a_sentence_break():
    assert split_sentences("Aspirin reduces\nmortality. Heparin\n\nis given") == [
        "Aspirin reduces mortality.",
        "Heparin",
        "is given",
    ]


def test_invalid_parameters():
    with pytest.raises(InvalidInputError):
        chunk_text("text", max_size=0)
    with pytest.raises(InvalidInputError):
        chunk_text("text", overlap=-1)
