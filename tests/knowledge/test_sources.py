"""Corpus readers on the real MedQA, MedMCQA and PubMedQA files, and on broken input.

Expected counts are computed here from the raw files with plain `json`, not through the readers."""

import json
import re
from itertools import islice
from pathlib import Path

import pytest

from clinrag.core.errors import DataFormatError, InvalidInputError
from clinrag.knowledge.chunking import text_size
from clinrag.knowledge.sources import (
    BROKEN_LINES,
    EMPTY_FILES,
    NO_EXPLANATION,
    NO_TEXT,
    detect_format,
    read_jsonl,
    read_medmcqa,
    read_medqa,
    read_pubmedqa,
    read_source,
    read_text_corpus,
    read_text_records,
)


@pytest.fixture(scope="module")
def medqa_path(data_dir) -> Path:
    return data_dir / "medqa" / "us_4options_test.jsonl"


@pytest.fixture(scope="module")
def medmcqa_path(data_dir) -> Path:
    return data_dir / "medmcqa" / "dev.json"


@pytest.fixture(scope="module")
def pubmedqa_path(data_dir) -> Path:
    return data_dir / "pubmedqa" / "test_set.json"


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def medqa_rows(medqa_path) -> list[dict]:
    return _rows(medqa_path)


@pytest.fixture(scope="module")
def medmcqa_rows(medmcqa_path) -> list[dict]:
    return _rows(medmcqa_path)


def _assert_no_wrong_option(item, question: str, options: list[str], right: str) -> None:
    """The item is the question and the right option only; a wrong option's text may appear only where the
    question or the right answer itself contains it."""
    assert (item.question, item.answer) == (question.strip(), right.strip())
    assert item.text == f"{item.question}\nAnswer: {item.answer}"
    content = item.text.replace("\nAnswer: ", "\n")  # the fixed label is not content ("A" is in "Answer")
    for option in options:
        if option not in right and option not in question:
            assert option not in content, (item.id, option)


# --- MedQA --------------------------------------------------------------------------------------------


def test_medqa_items_counts_ids_and_answers(medqa_path, medqa_rows):
    reading = read_medqa(medqa_path)
    items = list(reading)
    expected = [row for row in medqa_rows if row["options"][row["answer_idx"]] == row["answer"]]
    assert len(items) == len(expected) == 1000
    assert reading.report.records == 1000 and reading.report.skipped_count == 0 and reading.report.complete
    assert [item.id for item in items] == [item.id for item in read_medqa(medqa_path)]  # stable
    assert len({item.id for item in items}) == len(items)
    first = items[0]
    assert first.id == "medqa:1" and first.kind == "mcq" and first.source == "medqa"
    assert first.answer == "Proper diet and iron supplementation"
    assert first.provenance == {
        "file": "us_4options_test.jsonl",
        "line": 1,
        "answer_idx": "B",
        "exam": "step1",
    }
    assert first.question == medqa_rows[0]["question"]


def test_medqa_items_never_contain_a_wrong_option(medqa_path, medqa_rows):
    for item, row in zip(read_medqa(medqa_path), medqa_rows, strict=True):
        right = row["options"][row["answer_idx"]]
        _assert_no_wrong_option(item, row["question"], list(row["options"].values()), right)


# --- MedMCQA ------------------------------------------------------------------------------------------


def test_medmcqa_cop_is_one_based(medmcqa_rows):
    """The explanations that open with the answer letter ("Ans-a.", "Ans: B.") agree with cop read 1-based."""
    letters = [
        (row["cop"], match[1].lower())
        for row in medmcqa_rows
        if (match := re.match(r"\s*Ans(?:wer)?[\s.:\-]*([a-dA-D])\b", row["exp"] or ""))
    ]
    assert len(letters) > 1000
    assert all("abcd"[cop - 1] == letter for cop, letter in letters)
    assert {row["cop"] for row in medmcqa_rows} == {1, 2, 3, 4}


