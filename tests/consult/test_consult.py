"""The grounded consultation on the real packaged knowledge (clinrag's knowledge base, HPO disease
annotations, DDXPlus's table) and on the real DDXPlus knowledge and patients: findings, differential,
questions, steps, abstention, evidence that resolves, leave-case-out experience, the interactive state. The
mechanisms a source's kind of list calls for are checked on that source alone: DDXPlus's declared share and
its questions' choices on DDXPlus's table, the salience order of a plain symptom list on the test-data table
(`packaged:faker-diseases`, opt-in: the only salience-ordered plain list)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import numpy as np
import pytest

from clinrag.consult.answer.compose import numbered, reference, rendered, templates
from clinrag.consult.answer.report import Sentence
from clinrag.consult.diseases import sex_blocks, sex_of
from clinrag.core.errors import DataFormatError
from clinrag.core.models import Case
from clinrag.core.settings import Settings
from clinrag.eval.datasets import load_dataset
from clinrag.graph.importers.ddxplus import PACKAGED as DDXPLUS_PACKAGED
from clinrag.knowledge.builder import KnowledgeBaseBuilder
from clinrag.knowledge.tagging import EmbeddingTagger
from clinrag.methods.base import MethodContext
from clinrag.methods.consult import ConsultConfig, ConsultMethod, build_consultant

README_EXAMPLE = (
    "I am 45 and have had a fever, a productive cough and pain on the right side of my chest when I breathe "
    "for three days. What could this be and what should I do?"
)
# sentences resting on no evidence: advice (to see a doctor; when to seek help if it does not settle), the
# note on past patients, an abstention
UNCITED_KINDS = {"advice", "safety_net", "experience", "abstention"}


@pytest.fixture(scope="module")
def packaged(consult_home: Path) -> ConsultMethod:
    context = MethodContext(settings=Settings(home=consult_home))
    return ConsultMethod(build_consultant(context, ConsultConfig()))


@pytest.fixture(scope="module")
def ddxplus_only(consult_home: Path) -> ConsultMethod:
    context = MethodContext(settings=Settings(home=consult_home))
    return ConsultMethod(build_consultant(context, ConsultConfig(sources="packaged:ddxplus")))


@pytest.fixture(scope="module")
def plain_list(consult_home: Path) -> ConsultMethod:
    context = MethodContext(settings=Settings(home=consult_home))
    sources = "packaged:faker-diseases,packaged:ddxplus"
    return ConsultMethod(build_consultant(context, ConsultConfig(sources=sources)))


def ask(method: ConsultMethod, text: str):
    return method.answer(Case(id="c", question=text))


def test_readme_example_is_answered_from_structure_with_every_sentence_cited(packaged) -> None:
    answer = ask(packaged, README_EXAMPLE)
    details = answer.details
    present = {f["name"] for f in details["findings"] if f["status"] == "present"}
    assert {"fever", "productive cough", "pleuritic chest pain"} <= present
    assert details["duration"] == "for 3 days"
    # three days of fever, productive cough and pleuritic pain: pneumonia first, well above pericarditis
    # (whose DDXPlus list has no cough and no fever) and tuberculosis (which presents after weeks)
    share = {d["name"]: d["probability"] for d in details["differential"]}
    assert details["differential"][0]["name"] == "Pneumonia"
    assert share["Pneumonia"] > 1.5 * share.get("Pericarditis", 0.0) and share.get("Tuberculosis", 0.0) < 0.05
    # a productive cough and pleuritic pain say "cough" and "chest pain": not typical findings left unsaid
    unsaid = {name.lower() for name in details["differential"][0]["not_reported"]}
    assert unsaid and not unsaid & {"cough", "chest pain"}
    assert answer.result.ddx[0].name == details["differential"][0]["name"]
    known = set(answer.evidence_ids)
    for sentence in details["sentences"]:
        assert set(sentence["evidence"]) <= known
        assert sentence["evidence"] or sentence["kind"] in UNCITED_KINDS, sentence
    assert "patient base" in details["experience"] and "synthetic" not in answer.text.lower()
    steps = details["next_steps"]
    assert steps and all(s["evidence"] in known for s in steps)
    assert {s["kind"] for s in steps} <= {"test", "care"}  # the knowledge base names no drug, in words only
    cited = {e.id: e for e in answer.evidence}
    assert all(cited[s["evidence"]].provenance["documents"] for s in steps)
    assert not any("faker" in e.provenance.get("title", "").lower() for e in answer.evidence)
    assert len(details["questions"]) == 3 and all(q["text"].endswith("?") for q in details["questions"])


def test_a_source_that_declares_its_patients_share_of_a_listed_finding_is_not_diluted_by_list_length(
    ddxplus_only, plain_list, packaged
) -> None:
    """DDXPlus's patients show about 0.68 of their condition's listed symptoms however long the list:
    Pneumonia (14 listed) and Pericarditis (5) explain pleuritic chest pain alike; a plain list that declares
    no share keeps its typical 0.8 for a first-listed finding; the knowledge base's finding takes the share
    its frequency class states."""
    differential = ddxplus_only.consultant.differential
    rows = {d.name: row for row, d in enumerate(differential.model.diseases)}
    pleuritic = differential.likelihood("hpo:HP:0033771")
    assert pleuritic[rows["Pneumonia"]] == pleuritic[rows["Pericarditis"]] == pytest.approx(0.68)
    differential = plain_list.consultant.differential
    rows = {d.name: row for row, d in enumerate(differential.model.diseases)}
    bronchitis = differential.model.diseases[rows["Acute Bronchitis"]]
    first = differential.vocabulary.lookup(bronchitis.symptoms[0])
    assert differential.likelihood(first.id)[rows["Acute Bronchitis"]] == pytest.approx(0.8)
    differential = packaged.consultant.differential
    model = differential.model
    checked = 0
    for row, disease in enumerate(model.diseases):
        if disease.source != "conditions" or checked == 20:
            continue
        for symptom, share, origin in zip(
            disease.symptoms, disease.frequencies, disease.origins, strict=True
        ):
            concept = differential.vocabulary.lookup(symptom)
            if origin == "conditions" and concept is not None and share < 1:
                stated = differential.likelihood(concept.id)[row]
                assert stated >= share - 1e-9, (disease.name, symptom)  # its share, or a narrower one's
                checked += 1
                break
    assert checked == 20


def test_negation_lowers_the_diseases_that_list_the_denied_finding(packaged) -> None:
    with_fever = ask(packaged, "I have a cough and a fever.")
    without = ask(packaged, "I have a cough but no fever.")
    statuses = {f["name"]: f["status"] for f in without.details["findings"]}
    assert statuses == {"cough": "present", "fever": "absent"}

    def probability(answer, name: str) -> float:
        return next((d["probability"] for d in answer.details["differential"] if d["name"] == name), 0.0)

    febrile = next(
        d["name"]
        for d in with_fever.details["differential"]
        if "fever" in [s.lower() for s in d["supporting"]]
    )
    assert probability(without, febrile) < probability(with_fever, febrile)
    top = without.details["differential"][0]
    assert "fever" in top["against"] or "fever" not in [s.lower() for s in top["supporting"]]


def test_nothing_understood_abstains_and_asks_for_what_would_help(packaged) -> None:
    answer = ask(packaged, "Hello there, can you help me with something?")
    assert answer.error.startswith("abstained: no finding")
    assert answer.result.ddx == [] and answer.details["differential"] == []
    assert "main symptoms" in answer.text and "see a doctor" in answer.text


def test_an_answer_updates_the_state_and_is_not_asked_again(packaged) -> None:
    consultant = packaged.consultant
    state = consultant.start(README_EXAMPLE)
    first, _ = consultant.report(state)
    question = first.questions[0]
    consultant.answer(state, question.concept, "uncertain")
    second, _ = consultant.report(state)
    assert question.concept not in {q.concept for q in second.questions}
    consultant.answer(state, second.questions[0].concept, "present")
    third, _ = consultant.report(state)
    assert third.differential[0].probability >= second.differential[0].probability


def test_french_and_chinese_words_are_read_and_answered_in_their_language(packaged) -> None:
    """The README example in each language's words: read with that language's rules, answered with its
    templates, and it reaches the same findings and leading diagnoses as the English."""
    french = packaged.answer(
        Case(
            id="fr",
            language="fr",
            question="J'ai 45 ans, de la fièvre, une toux et une douleur à la poitrine quand je respire, "
            "depuis trois jours.",
        )
    )
    chinese = packaged.answer(Case(id="zh", language="zh", question="我45岁，发烧、咳嗽、呼吸时胸痛三天了。"))
    english = packaged.answer(
        Case(
            id="en",
            question="I am 45 and have had a fever, a cough and chest pain when I breathe for three days.",
        )
    )
    assert "Vous signalez" in french.text and "consultez un médecin" in french.text
    assert "您提到" in chinese.text and "请去看医生" in chinese.text
    for answer in (french, chinese):
        said = {f["concept"] for f in answer.details["findings"]}
        assert said == {f["concept"] for f in english.details["findings"]}
        assert answer.details["differential"][0]["name"] == english.details["differential"][0]["name"]
    assert (french.details["duration"], chinese.details["duration"]) == ("depuis 3 jours", "持续3天")


def test_ddxplus_knowledge_with_experience_leaves_the_case_out(consult_home: Path, data_dir: Path) -> None:
    folder = data_dir / "ddxplus"
    text = load_dataset("ddxplus-text", folder)
    context = MethodContext(settings=Settings(home=consult_home), experience=text.records, labels=text.labels)
    method = ConsultMethod(build_consultant(context, ConsultConfig(sources=f"ddxplus:{folder}")))
    experience = method.consultant.differential.experience
    assert experience is not None and experience.patients.sum() == len(text.records)
    case = text.cases[0]
    left_out = method.consultant.leaving_out(case.id).differential.experience
    assert left_out.patients.sum() == len(text.records) - 1
    assert f"reflect {len(text.records) - 1} past patients" in method.answer(case).text
    answers = [method.answer(c) for c in text.cases[:20]]
    correct = sum(a.result.choice == c.gold.answer for a, c in zip(answers, text.cases, strict=False))
    assert correct >= 14  # experience and text understanding together; knn-vote on codes gets ~0.98


def test_what_goes_unsaid_counts_against_the_diseases_that_list_it(packaged) -> None:
    differential = packaged.consultant.differential
    nothing_said = differential.unmentioned(())
    cough = differential.vocabulary.lookup("cough").id
    penalty = nothing_said - differential.unmentioned([cough])  # log(1 − α · P(cough | d)) per disease
    listing, _, _ = differential.listings.of_concept(cough)
    others = np.setdiff1d(np.arange(len(penalty)), listing)
    assert penalty[listing].max() < penalty[others].min() < 0
    # the sum over every finding counted, as computed from the listings, is the sum of the findings' terms
    terms = sum(
        nothing_said - differential.unmentioned([concept]) for concept in differential.listings.concepts
    )
    assert np.allclose(terms, nothing_said)
    silent = copy.copy(differential)
    silent.mention_rate = 0.0
    assert not silent.unmentioned(()).any()


def test_a_finding_listed_first_says_more_for_its_disease(plain_list) -> None:
    packaged = plain_list
    model = packaged.consultant.differential.model
    table = {d.name: d for d in model.diseases if d.source == "faker-diseases"}
    assert table["Angina Pectoris"].symptoms[0] == "Chest Pain" and table["Angina Pectoris"].ranked == 5
    assert table["Asthma"].symptoms.index("Chest Pain") == 3
    differential = [d["name"] for d in ask(packaged, "I have chest pain.").details["differential"]]
    leading = [table[name].symptoms[0] for name in differential[:3]]
    assert leading == ["Chest Pain"] * 3, differential
    rows = {d.name: row for row, d in enumerate(model.diseases)}
    chest_pain = packaged.consultant.differential.vocabulary.lookup("chest pain").id
    posterior = packaged.consultant.differential.posterior({chest_pain: True})
    assert posterior[rows["Angina Pectoris"]] > posterior[rows["Asthma"]]


def test_a_knowledge_base_is_quoted_beside_the_leading_diagnoses(
    consult_home: Path, data_dir: Path, minilm_embedder, tmp_path: Path
) -> None:
    """The DDXPlus condition knowledge built as `clinrag kb build` builds it; its statements are quoted and
    cited with the leading diagnoses and leave the probabilities as they were."""
    KnowledgeBaseBuilder(
        embedder=minilm_embedder, tagger=EmbeddingTagger(minilm_embedder), rewriter=None
    ).build([data_dir / "ddxplus" / "release_conditions.json"], tmp_path / "kb", progress=False)
    folder = data_dir / "ddxplus"
    context = MethodContext(settings=Settings(home=consult_home))
    plain = ConsultMethod(build_consultant(context, ConsultConfig(sources=f"ddxplus:{folder}")))
    quoting = ConsultMethod(
        build_consultant(context, ConsultConfig(sources=f"ddxplus:{folder}", kb=str(tmp_path / "kb")))
    )
    text = "I have a cough, a fever and I am short of breath."
    without, answer = ask(plain, text), ask(quoting, text)
    assert [d["probability"] for d in answer.details["differential"]] == [
        d["probability"] for d in without.details["differential"]
    ]
    evidence = {item.id: item for item in answer.evidence}
    for diagnosis in answer.details["differential"][:3]:
        assert diagnosis["statements"], diagnosis["name"]
        for item in diagnosis["statements"]:
            assert (
                evidence[item].kind == "statement"
                and diagnosis["name"].lower() in evidence[item].text.lower()
            )
    quoted = [s for s in answer.details["sentences"] if s["text"].startswith("The knowledge base says about")]
    assert len(quoted) == 3 and all(len(s["evidence"]) == 1 for s in quoted)
    assert without.details["differential"][0]["statements"] == []
    # findings named by DDXPlus questions read as findings, and their questions are DDXPlus's own
    assert [f["name"] for f in answer.details["findings"]] == ["cough", "fever", "dyspnea"]
    assert all(
        q["text"].endswith("?") and "do you have have" not in q["text"].lower()
        for q in answer.details["questions"]
    )


def test_conditions_of_the_other_sex_are_nearly_ruled_out(packaged) -> None:
    assert (sex_of("O24.4"), sex_of("N40"), sex_of("C56"), sex_of("J18.9"), sex_of(None)) == (
        "female",
        "male",
        "female",
        None,
        None,
    )
    differential = packaged.consultant.differential
    diseases = differential.model.diseases
    gestational = next(row for row, d in enumerate(diseases) if (d.icd10 or "").startswith("O24.4"))
    diabetes = next(row for row, d in enumerate(diseases) if (d.icd10 or "").startswith("E11"))
    thirst = {differential.vocabulary.lookup("polydipsia").id: True}
    unknown, man = differential.posterior(thirst), differential.posterior(thirst, "male")
    assert man[gestational] < unknown[gestational] / 50
    assert man[diabetes] > unknown[diabetes]
    answer = ask(packaged, "I'm a 54-year-old man. I've been thirsty all the time and I've lost weight.")
    assert diseases[gestational].name not in [d["name"] for d in answer.details["differential"]]


def test_a_disease_listing_only_the_broader_finding_explains_it_less(plain_list) -> None:
    differential = plain_list.consultant.differential
    rows = {d.name: row for row, d in enumerate(differential.model.diseases)}
    barking = differential.likelihood(differential.vocabulary.lookup("barking cough").id)
    assert barking[rows["Croup"]] == pytest.approx(2 * barking[rows["Acute Bronchitis"]])  # lists "Cough"


def test_a_disease_a_common_table_names_is_common_whichever_source_is_read_first(packaged) -> None:
    """HPO is read before DDXPlus: myasthenia gravis, in HPO, DDXPlus and the knowledge base, is a common
    table's disease, not a rare one; among common diseases the base rate follows how common the knowledge
    base says each is in primary care (one it says nothing of counts as the median)."""
    model = packaged.consultant.differential.model
    assert model.specs.index("packaged:hpo-diseases") < model.specs.index("packaged:ddxplus")
    diseases = {d.name: d for d in model.diseases}
    rates = dict(zip((d.name for d in model.diseases), model.base_rates(), strict=True))
    assert {"conditions", "hpo-diseases", "ddxplus"} <= set(diseases["Myasthenia gravis"].origins)
    assert not diseases["Myasthenia gravis"].rare
    assert (
        rates["Myasthenia gravis"] > rates["Marfan syndrome"]
        and rates["Pneumonia"] > 100 * rates["Marfan syndrome"]
    )
    prevalence = [d.prevalence for d in model.diseases if d.prevalence]
    assert max(prevalence) > 100 * min(prevalence)
    flat = dict(zip((d.name for d in model.diseases), model.base_rates(prevalence_exponent=0.0), strict=True))
    assert flat["Myasthenia gravis"] == flat["Pneumonia"]
    assert rates["Pneumonia"] > rates["Myasthenia gravis"]  # common, where myasthenia is rare


def test_a_finding_two_reported_findings_share_supports_a_diagnosis_once(packaged) -> None:
    """Croup's one "Cough" explains both "cough" and "barking cough", and the disease table's and DDXPlus's
    words for the barking cough are one finding to a reader: each is named once."""
    text = "My 3-year-old has a cough that sounds like a seal barking, with a runny nose."
    differential = ask(packaged, text).details["differential"]
    croup = next(d for d in differential if d["name"] == "Croup")
    assert "barking cough" in croup["supporting"]
    for diagnosis in differential:
        assert len(diagnosis["supporting"]) == len(set(diagnosis["supporting"])), diagnosis


def test_a_body_part_before_the_cue_word_wins_over_the_cue_word_alone(packaged) -> None:
    """The packaged knowledge names "swelling" itself: the construction that read the lips with it is the
    more specific mention of the same words, and wins."""
    extractor = packaged.consultant.extractors("en")
    assert extractor.vocabulary.lookup("swelling") is not None
    found = extractor.extract("My lips are swelling.").findings
    assert [(f.concept, f.text) for f in found] == [("Swollen lip", "swelling")]


def test_each_choice_a_ddxplus_question_names_answers_it(ddxplus_only) -> None:
    packaged = ddxplus_only
    """ "Nasal congestion or a clear runny nose?" is answered yes by a runny nose: URTI, which lists that
    question, explains a runny nose as a disease listing a broader finding does (half its share), where
    before it took the leak of a finding it does not list."""
    differential = packaged.consultant.differential
    rows = {d.name: row for row, d in enumerate(differential.model.diseases)}
    question = differential.vocabulary.by_code("E_181")
    assert question.question in differential.model.diseases[rows["URTI"]].symptoms
    runny = differential.likelihood(differential.vocabulary.lookup("runny nose").id)
    congested = differential.likelihood(question.id)
    assert runny[rows["URTI"]] == pytest.approx(congested[rows["URTI"]] / 2)
    # a noise on breathing in after coughing fits is whooping cough's "noisy breathing after coughing spells"
    stridor = differential.likelihood(differential.vocabulary.lookup("stridor").id)
    assert stridor[rows["Whooping cough"]] > 10 * stridor[rows["Pneumonia"]]


def test_the_report_is_data_and_compose_alone_puts_it_into_words(packaged) -> None:
    consultant = packaged.consultant
    report, evidence = consultant.report(consultant.start(README_EXAMPLE))
    assert (report.duration_days, report.duration_written) == (3.0, "for three days")
    assert report.sentences == [] and report.duration is None and report.experience == ""
    assert all(q.text == "" for q in report.questions)
    texts = {item.id: item.text for item in evidence}
    english, french = rendered(report, "en", texts), rendered(report, "fr", texts)
    assert (english.duration, french.duration) == ("for 3 days", "depuis 3 jours")
    # the knowledge's own question where it words one (DDXPlus), else the template's
    assert [q.text for q in english.questions] == [
        q.asked or f"Do you have {q.finding}?" for q in report.questions
    ]
    assert [q.text for q in french.questions] == [f"Avez-vous : {q.finding} ?" for q in report.questions]
    assert french.sentences[0].kind == "urgency"  # how urgently comes first, in French
    assert french.sentences[0].text == templates("fr")[f"disposition_{report.triage.disposition}"]
    findings = next(s for s in french.sentences if s.kind == "finding")
    assert findings.text.startswith("Vous signalez") and report.sentences == []


def test_a_reader_gets_numbered_references_with_their_sources(packaged) -> None:
    answer = ask(packaged, README_EXAMPLE)
    sentences = [Sentence.model_validate(s) for s in answer.details["sentences"]]
    text, cited = numbered(sentences)
    # every id cited, numbered where first cited, each once
    first_cited = list(dict.fromkeys(item for s in sentences for item in s.evidence))
    assert cited == first_cited
    assert text.startswith(sentences[0].text + " [1–") and "graph:" not in text and "finding:" not in text
    by_id = {item.id: item for item in answer.evidence}
    guideline = by_id[cited[0]]  # the first sentence says how urgently, citing the can't-miss table
    assert reference(guideline) == f"{guideline.text} — {guideline.provenance['title']}"
    first_said = next(i for i in cited if i.startswith("finding:"))
    said = reference(by_id[first_said])
    assert said.endswith("— what you said") and "fever" in said
    fact = next(
        by_id[i]
        for i in cited
        if i.startswith("graph:Pneumonia|HAS_SYMPTOM") and by_id[i].source == "graph:conditions"
    )
    assert reference(fact) == f"{fact.text} — {fact.provenance['title']}"
    # a knowledge-base fact names its documents with their links, and says how often in words
    assert fact.provenance["documents"] and all(
        d["url"].startswith("http") for d in fact.provenance["documents"]
    )
    assert fact.provenance["documents"][0]["url"] in fact.provenance["title"]
    assert re.search(r"\((in all|in most|in many|in some|in few) people with it\)", fact.text)
    assert reference(by_id[first_said], "fr").endswith("— ce que vous avez dit")


def test_a_disease_named_in_two_sources_cites_each_finding_to_the_source_that_lists_it(
    consult_home: Path,
) -> None:
    """Pneumonia is in the disease table and in DDXPlus: a finding only DDXPlus lists is cited to DDXPlus and
    named as a finding, not by the question that asks about it."""
    context = MethodContext(settings=Settings(home=consult_home))
    sources = "packaged:faker-diseases,packaged:hpo-diseases,packaged:ddxplus"
    method = ConsultMethod(build_consultant(context, ConsultConfig(sources=sources)))
    answer = ask(method, README_EXAMPLE)
    facts = {e.id: e for e in answer.evidence if e.id.startswith("graph:Pneumonia|HAS_SYMPTOM")}
    by_source = {e.source for e in facts.values()}
    assert by_source == {"graph:faker-diseases", "graph:ddxplus"}
    for fact in facts.values():
        title = fact.provenance["title"]
        assert ("DDXPlus" in title) == (fact.source == "graph:ddxplus"), fact
        assert "?" not in fact.text, fact.text


def test_a_risk_factor_the_patient_gives_supports_the_diseases_it_favours_cited_to_its_source(
    ddxplus_only,
) -> None:
    """Heavy drinking is a DDXPlus risk factor of Boerhaave's syndrome (an antecedent, not a symptom): said,
    it raises Boerhaave against a disease of the same symptoms DDXPlus names no such risk factor for, and is
    cited to the DDXPlus table; denied, it counts against it."""
    packaged = ddxplus_only
    text = "I threw up really hard several times and now I have a terrible pain in the middle of my chest."
    without = {d["name"]: d for d in ask(packaged, text).details["differential"]}
    answer = ask(packaged, text + " I have been drinking heavily.")
    differential = {d["name"]: d for d in answer.details["differential"]}
    boerhaave = differential["Boerhaave"]
    assert "problematic alcohol consumption" in boerhaave["supporting"]

    def odds(p: float) -> float:
        return p / (1 - p)

    assert odds(boerhaave["probability"]) > 2 * odds(without["Boerhaave"]["probability"])
    [fact] = [e for e in answer.evidence if e.id == "graph:Boerhaave|risk factor|" + boerhaave_e78()]
    assert fact.source == "graph:ddxplus" and "DDXPlus" in fact.provenance["title"]
    assert fact.text == "Boerhaave has risk factor problematic alcohol consumption"
    denied = {d["name"]: d for d in ask(packaged, text + " I don't drink heavily.").details["differential"]}
    assert denied["Boerhaave"]["against"] == ["problematic alcohol consumption"]
    assert denied["Boerhaave"]["probability"] < without["Boerhaave"]["probability"]


def boerhaave_e78() -> str:
    """DDXPlus's question for heavy drinking (E_78), as the packaged release words it."""
    evidences = json.loads((DDXPLUS_PACKAGED / "release_evidences.json").read_text(encoding="utf-8"))
    return " ".join(evidences["E_78"]["question_en"].split())


