"""`clinrag kb build | search | stats` as a user runs them, on real MedQA lines."""

import json

import pytest

from tests.app.test_cli import _assert_clean_failure, invoke_cli

pytestmark = pytest.mark.integration  # every build embeds and tags with the packaged MiniLM model


@pytest.fixture(scope="module")
def kb_dir(tmp_path_factory, data_dir):
    """A corpus of 30 real MedQA lines with 2 broken lines in it, built into a knowledge base."""
    folder = tmp_path_factory.mktemp("kbcli")
    lines = (data_dir / "medqa" / "us_4options_test.jsonl").read_text().splitlines()[:30]
    lines[4] = lines[4][:50]
    lines[11] = "{not json"
    corpus = folder / "medqa_sample.jsonl"
    corpus.write_text("\n".join(lines) + "\n")
    result = invoke_cli("kb", "build", "--source", str(corpus), "--out", str(folder / "kb"), "--no-rewrite")
    assert result.returncode == 0, result.stderr
    assert "skipped 2 broken lines: 5, 12" in result.stdout
    return folder / "kb"


def test_stats_counts_the_statements(kb_dir):
    stats = json.loads(invoke_cli("kb", "stats", "--kb", str(kb_dir)).stdout)
    assert stats["statements"] == 28 and sum(stats["by_source"].values()) == 28
    assert stats["untagged"] == 0 and stats["rewrite_failures"] == 0


def test_search_with_given_chapters(kb_dir):
    result = invoke_cli(
        "kb", "search", "anemia treatment with iron", "--kb", str(kb_dir), "--tags", "III,18", "--k", "3"
    )
    assert result.returncode == 0, result.stderr
    assert "query chapters: [3, 18] (given)" in result.stdout
    assert "│ 1" in result.stdout


def test_search_reports_the_fallback(kb_dir):
    stats = json.loads(invoke_cli("kb", "stats", "--kb", str(kb_dir)).stdout)
    absent = next(str(n) for n in range(1, 23) if str(n) not in stats["by_chapter"])
    args = ["kb", "search", "anemia", "--kb", str(kb_dir), "--tags", absent]
    loose = invoke_cli(*args, "--fallback", "unconstrained")
    assert "no statement shares the query's tags → searched without the constraint" in loose.stdout
    assert "│ 1" in loose.stdout
    strict = invoke_cli(*args, "--fallback", "none")
    assert "→ no results" in strict.stdout and "│ 1" not in strict.stdout


def test_bad_tag_and_missing_kb_are_clean_errors(kb_dir, tmp_path):
    _assert_clean_failure(
        invoke_cli("kb", "search", "x", "--kb", str(kb_dir), "--tags", "Cardiology"), "not an ICD-10"
    )
    _assert_clean_failure(invoke_cli("kb", "stats", "--kb", str(tmp_path / "none")), "no knowledge base")


def test_empty_and_non_utf8_corpora_are_clean_errors(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    _assert_clean_failure(invoke_cli("kb", "build", "-s", str(empty), "--out", str(tmp_path / "a")), "empty")
    latin = tmp_path / "latin.txt"
    latin.write_bytes("Fièvre et toux chez un patient âgé.".encode("latin-1"))
    _assert_clean_failure(invoke_cli("kb", "build", "-s", str(latin), "--out", str(tmp_path / "b")), "UTF-8")