def test_medmcqa_explanation_items(medmcqa_path, medmcqa_rows):
    reading = read_medmcqa(medmcqa_path)
    items = list(reading)
    usable = [row for row in medmcqa_rows if row["exp"] and len(row["exp"].split()) >= 5]
    assert len(usable) == 2182
    assert {item.provenance["question_id"] for item in items} == {row["id"] for row in usable}
    assert reading.report.records == len(medmcqa_rows) == 4183
    assert len(reading.report.skipped[NO_EXPLANATION]) == len(medmcqa_rows) - len(usable)
    assert len({item.id for item in items}) == len(items)
    assert [item.id for item in items] == [item.id for item in read_medmcqa(medmcqa_path)]
    assert all(item.kind == "text" and text_size(item.text) <= 120 for item in items)
    assert not any(re.match(r"ans(wer)?\b", item.text, re.IGNORECASE) for item in items)  # marker stripped
    glomerular = next(
        item for item in items if item.id == "medmcqa:b944ada9-d776-4c2a-9180-3ae5f393f72d:exp:0"
    )
    assert glomerular.text.startswith("The oncotic pressure of the fluid leaving the capillaries")
    assert glomerular.provenance["subject"] == "Physiology" and "topic" not in glomerular.provenance


def test_medmcqa_mcq_items_use_the_correct_option_only(medmcqa_path, medmcqa_rows):
    items = list(read_medmcqa(medmcqa_path, kinds=("mcq",)))
    assert len(items) == len(medmcqa_rows)
    by_id = {row["id"]: row for row in medmcqa_rows}
    for item in items:
        row = by_id[item.id.removeprefix("medmcqa:")]
        options = [row["opa"], row["opb"], row["opc"], row["opd"]]
        _assert_no_wrong_option(item, row["question"], options, options[row["cop"] - 1])
    glomerular = by_id["b944ada9-d776-4c2a-9180-3ae5f393f72d"]
    assert next(i for i in items if i.id.endswith(glomerular["id"])).answer == glomerular["opa"]


def test_medmcqa_both_kinds_and_bad_kinds(medmcqa_path):
    kinds = {item.kind for item in islice(read_medmcqa(medmcqa_path, kinds=("mcq", "text")), 10)}
    assert kinds == {"mcq", "text"}
    with pytest.raises(InvalidInputError):
        read_medmcqa(medmcqa_path, kinds=("notes",))


# --- PubMedQA -----------------------------------------------------------------------------------------


def test_pubmedqa_items(pubmedqa_path):
    raw = json.loads(pubmedqa_path.read_text(encoding="utf-8"))
    expected = sum(len(r["CONTEXTS"]) + bool(r["LONG_ANSWER"].strip()) for r in raw.values())
    reading = read_pubmedqa(pubmedqa_path)
    items = list(reading)
    assert len(items) == expected == 2189
    assert reading.report.records == 500
    assert len({item.id for item in items}) == len(items)
    assert [item.id for item in items] == [item.id for item in read_pubmedqa(pubmedqa_path)]
    first = items[0]
    assert first.id == "pubmedqa:12377809:0"
    assert first.text == raw["12377809"]["CONTEXTS"][0]
    assert first.provenance["pmid"] == "12377809" and first.provenance["year"] == "2002"
    assert first.provenance["section"] == "AIMS" and "Constipation" in first.provenance["mesh"]
    long_answer = next(item for item in items if item.id == "pubmedqa:12377809:long_answer")
    assert long_answer.text.startswith("Linear anorectal endosonography demonstrated")


# --- generic JSONL, broken input ----------------------------------------------------------------------


