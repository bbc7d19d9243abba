import json

import pytest

from clinrag.core.errors import AnswerParseError
from clinrag.core.models import Case
from clinrag.tasks.parsing import parse_choice
from clinrag.tasks.templates import task_prompt

OPTIONS = {"A": "Ampicillin", "B": "Ceftriaxone", "C": "Ciprofloxacin", "D": "Doxycycline"}


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('{"answer": "C"}', "C"),
        ("The answer is B because ...", "B"),
        ("Answer: (D)", "D"),
        ("C. Ciprofloxacin is the drug of choice.", "C"),
        ("A", "A"),
        ("Given the findings, I would pick (B) here.", "B"),
        ("Treat with doxycycline for 7 days.", "D"),
        ("The answer is a beta-lactam: ceftriaxone.", "B"),
    ],
)
def test_parses_the_committed_option(text, key):
    assert parse_choice(text, OPTIONS) == key


@pytest.mark.parametrize(
    "text",
    [
        "",
        "I am not sure.",
        "Either A. or B. could be right.",  # two keys marked
        "Ampicillin or ceftriaxone would both work.",  # two option texts
        "Amoxicillin.",
    ],
)
def test_no_single_commitment_is_a_typed_failure(text):
    with pytest.raises(AnswerParseError) as caught:
        parse_choice(text, OPTIONS)
    assert caught.value.raw == text


def test_prompt_lists_every_option_of_a_real_question(data_dir):
    row = json.loads((data_dir / "medqa" / "us_4options_test.jsonl").read_text().splitlines()[0])
    case = Case(id="q", task="multiple_choice", question=row["question"], options=row["options"])
    prompt = task_prompt(case).render(case)
    for key, text in row["options"].items():
        assert f"{key}. {text}" in prompt
    assert row["question"].strip() in prompt
