"""`clinrag consult` as a user runs it, through typer's CliRunner, on the packaged knowledge (the session's
clinrag home, where the disease model is built once): the README's example, an interactive session answered
through standard input, and clean errors for bad input, non-UTF-8 standard input in a real subprocess."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from clinrag.eval.datasets.phenopackets import onset_code, read_phenopacket
from clinrag.terms.hpo import ONSET_CLASSES
from tests.app.test_cli import _assert_clean_failure, invoke_cli
from tests.consult.test_consult import README_EXAMPLE, UNCITED_KINDS


@pytest.fixture(scope="module")
def home(consult_home):
    return {"CLINRAG_HOME": str(consult_home)}


def test_readme_example_answer(home) -> None:
    result = invoke_cli("consult", README_EXAMPLE, "--json", env=home)
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["result"]["ddx"][0]["name"] == "Pneumonia"
    known = {e["id"] for e in answer["evidence"]}
    for sentence in answer["details"]["sentences"]:
        assert sentence["evidence"] or sentence["kind"] in UNCITED_KINDS
        assert set(sentence["evidence"]) <= known
        assert sentence["text"] in answer["text"]
    printed = invoke_cli("consult", README_EXAMPLE, env=home)
    assert printed.returncode == 0, printed.stderr
    for part in (
        "findings",
        "pleuritic chest pain",
        "differential",
        "Pneumonia",
        "Answer",
        "see a doctor",
        "http",
    ):
        assert part in printed.stdout
    # a reader gets numbered references with their sources; the raw ids stay in --json
    text, references = printed.stdout.split("Answer", 1)[1].split("References", 1)
    assert "[1" in text and "graph:" not in text and "finding:" not in text
    # [1] is the can't-miss guideline the urgency sentence cites first; what the patient said follows
    assert "[1] Pneumonia: a diagnosis not to miss" in references and "fever: present" in references
    # every fact of the knowledge base names its documents with their links; nothing is cited to test data
    assert "faker" not in references.lower() and "https://" in references


def test_interactive_session_through_stdin(home) -> None:
    # "maybe" is not an answer: the second question is asked again (a "yes" to the first, malaise, would
    # settle pneumonia at once)
    replies = "no\nmaybe\nno\nno\n"
    result = invoke_cli("consult", "-i", README_EXAMPLE, "--max-questions", "3", stdin=replies, env=home)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    asked = [line.split(" (yes")[0].split(". ", 1) for line in out.splitlines() if line.startswith("Q")]
    assert [number for number, _ in asked] == ["Q1", "Q2", "Q2", "Q3"]
    assert len({text for _, text in asked}) == 3  # a question answered is not asked again
    assert "please answer yes, no or don't know" in out and "question budget is spent" in out
    final = out.split("Answer", 1)[1]
    assert "You do not report" in final  # the "no" is part of the final answer


def test_an_answer_that_is_a_red_flag_ends_the_interview_at_once(home) -> None:
    # on DDXPlus's table alone, whose questions reach a red flag (confusion) by the third: the mechanism is
    # tested, not which question the default knowledge asks first
    text = "I have a sore throat and my voice is hoarse."
    args = ("consult", "-s", "packaged:ddxplus", "-i", text, "--max-questions", "5")
    result = invoke_cli(*args, stdin="yes\nyes\nyes\nyes\nyes\n", env=home)
    assert result.returncode == 0, result.stderr
    asked = [line for line in result.stdout.splitlines() if line.startswith("Q")]
    flag = next(line for line in result.stdout.splitlines() if "red flag:" in line)
    # the interview stops at the answer that raised it, after saying how urgently to act
    assert flag.startswith(f"stopping after {len(asked)} questions") and len(asked) < 5
    before = result.stdout.split(flag)[0]
    assert "Call emergency services or go to the emergency department now." in before.split(asked[-1])[1]


def test_input_errors_are_clean(home) -> None:
    _assert_clean_failure(invoke_cli("consult", "   ", env=home), "empty")
    _assert_clean_failure(invoke_cli("consult", "cough", "--patients", "ddxplus", env=home), "DATASET:PATH")
    _assert_clean_failure(invoke_cli("consult", "cough", "--patients", "synthetic:x", env=home), "synthetic")
    raw = subprocess.run(  # the bytes of a real process's standard input
        [sys.executable, "-m", "clinrag", "consult", "-"],
        input=b"\xff fever",
        capture_output=True,
        timeout=120,
    )
    assert raw.returncode == 2 and b"not UTF-8" in raw.stderr and b"Traceback" not in raw.stderr


def test_a_patient_given_as_hpo_terms(home, data_dir) -> None:
    marfan = ["--hpo", "HP:0001166,HP:0001083", "--hpo", "HP:0000767,HP:0002616", "--not", "HP:0001249"]
    juvenile = ["--hpo", "HP:0003621"]  # an onset class: when the illness began, not a finding
    result = invoke_cli("consult", *marfan, *juvenile, "--json", env=home)
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["result"]["ddx"][0]["code"] == "OMIM:154700", answer["result"]["ddx"][:3]
    assert answer["details"]["onset_class"] == "Juvenile onset" and not answer["details"]["not_understood"]
    assert "finding:hpo:HP:0001166" in answer["text"]  # the findings keep their HPO ids to the answer
    packet = next((data_dir / "phenopackets" / "AAGAB").glob("*.json"))
    result = invoke_cli("consult", "--phenopacket", str(packet), "--json", env=home)
    assert result.returncode == 0, result.stderr
    details = json.loads(result.stdout)["details"]
    assert details["findings"]
    onset = onset_code(read_phenopacket(packet))  # the packet's onset, as an HPO onset class
    assert onset and details["onset_class"] == ONSET_CLASSES[onset].label
    refused = invoke_cli("consult", "--hpo", "HP:12", env=home)
    assert refused.returncode == 2 and "not an HPO term id" in refused.stderr
    empty = invoke_cli("consult", env=home)
    assert empty.returncode == 2 and "give a text, --hpo or --phenopacket" in empty.stderr
