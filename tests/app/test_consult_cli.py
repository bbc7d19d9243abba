"""`clinrag consult` as a user runs it: a real subprocess, a knowledge base built from the real DDXPlus
condition table, a patient base built from the real iCraft-MD vignettes, the real embedded model."""

import json

import pytest

from tests.app.test_cli import _assert_clean_failure, run_cli

QUESTION = (
    "A 5-year-old boy has multiple dome-shaped skin-coloured papules with central umbilication on the chest "
    "and back. They are not itchy. What is it and what should we do?"
)


@pytest.fixture(scope="module")
def kb_dir(tmp_path_factory):
    """The faker-healthcare disease table (it has skin diseases, chapter 12, for the question below)."""
    out = tmp_path_factory.mktemp("consult") / "kb"
    built = run_cli("kb", "build", "-s", "packaged:faker-diseases", "--out", str(out))
    assert built.returncode == 0, built.stderr
    return out


def _consult(kb_dir, data_dir, *extra: str):
    return run_cli(
        "consult",
        QUESTION,
        "--kb",
        str(kb_dir),
        "--patients-dataset",
        "icraft",
        "--patients-path",
        str(data_dir / "icraft_md" / "craft_md.jsonl"),
        "--iterations",
        "1",
        *extra,
        timeout=600,
    )


def test_consult_answers_with_resolvable_evidence_and_a_refinement_trace(kb_dir, data_dir):
    result = _consult(kb_dir, data_dir, "--json")
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["text"].strip() and answer["error"] is None
    statements = [e for e in answer["evidence"] if e["kind"] == "statement"]
    patients = [e for e in answer["evidence"] if e["kind"] == "patient"]
    assert len(statements) == 5 and len(patients) == 3
    kb_ids = {json.loads(line)["id"] for line in (kb_dir / "statements.jsonl").read_text().splitlines()}
    assert all(e["id"].removeprefix("kb:") in kb_ids for e in statements)
    vignettes = [json.loads(line)["id"] for line in (data_dir / "icraft_md" / "craft_md.jsonl").open()]
    assert all(e["id"] in {f"icraft:{i}" for i in vignettes} for e in patients)
    names = [step["name"] for step in answer["trace"]["steps"]]
    assert names[0] == "retrieve" and "medtextgrad.summary" in names and "citations" in names
    summary = next(s for s in answer["trace"]["steps"] if s["name"] == "medtextgrad.summary")
    trajectory = summary["output"]["trajectory"]
    # OA alone when both critics and the evidence check find nothing (3 calls), or when the updated prompt
    # regenerates the same answer (+5 update calls, +1 generation); else OA and T1 (8 more calls).
    calls_by_stop = {"both criteria report no issue": 3, "the answer did not change at iteration 1": 9}
    expected = calls_by_stop[summary["output"]["stopped"]] if len(trajectory) == 1 else 11
    assert answer["usage"]["calls"] == expected
    assert summary["output"]["selected_iteration"] in [t["iteration"] for t in trajectory]

    again = _consult(kb_dir, data_dir, "--json")
    repeated = json.loads(again.stdout)
    assert repeated["text"] == answer["text"]
    assert repeated["usage"]["cache_hits"] == answer["usage"]["calls"]


def test_consult_prints_answer_evidence_trajectory_and_usage(kb_dir, data_dir):
    result = _consult(kb_dir, data_dir)
    assert result.returncode == 0, result.stderr
    for part in ("Answer", "evidence", "Med-TextGrad:", "model calls", "icraft:"):
        assert part in result.stdout


def test_consult_input_errors_are_clean(kb_dir, data_dir, tmp_path):
    _assert_clean_failure(run_cli("consult", "   "), "empty")
    _assert_clean_failure(run_cli("consult", QUESTION, "--patients-dataset", "ddxplus"), "--patients-path")
    _assert_clean_failure(run_cli("consult", QUESTION, "--kb", str(tmp_path / "none")), "no knowledge base")