def test_the_one_an_account_is_about_has_the_findings_its_first_sentence_gives_them(packaged) -> None:
    """ "My son" is someone else's cue (ConText FAMILY) when the writer is the patient, and names the patient
    when the account is about the son; a relative mentioned after that is still someone else."""

    def findings(text: str) -> dict[str, str]:
        return {f["name"]: f["status"] for f in ask(packaged, text).details["findings"]}

    assert findings("My son has a fever.") == {"fever": "present"}
    assert findings("My son has a fever. My daughter had a rash last week.") == {"fever": "present"}
    assert findings("I have a fever; my son had a cough last week.") == {"fever": "present"}


def test_questions_are_put_to_whom_the_account_is_about(packaged) -> None:
    child = ask(packaged, "My 3-year-old has had a barking cough since last night and a fever.")
    assert child.details["subject"] == "child" and child.details["questions"]
    assert all(q["text"].startswith("Does your child have ") for q in child.details["questions"])
    father = ask(packaged, "My father has had a fever and a cough for two days.")
    assert father.details["subject"] == "other"
    assert all(
        q["text"].startswith("Does the person you describe have ") for q in father.details["questions"]
    )
    # the writer speaks of themselves first: someone they mention later is not whom it is about
    mine = ask(packaged, "I have had a fever and a cough for two days; my son had the same last week.")
    assert mine.details["subject"] is None and mine.details["questions"]
    # asked of the writer: in the template's words or the knowledge's own ("Are you experiencing …?")
    assert all(re.search(r"\byou\b", q["text"], re.IGNORECASE) for q in mine.details["questions"])
    assert not any("child" in q["text"] or "person" in q["text"] for q in mine.details["questions"])
    french = packaged.answer(Case(id="fr", language="fr", question="Mon fils a de la fièvre et il tousse."))
    assert french.details["subject"] == "child"
    assert all(q["text"].startswith("Votre enfant a-t-il") for q in french.details["questions"])


def test_a_malformed_sex_block_names_its_line(tmp_path: Path) -> None:
    assert {block.sex for block in sex_blocks()} == {"female", "male"}
    broken = tmp_path / "icd10_sex.jsonl"
    broken.write_text('{"sex": "female", "first": "N98", "last": "N70", "title": "t", "source": "s"}\n')
    with pytest.raises(DataFormatError, match=r"icd10_sex\.jsonl:1: not a SexBlock record"):
        sex_blocks(broken)
