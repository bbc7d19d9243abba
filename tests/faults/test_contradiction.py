"""Issue #32, item 11: a finding the patient's text both states and denies is uncertain, and says why. The
last statement used to win silently: "I have a high fever. I do not have a fever." reported fever absent."""

from __future__ import annotations

from pathlib import Path

import pytest

from clinrag.consult.understand.findings import FindingExtractor
from clinrag.consult.understand.vocabulary import Vocabulary
from clinrag.core.models import Case
from clinrag.core.settings import Settings
from clinrag.methods.base import MethodContext
from clinrag.methods.consult import ConsultConfig, ConsultMethod, build_consultant

STATED, DENIED = "I have a high fever", "I do not have a fever"
BOTH_ORDERS = (f"{STATED}. {DENIED}.", f"{DENIED}. {STATED}.")
FEVER = "hpo:HP:0001945"
LOW_GRADE_FEVER = "hpo:HP:0011134"  # a kind of fever in HPO


@pytest.fixture(scope="module")
def extractor() -> FindingExtractor:
    return FindingExtractor(Vocabulary.from_hpo())


@pytest.fixture(scope="module")
def consult(consult_home: Path) -> ConsultMethod:
    context = MethodContext(settings=Settings(home=consult_home))
    return ConsultMethod(build_consultant(context, ConsultConfig(questions=10)))


def _found(
    extractor: FindingExtractor, text: str
) -> dict[str, tuple[str, tuple[list[str], list[str]] | None]]:
    return {
        f.concept_id: (
            f.status,
            (f.contradiction.stated, f.contradiction.denied) if f.contradiction else None,
        )
        for f in extractor.extract(text).findings
    }


@pytest.mark.parametrize("text", BOTH_ORDERS)
def test_a_finding_stated_and_denied_is_uncertain_and_quotes_both(extractor, text: str) -> None:
    assert _found(extractor, text) == {FEVER: ("uncertain", ([STATED], [DENIED]))}


def test_a_denied_broader_finding_contradicts_its_kind_but_not_the_reverse(extractor) -> None:
    said = ("I have a mild fever", "I do not have a fever")
    assert _found(extractor, f"{said[0]}. {said[1]}.") == {
        LOW_GRADE_FEVER: ("uncertain", ([said[0]], [said[1]])),
        FEVER: ("uncertain", ([said[0]], [said[1]])),
    }
    # a fever that is not a mild one, or no pain besides the chest pain, says nothing twice
    assert _found(extractor, "I have a fever but no mild fever.") == {
        FEVER: ("present", None),
        LOW_GRADE_FEVER: ("absent", None),
    }
    assert [s for s, _ in _found(extractor, "I have chest pain. No other pain.").values()] == [
        "present",
        "absent",
    ]


def test_what_is_said_once_or_twice_the_same_way_is_unchanged(extractor) -> None:
    assert _found(extractor, f"{STATED}.") == {FEVER: ("present", None)}
    assert _found(extractor, f"{STATED}. I really have a fever.") == {FEVER: ("present", None)}
    assert _found(extractor, f"{DENIED}. No fever at all.") == {FEVER: ("absent", None)}
    # a hedge beside a firm statement is no contradiction: both stay, as before
    hedged = extractor.extract(f"Maybe a fever. {STATED}.").findings
    assert [(f.status, f.contradiction) for f in hedged] == [("uncertain", None), ("present", None)]


@pytest.mark.parametrize("text", BOTH_ORDERS)
def test_the_answer_says_why_and_the_consultation_asks_again(consult, text: str) -> None:
    answer = consult.answer(Case(id="c", question=f"I have a cough. {text}"))
    fever = next(f for f in answer.details["findings"] if f["concept"] == FEVER)
    assert fever["status"] == "uncertain"
    assert fever["contradiction"] == {"stated": [STATED], "denied": [DENIED]}
    assert f"You both report and deny fever (“{STATED}”; “{DENIED}”)" in answer.text
    evidence = next(item for item in answer.evidence if item.id == fever["evidence"])
    assert STATED in evidence.text and DENIED in evidence.text
    assert FEVER in {q["concept"] for q in answer.details["questions"]}
    # the answer settles it: fever is then what the patient answered, and not asked again
    consultant = consult.consultant
    state = consultant.start(f"I have a cough. {text}")
    consultant.answer(state, FEVER, "present")
    report, _ = consultant.report(state)
    settled = next(f for f in report.findings if f.concept == FEVER)
    assert (settled.status, settled.contradiction) == ("present", None)
    assert FEVER not in {q.concept for q in report.questions}


def test_without_a_contradiction_fever_is_present_and_not_asked(consult) -> None:
    answer = consult.answer(Case(id="c", question=f"I have a cough. {STATED}."))
    fever = next(f for f in answer.details["findings"] if f["concept"] == FEVER)
    assert (fever["status"], fever["contradiction"]) == ("present", None)
    assert "both report and deny" not in answer.text
    assert FEVER not in {q["concept"] for q in answer.details["questions"]}


def test_a_whole_text_stated_and_denied_is_not_read_as_absent_and_is_asked_back(consult) -> None:
    answer = consult.answer(Case(id="c", question=BOTH_ORDERS[0]))
    assert [(f["name"], f["status"]) for f in answer.details["findings"]] == [("fever", "uncertain")]
    assert "do not report fever" not in answer.text
    # nothing else to go on: no differential, but the contradicted finding is asked back, and a yes settles it
    assert answer.details["abstained"] and [q["concept"] for q in answer.details["questions"]] == [FEVER]
    assert answer.details["questions"][0]["gain"] > 0 and answer.details["questions"][0]["evidence"] == []
    asked = answer.details["questions"][0]["text"]  # the knowledge's own words (DDXPlus asks about fever)
    assert asked.startswith("Do you have a fever") and asked.endswith("?")
    assert f"Nothing you describe points to a diagnosis yet; please answer: {asked}" in answer.text
    assert "could not recognise" not in answer.text
    state = consult.consultant.start(BOTH_ORDERS[0])
    consult.consultant.answer(state, FEVER, "present")
    report, _ = consult.consultant.report(state)
    assert report.differential and report.abstention_reason != answer.details["abstention_reason"]
