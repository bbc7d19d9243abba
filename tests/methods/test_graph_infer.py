"""`graph-infer` over the DDXPlus disease graph on a live FalkorDB server, checked against a ranking computed
here straight from DDXPlus's own JSON for real patients."""

from __future__ import annotations

from pathlib import Path

from clinrag.core.models import Case, PatientProfile
from clinrag.core.settings import Settings
from clinrag.graph.falkordb_store import FalkorDBStore
from clinrag.methods.base import MethodContext
from clinrag.methods.graph_infer import GraphInfer, symptom_keywords
from clinrag.methods.registry import get_method


def _expected_ranking(case: Case, ddx_json: tuple[dict, dict]) -> list[tuple[str, int]]:
    """Pathologies by how many of the patient's yes/no evidences are among their symptoms, then by name."""
    conditions, evidences = ddx_json
    present = {code for code in case.patient.codes["evidence"] if "_@_" not in code}
    counts = []
    for condition in conditions.values():
        binary = {c for c in condition["symptoms"] if evidences[c]["data_type"] == "B"}
        if hits := len(binary & present):
            counts.append((condition["cond-name-eng"], hits))
    return sorted(counts, key=lambda item: (-item[1], item[0]))


def test_the_differential_is_the_diseases_ranked_by_matched_findings(
    store: FalkorDBStore, cases: list[Case], ddx_json
) -> None:
    method = GraphInfer(store)
    for case in cases:
        answer = method.answer(case)
        expected = _expected_ranking(case, ddx_json)
        assert answer.error is None
        assert [d.name for d in answer.result.ddx] == [name for name, _ in expected[:10]]
        matched = answer.trace.steps[0].output["matched"]
        assert [d.probability for d in answer.result.ddx] == [n / matched for _, n in expected[:10]]
        assert answer.result.choice == expected[0][0]
        # every fact shown links a ranked disease to one of the patient's findings
        findings = set(symptom_keywords(case))
        facts = [e for e in answer.evidence if "|" in e.id]
        assert facts and all(f.provenance["tail"] in findings for f in facts)
        assert {f.provenance["head"] for f in facts} == {d.name for d in answer.result.ddx}


def test_only_yes_no_and_plain_findings_are_looked_up(cases: list[Case]) -> None:
    case = cases[0].model_copy(deep=True)
    case.patient.findings += ["fever", "Do you have a cough? No", "Characterize your pain: sharp"]
    keywords = symptom_keywords(case)
    yes = [f.removesuffix(" Yes") for f in cases[0].patient.findings if f.endswith("? Yes")]
    assert keywords == [*yes, "fever"]
    assert not any(k.endswith(("No", "sharp")) or "(on a scale" in k for k in keywords)


def test_a_case_without_findings_or_matches_fails_cleanly(store: FalkorDBStore, cases: list[Case]) -> None:
    method = GraphInfer(store)
    empty = cases[0].model_copy(update={"patient": PatientProfile(initial_presentation="A patient.")})
    assert method.answer(empty).error.startswith("InvalidInputError: the case has no findings")

    unknown = cases[0].model_copy(
        update={"patient": PatientProfile(initial_presentation="x", findings=['"}) DETACH DELETE n //'])}
    )
    answer = method.answer(unknown)
    assert answer.error == "the graph matched no disease to these findings" and answer.result.ddx == []
    assert store.query("MATCH (d:Disease) RETURN count(d) AS n")[0]["n"] == 49


def test_built_by_name_on_the_configured_home(graph_home: Path, cases: list[Case]) -> None:
    method = get_method("graph-infer").build(MethodContext(settings=Settings(home=graph_home)))
    try:
        assert method.answer(cases[0]).result.ddx
    finally:
        method.store.close()
