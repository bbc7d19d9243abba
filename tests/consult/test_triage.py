"""Triage: four dispositions decided from the person first (crises, red flags), then from the differential
weighted by probability, never the least urgent advice from a text that was not understood; crises read in
English, French and Chinese by the packaged rules, each answered with its first words in the person's
language."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clinrag.consult.answer.compose import rendered, templates
from clinrag.consult.clinical import TABLES, packaged_tables
from clinrag.consult.consultant import Consultant
from clinrag.consult.reason.triage import LEVELS, Triage, TriageSettings
from clinrag.consult.understand.crises import crises_in
from clinrag.consult.understand.rules import RESOURCES, load_rules
from clinrag.core.settings import Settings
from clinrag.methods.base import MethodContext
from clinrag.methods.consult import ConsultConfig, build_consultant


def shares(emergency: float = 0.0, urgent: float = 0.0, self_care: float = 0.0) -> dict[str, float]:
    return {
        "emergency": emergency,
        "urgent": urgent,
        "soon": 1.0 - emergency - urgent - self_care,
        "self_care": self_care,
    }


def decide(differential: dict[str, float] | None, **given):
    triage = Triage(
        packaged_tables(),
        TriageSettings(emergency_above=0.5, danger_above=0.03, urgent_above=0.3, self_care_above=0.5),
    )
    options = {"crises": [], "red_flags": [], "understood": True, "abstained": False} | given
    return triage.decide(shares=differential, **options)


def test_a_small_chance_of_a_condition_that_kills_raises_care_and_of_a_mild_one_does_not() -> None:
    assert decide(shares(emergency=0.04, self_care=0.9)).disposition == "urgent"
    assert decide(shares(urgent=0.04, self_care=0.9)).disposition == "self_care"
    assert decide(shares(emergency=0.6)).disposition == "emergency"
    assert decide(shares(urgent=0.4)).disposition == "urgent"
    assert decide(shares(self_care=0.3)).disposition == "soon"


def test_nothing_understood_or_an_abstention_is_never_self_care() -> None:
    blind = decide(None, understood=False)
    assert blind.disposition == "urgent" and not blind.assessed
    assert [reason.kind for reason in blind.reasons] == ["not_assessed"]
    unsure = decide(shares(self_care=0.9), abstained=True)
    assert unsure.disposition == "soon" and unsure.assessed
    with pytest.raises(ValueError, match="never"):
        TriageSettings(not_assessed="self_care")


def test_a_red_flag_outranks_a_mild_differential() -> None:
    told = decide(shares(self_care=0.9), red_flags=[("emergency", "stridor", ["finding:x"])])
    assert told.disposition == "emergency" and told.reasons[0].kind == "red_flag"


@pytest.mark.parametrize(
    ("language", "text", "crises"),
    [
        (
            "en",
            "I took a whole box of paracetamol an hour ago because I want to die",
            ["overdose", "self_harm"],
        ),
        ("en", "my 2 year old chewed some of his grandma's heart tablets", ["poisoning"]),
        ("en", "I have no thoughts of harming myself, I just feel low", []),
        ("en", "I had food poisoning last week and I am fine now", []),
        ("en", "I don't know if she swallowed any of the dishwasher tablets", ["poisoning"]),
        (
            "fr",
            "J'ai avalé toute la plaquette de somnifères, je ne veux plus vivre",
            ["overdose", "self_harm"],
        ),
        ("fr", "Je n'ai pas d'idées suicidaires, mais je suis fatigué", []),
        ("zh", "我吃了一整瓶安眠药，不想活了", ["overdose", "self_harm"]),
        ("zh", "我没有自杀的想法，只是睡不好", []),
    ],
)
def test_crises_are_read_in_three_languages_and_a_denial_is_not_one(
    language: str, text: str, crises: list[str]
) -> None:
    assert [mention.crisis for mention in crises_in(text, load_rules(language))] == crises


def test_every_crisis_has_words_first_words_and_a_source_in_every_language() -> None:
    table = [json.loads(line) for line in (TABLES / "crisis.jsonl").read_text(encoding="utf-8").splitlines()]
    assert {row["crisis"] for row in table} == set(packaged_tables().crises)
    for row in table:
        assert "https://" in row["source"] or "http://" in row["source"], row["crisis"]
    for language in ("en", "fr", "zh"):
        said = templates(language)
        assert set(load_rules(language).crises) <= {row["crisis"] for row in table}, language
        for row in table:
            assert f"crisis_{row['advice']}" in said, (language, row["advice"])
        for level in LEVELS:
            assert f"disposition_{level}" in said and (level == "emergency" or f"safety_net_{level}" in said)
        assert (RESOURCES / language / "crisis.json").is_file()


@pytest.fixture(scope="module")
def consultant(consult_home: Path) -> Consultant:
    return build_consultant(MethodContext(settings=Settings(home=consult_home)), ConsultConfig())


def test_an_overdose_told_as_a_suicide_attempt_is_an_emergency_with_a_crisis_line(
    consultant: Consultant,
) -> None:
    """The issue's case: an overdose written as a suicide attempt was told "routine", nothing understood."""
    text = "I swallowed about 30 paracetamol tablets two hours ago. I don't want to be alive anymore."
    report, evidence = consultant.report(consultant.start(text))
    triage = report.triage
    assert triage.disposition == "emergency"
    assert {crisis.crisis for crisis in triage.crises} == {"overdose", "self_harm"}
    cited = {item.id: item for item in evidence}
    assert all("nice.org.uk" in cited[e].provenance["title"] for c in triage.crises for e in c.evidence)


def test_the_answer_opens_with_the_crisis_words(consultant: Consultant) -> None:
    report, evidence = consultant.report(consultant.start("I took too many of my sleeping pills"))
    english = rendered(report, "en", {item.id: item.text for item in evidence})
    assert english.sentences[0].text == templates("en")["crisis_poisoning"]
    assert english.sentences[0].evidence == ["clinical:crisis:overdose"]


def test_a_mild_cold_is_self_care_and_a_vague_text_is_not(consultant: Consultant) -> None:
    cold, _ = consultant.report(
        consultant.start("I have had a runny nose, sneezing and a mild sore throat for two days. No fever.")
    )
    assert cold.triage.disposition == "self_care", cold.triage.reasons
    assert any(reason.kind == "differential" for reason in cold.triage.reasons)
    vague, _ = consultant.report(
        consultant.start("I just feel really weird and not right since this morning")
    )
    assert vague.triage.disposition != "self_care"
