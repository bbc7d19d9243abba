"""A case's options ranked by the differential: named by the knowledge (by name, as a general name of
subtypes, by a near-identical wording) or not, every option ranked; the uninformative ones at the named
ones' mean, their order independent of where the exam put the answer; on the real packaged knowledge, an
option outside it still ranked, with the reason in the trace."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from clinrag.consult.diseases import Disease
from clinrag.consult.reason.option_ranking import OptionNames
from clinrag.core.models import Case, Gold
from clinrag.core.settings import Settings
from clinrag.methods.base import MethodContext
from clinrag.methods.consult import ConsultConfig, ConsultMethod, build_consultant

NAMES = ["Pneumonia", "Noonan syndrome 1", "Noonan syndrome 2", "Crigler-Najjar syndrome, type I", "Asthma"]
POSTERIOR = np.array([0.4, 0.1, 0.2, 0.05, 0.25])


@pytest.fixture(scope="module")
def names() -> OptionNames:
    return OptionNames([Disease(name, "table", name) for name in NAMES])


def test_options_name_diseases_by_name_subtypes_or_wording(names: OptionNames) -> None:
    assert names.rows("pneumonia") == ([0], "name")
    assert names.rows("Noonan syndrome") == ([1, 2], "subtypes")  # a general name covers its subtypes
    assert names.rows("Crigler–Najjar syndrome") == ([3], "subtypes")  # the dash is punctuation
    assert names.rows("Pneumonias") == ([0], "fuzzy")
    assert names.rows("Biliary atresia") == ([], "not in the knowledge")
    assert names.rows("Noonan") == ([], "not in the knowledge")  # not a name followed by a qualifier


def test_every_option_is_ranked_and_the_unnamed_take_the_named_mean(names: OptionNames) -> None:
    options = {"A": "Biliary atresia", "B": "Noonan syndrome", "C": "Pneumonia", "D": "Asthma"}
    ranked = names.rank(options, POSTERIOR, "case-1")
    # named: Noonan 0.3, pneumonia 0.4, asthma 0.25 of 0.95; the unnamed one takes their mean share, 1/3
    share = {"B": 0.3 / 0.95, "C": 0.4 / 0.95, "D": 0.25 / 0.95, "A": 1 / 3}
    total = sum(share.values())
    assert [o.key for o in ranked] == ["C", "A", "B", "D"]
    assert {o.key: o.probability for o in ranked} == pytest.approx({k: v / total for k, v in share.items()})
    assert {o.key: o.how for o in ranked} == {
        "A": "not in the knowledge",
        "B": "subtypes",
        "C": "name",
        "D": "name",
    }
    assert next(o for o in ranked if o.key == "B").diseases == ("Noonan syndrome 1", "Noonan syndrome 2")


def test_uninformative_ties_do_not_follow_the_answer_position(names: OptionNames) -> None:
    texts = ["Biliary atresia", "Galactosemia", "Breast milk jaundice", "Gilbert syndrome"]
    first = [o.text for o in names.rank(dict(zip("ABCD", texts, strict=True)), None, "case-7")]
    shuffled = [o.text for o in names.rank(dict(zip("ABCD", reversed(texts), strict=True)), None, "case-7")]
    assert first == shuffled  # the order is the case's and the texts', not the exam's
    leaders = {
        names.rank(dict(zip("ABCD", texts, strict=True)), None, f"case-{k}")[0].text for k in range(40)
    }
    assert len(leaders) > 1  # and it differs from case to case
    assert all(o.probability == 0.25 for o in names.rank(dict(zip("ABCD", texts, strict=True)), None, "x"))


def test_a_consultation_ranks_every_option_even_one_outside_its_knowledge(consult_home: Path) -> None:
    method = ConsultMethod(
        build_consultant(MethodContext(settings=Settings(home=consult_home)), ConsultConfig())
    )
    options = {"A": "Pneumonia", "B": "Migraine", "C": "Kawasaki-like zebra fever", "D": "Glaucoma"}
    case = Case(
        id="cap",
        task="ddx",
        question="I have had a fever, a productive cough and pain in my chest when I breathe for three days.",
        options=options,
        gold=Gold(answer="Pneumonia"),
    )
    answer = method.answer(case)
    assert answer.result.choice == "A" and answer.result.ddx[0].name == "Pneumonia"
    assert sorted(d.name for d in answer.result.ddx) == sorted(options.values())
    (step,) = [s for s in answer.trace.steps if s.name == "consult.options"]
    reasons = {text: how for text, _, how, _ in step.output["options"]}
    assert reasons["Kawasaki-like zebra fever"] == "not in the knowledge" and reasons["Pneumonia"] == "name"