def _corrupt_copy(source: Path, target: Path, broken: set[int], count: int = 20) -> list[bytes]:
    lines = source.read_bytes().splitlines(keepends=True)[:count]
    for number in broken:
        lines[number - 1] = lines[number - 1][: len(lines[number - 1]) // 2] + b"\n"  # truncated JSON
    target.write_bytes(b"".join(lines))
    return lines


def test_broken_jsonl_lines_are_skipped_and_reported(medqa_path, tmp_path):
    path = tmp_path / "medqa_part.jsonl"
    _corrupt_copy(medqa_path, path, {3, 8, 15})
    reading = read_jsonl(path)
    records = list(reading)
    assert [number for number, _ in records] == [n for n in range(1, 21) if n not in {3, 8, 15}]
    assert reading.report.skipped == {BROKEN_LINES: [3, 8, 15]}
    assert "skipped 3 broken lines: 3, 8, 15" in reading.report.summary()
    items = list(read_medqa(path))
    assert len(items) == 17 and items[2].id == "medqa:4"  # ids keep the line numbers


def test_summary_caps_the_listed_lines(medqa_path, tmp_path):
    path = tmp_path / "mostly_broken.jsonl"
    _corrupt_copy(medqa_path, path, set(range(1, 15)))
    reading = read_jsonl(path)
    assert len(list(reading)) == 6
    assert "skipped 14 broken lines: 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, … (+4 more)" in reading.report.summary()


def test_partial_read_and_reiteration(medqa_path):
    reading = read_medqa(medqa_path)
    assert len(list(islice(reading, 5))) == 5
    assert reading.report.items == 5 and not reading.report.complete
    assert "stopped before the end" in reading.report.summary()
    assert len(list(reading)) == 1000 and reading.report.items == 1000  # a new pass, a new report


@pytest.mark.parametrize("content", [b"", b"\n  \n"])
def test_empty_corpus(tmp_path, content):
    for name, reader in [("a.jsonl", read_jsonl), ("b.jsonl", read_medqa), ("c.txt", read_text_corpus)]:
        path = tmp_path / name
        path.write_bytes(content)
        with pytest.raises(DataFormatError, match="empty corpus"):
            list(reader(path))
        with pytest.raises(DataFormatError, match="empty corpus"):
            read_source(path)


def test_file_with_only_broken_lines_is_an_empty_corpus(tmp_path):
    path = tmp_path / "broken.jsonl"
    path.write_text('{"question": \n[1, 2]\nnot json\n', encoding="utf-8")
    with pytest.raises(DataFormatError, match="empty corpus"):
        list(read_jsonl(path))


def test_not_utf8_names_the_file_and_byte_offset(medqa_path, tmp_path):
    lines = medqa_path.read_bytes().splitlines(keepends=True)[:3]
    bad = json.dumps({"text": "Café au lait spots"}, ensure_ascii=False).encode("latin-1") + b"\n"
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(b"".join(lines) + bad)
    offset = sum(len(line) for line in lines) + bad.index(b"\xe9")
    with pytest.raises(DataFormatError, match=rf"latin1\.jsonl: not UTF-8 at byte offset {offset}\b"):
        list(read_jsonl(path))
    text = tmp_path / "latin1.txt"
    text.write_bytes("Café au lait spots.".encode("latin-1"))
    with pytest.raises(DataFormatError, match=r"latin1\.txt: not UTF-8 at byte offset 3\b"):
        list(read_text_corpus(text))


def test_missing_file_fails_when_the_reader_is_called(tmp_path):
    missing = tmp_path / "nope.jsonl"
    for reader in (read_jsonl, read_medqa, read_medmcqa, read_pubmedqa, read_text_corpus, read_source):
        with pytest.raises(DataFormatError, match=r"nope\.jsonl"):
            reader(missing)


# --- plain text and text records ----------------------------------------------------------------------


def test_text_corpus_directory(pubmedqa_path, tmp_path):
    raw = json.loads(pubmedqa_path.read_text(encoding="utf-8"))
    corpus = tmp_path / "abstracts"
    (corpus / "more").mkdir(parents=True)
    pmids = list(raw)[:3]
    for folder, pmid in zip([corpus, corpus, corpus / "more"], pmids, strict=True):
        (folder / f"{pmid}.txt").write_text("\n\n".join(raw[pmid]["CONTEXTS"]), encoding="utf-8")
    (corpus / "empty.txt").write_text("  \n", encoding="utf-8")
    (corpus / "notes.json").write_text("{}", encoding="utf-8")  # not a .txt: ignored

    reading = read_text_corpus(corpus, max_size=1000)
    items = list(reading)
    assert [item.id for item in items] == [f"abstracts:{pmids[0]}.txt:0", f"abstracts:{pmids[1]}.txt:0",
                                           f"abstracts:more/{pmids[2]}.txt:0"]  # fmt: skip
    assert items[0].text.startswith("Dyschesia can be provoked") and items[0].source == "abstracts"
    assert reading.report.records == 4 and reading.report.skipped == {EMPTY_FILES: ["empty.txt"]}
    chunked = list(read_text_corpus(corpus / f"{pmids[0]}.txt", max_size=40))
    assert len(chunked) > 1 and chunked[0].id == f"{pmids[0]}:0"
    assert all(text_size(item.text) <= 40 for item in chunked)


def test_text_records(pubmedqa_path, tmp_path):
    raw = json.loads(pubmedqa_path.read_text(encoding="utf-8"))
    path = tmp_path / "notes.jsonl"
    records = [{"id": pmid, "text": record["LONG_ANSWER"]} for pmid, record in islice(raw.items(), 10)]
    records.insert(4, {"id": "x", "title": "no text here"})
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    reading = read_text_records(path, max_size=1000)
    items = list(reading)
    assert len(items) == 10 and reading.report.skipped == {NO_TEXT: [5]}
    assert items[0].id == "notes:1:0" and items[0].provenance["id"] == "12377809"
    assert items[4].id == "notes:6:0"


def test_medrag_corpus_records_read_their_content(pubmedqa_path, tmp_path):
    """MedRAG's corpora (StatPearls, textbooks) are JSONL with `id`, `title`, `content` and `contents`."""
    raw = json.loads(pubmedqa_path.read_text(encoding="utf-8"))
    path = tmp_path / "statpearls.jsonl"
    records = [
        {"id": f"pubmed_{pmid}_0", "title": record["QUESTION"], "content": record["LONG_ANSWER"],
         "contents": f"{record['QUESTION']}. {record['LONG_ANSWER']}"}
        for pmid, record in islice(raw.items(), 3)
    ]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    items = list(read_text_records(path, max_size=1000))
    assert [item.text for item in items] == [r["content"] for r in records]
    first = items[0].provenance
    assert first["title"] == records[0]["title"] and first["id"] == records[0]["id"]
    assert detect_format(path) == "jsonl"


# --- dispatch -----------------------------------------------------------------------------------------


def test_detect_format_on_the_real_files(data_dir, tmp_path):
    assert detect_format(data_dir / "medqa" / "us_4options_test.jsonl") == "medqa"
    assert detect_format(data_dir / "medmcqa" / "dev.json") == "medmcqa"
    assert detect_format(data_dir / "pubmedqa" / "test_set.json") == "pubmedqa"
    assert detect_format(data_dir / "dialmed" / "test.txt") == "jsonl"  # JSON lines despite the .txt
    assert detect_format(data_dir / "medqa") == "text"
    notes = tmp_path / "notes.txt"
    notes.write_text("Aspirin inhibits platelet aggregation.", encoding="utf-8")
    assert detect_format(notes) == "text"
    unknown = tmp_path / "table.csv"
    unknown.write_text("a,b\n1,2\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match="unrecognised"):
        detect_format(unknown)


def test_read_source_dispatches(data_dir, medqa_path, pubmedqa_path):
    assert next(iter(read_source(medqa_path))).id == "medqa:1"
    assert next(iter(read_source(pubmedqa_path))).id == "pubmedqa:12377809:0"
    assert next(iter(read_source(data_dir / "medmcqa" / "dev.json"))).id.endswith(":exp:0")
    mediq = next(iter(read_source(data_dir / "medqa" / "mediq_dev_atomic_facts.jsonl")))
    assert mediq.id == "mediq_dev_atomic_facts:1" and mediq.answer == "Ceftriaxone"
    assert mediq.question.startswith("A 21-year-old sexually active male")  # the facts precede the question
    with pytest.raises(DataFormatError, match="records without text"):
        list(read_source(data_dir / "dialmed" / "test.txt"))  # dialogues have no `text` field
    with pytest.raises(InvalidInputError):
        read_source(medqa_path, reader="csv")  # type: ignore[arg-type]
