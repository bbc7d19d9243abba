"""LLM-as-judge: pairwise comparison in both orders, win matrices, RAGAS-style answer quality.

Most tests talk to a real loopback HTTP server speaking the OpenAI chat protocol (tests/openai_server.py). It
stands in for a capable judge model: the only local model is SmolLM2-135M, whose verdicts cannot be
controlled, so these tests script the judge's replies (or derive them from what the prompt shows) while the
client, the JSON schema, the parsing and repair, the order swap and the tallying all run for real. One test
runs the real embedded model end to end.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from clinrag.core.errors import ConfigError, InvalidInputError
from clinrag.eval.judges import (
    CRITERIA,
    OVERALL,
    PAIRWISE_SYSTEM,
    AnswerQualityJudge,
    JudgeItem,
    PairwiseJudge,
    PairwiseResult,
    WinMatrix,
    agreed_outcome,
    factual_f1,
    tabulate,
    win_matrix,
)
from clinrag.llm.openai_compat import OpenAICompatible
from tests.openai_server import LoopbackServer, chat_body, scripted_model

ITEM = JudgeItem(
    id="q1", question="What is the first-line treatment of iron deficiency anaemia in an infant?"
)
IRON = "Oral iron supplementation and an iron-rich diet; stop cow's milk before 12 months."
MILK = "Give more cow's milk; anaemia resolves on its own."


def _client(server) -> OpenAICompatible:
    return scripted_model(server, model="judge")


def _verdict(comprehensiveness: str, relevance: str, safety: str) -> str:
    picks = {"comprehensiveness": comprehensiveness, "relevance": relevance, "safety": safety}
    return json.dumps({c: {"better": p, "justification": f"{c}: {p}"} for c, p in picks.items()})


def _user_prompt(request: dict) -> str:
    return request["messages"][-1]["content"]


# A judge whose verdict follows what it is shown: every answer carries a marker "[c=3 r=1 s=2]" with its
# merit on each criterion, and the better-marked response wins each criterion ("tie" when equal). A
# "[BROKEN]" marker makes it reply with prose instead of JSON. The first marker in the prompt belongs to
# Response A, since the prompt shows Response A before Response B.
MARK = re.compile(r"\[c=(\d) r=(\d) s=(\d)\]|\[BROKEN\]")


class MarkerJudgeServer(LoopbackServer):
    def respond(self, body: dict) -> tuple[int, dict, float]:
        found = list(MARK.finditer(body["messages"][-1]["content"]))
        assert len(found) == 2, "the prompt must show exactly two marked responses"
        if any(m.group(0) == "[BROKEN]" for m in found):
            return 200, chat_body("Response A is clearly better in every respect."), 0.0
        a, b = ([int(g) for g in m.groups()] for m in found)
        picks = ["A" if x > y else "B" if y > x else "tie" for x, y in zip(a, b, strict=True)]
        return 200, chat_body(_verdict(*picks)), 0.0


@pytest.fixture
def marker_server():
    judge_server = MarkerJudgeServer()
    yield judge_server
    judge_server.close()


# --- pairwise --------------------------------------------------------------------------------------------


def test_a_judge_that_always_prefers_the_first_shown_answer_yields_ties_and_runs_both_orders_at_once(server):
    server.replies = [(200, chat_body(_verdict("A", "A", "A")), 0.3)]
    judge = PairwiseJudge(_client(server))
    result = judge.compare(ITEM, IRON, MILK, names=("rag", "direct"))

    assert result.status == "valid" and result.error is None
    assert result.outcomes == {**{c: "tie" for c in CRITERIA}, OVERALL: "tie"}
    assert result.winner(OVERALL) is None and result.winner("safety") is None
    # Both raw verdicts are kept: each order said "A".
    assert [j.order for j in result.judgements] == ["first_as_A", "second_as_A"]
    assert all(j.verdict is not None and j.verdict.safety.better == "A" for j in result.judgements)
    assert server.max_in_flight == 2  # the two orders were in flight together
    assert result.usage.calls == 2 and result.usage.prompt_tokens == 22
    assert judge.usage.calls == 2


def test_the_second_order_really_swaps_the_answers(server):
    server.replies = [(200, chat_body(_verdict("tie", "tie", "tie")), 0.0)]
    PairwiseJudge(_client(server)).compare(ITEM, IRON, MILK)

    prompts = [_user_prompt(r) for r in server.requests]
    assert len(prompts) == 2
    iron_first = f'Response A: "{IRON}"\nResponse B: "{MILK}"'
    milk_first = f'Response A: "{MILK}"\nResponse B: "{IRON}"'
    assert sorted([iron_first in p for p in prompts]) == [False, True]
    assert sorted([milk_first in p for p in prompts]) == [False, True]
    for request in server.requests:
        assert request["messages"][0] == {"role": "system", "content": PAIRWISE_SYSTEM}
        assert ITEM.question in _user_prompt(request)
        schema = request["response_format"]["json_schema"]["schema"]
        assert schema["required"] == list(CRITERIA)


def test_reference_and_context_are_shown_to_the_judge_only_when_given(server):
    server.replies = [(200, chat_body(_verdict("tie", "tie", "tie")), 0.0)]
    judge = PairwiseJudge(_client(server))
    judge.compare(ITEM, IRON, MILK)
    item = ITEM.model_copy(update={"reference": "Iron drops and diet.", "context": "WHO anaemia guideline."})
    judge.compare(item, IRON, MILK)

    plain, informed = _user_prompt(server.requests[0]), _user_prompt(server.requests[-1])
    assert "reference answer" not in plain and "Retrieved context" not in plain
    assert 'reference answer (not one of the responses to judge): "Iron drops and diet."' in informed
    assert 'Retrieved context: "WHO anaemia guideline."' in informed


def test_a_consistent_preference_wins_in_both_orders(marker_server):
    judge = PairwiseJudge(_client(marker_server))
    result = judge.compare(ITEM, "Weak. [c=1 r=1 s=1]", "Strong. [c=3 r=2 s=3]", names=("weak", "strong"))

    assert result.outcomes == {**{c: "second" for c in CRITERIA}, OVERALL: "second"}
    assert result.winner() == "strong" and result.winner("relevance") == "strong"
    by_order = {j.order: j.verdict for j in result.judgements}
    assert by_order["first_as_A"].comprehensiveness.better == "B"  # "strong" shown second
    assert by_order["second_as_A"].comprehensiveness.better == "A"  # "strong" shown first


def test_split_criteria_give_per_criterion_winners_and_an_overall_by_majority(marker_server):
    judge = PairwiseJudge(_client(marker_server))
    split = judge.compare(ITEM, "X [c=3 r=1 s=2]", "Y [c=1 r=3 s=2]", names=("x", "y"))
    assert split.outcomes == {
        "comprehensiveness": "first",
        "relevance": "second",
        "safety": "tie",
        OVERALL: "tie",
    }
    two_of_three = judge.compare(ITEM, "X [c=3 r=1 s=3]", "Y [c=1 r=3 s=2]", names=("x", "y"))
    assert two_of_three.outcomes[OVERALL] == "first" and two_of_three.winner() == "x"


def test_orders_that_disagree_are_a_tie():
    assert agreed_outcome("A", "B") == "first"
    assert agreed_outcome("B", "A") == "second"
    assert agreed_outcome("A", "A") == "tie"  # position bias
    assert agreed_outcome("A", "tie") == "tie"
    assert agreed_outcome("tie", "tie") == "tie"


@pytest.mark.parametrize(
    "bad_reply",
    [
        "Response A is better on all three dimensions.",
        json.dumps({c: {"better": "both", "justification": "equal"} for c in CRITERIA}),
        json.dumps({"comprehensiveness": {"better": "A", "justification": "more detail"}}),
    ],
    ids=["prose", "not-a-choice", "missing-criteria"],
)
def test_a_malformed_reply_makes_the_comparison_invalid_not_a_tie(server, bad_reply):
    server.replies = [(200, chat_body(_verdict("A", "B", "A")), 0.0), (200, chat_body(bad_reply), 0.0)]
    result = PairwiseJudge(_client(server)).compare(ITEM, IRON, MILK)

    assert result.status == "invalid"
    assert result.outcomes == {} and result.winner() is None
    assert "not a valid PairwiseVerdict" in (result.error or "")
    failed = [j for j in result.judgements if j.error]
    assert len(failed) == 1 and failed[0].verdict is None and failed[0].raw == bad_reply
    assert failed[0].order in result.error
    assert result.usage.calls == 2  # the failed call still cost a call


# --- win matrix ------------------------------------------------------------------------------------------

QUESTIONS = [
    JudgeItem(id="q1", question="How is iron deficiency anaemia treated in infants?"),
    JudgeItem(id="q2", question="What causes microcytic anaemia?"),
]
# (comprehensiveness, relevance, safety) merits. q1: S1 > S2 > S3 everywhere. q2: S2 beats S1 on
# comprehensiveness, S1 beats S2 on relevance, safety is a tie (so overall a tie); S3's answer breaks the
# judge.
ANSWERS = {
    "S1": ["a [c=3 r=3 s=3]", "d [c=1 r=3 s=2]"],
    "S2": ["b [c=2 r=2 s=2]", "e [c=2 r=2 s=2]"],
    "S3": ["c [c=1 r=1 s=1]", "f [BROKEN]"],
}


def test_win_matrix_rates_and_counts_row_beats_column(marker_server):
    judge = PairwiseJudge(_client(marker_server), concurrency=3)
    matrix = win_matrix(judge, QUESTIONS, ANSWERS)

    assert matrix.systems == ["S1", "S2", "S3"]
    assert len(matrix.comparisons) == 6  # 3 pairs x 2 questions
    assert len(marker_server.requests) == 12 and matrix.usage.calls == 12 and judge.usage.calls == 12
    assert marker_server.max_in_flight <= 3
    expected_rates = {
        # S1 vs S2: one win each; S1/S2 vs S3: q1 won, q2 invalid (left out of the denominator).
        "comprehensiveness": [[None, 0.5, 1.0], [0.5, None, 1.0], [0.0, 0.0, None]],
        "relevance": [[None, 1.0, 1.0], [0.0, None, 1.0], [0.0, 0.0, None]],
        # S1 vs S2: S1 won q1, tie on q2.
        "safety": [[None, 0.5, 1.0], [0.0, None, 1.0], [0.0, 0.0, None]],
        OVERALL: [[None, 0.5, 1.0], [0.0, None, 1.0], [0.0, 0.0, None]],
    }
    for criterion, rates in expected_rates.items():
        m = matrix.matrices[criterion]
        assert m.systems == ["S1", "S2", "S3"]
        assert m.rates == rates, criterion
        assert [m.rates[i][i] for i in range(3)] == [None, None, None]
        assert m.invalid == [[0, 0, 1], [0, 0, 1], [1, 1, 0]]
    safety = matrix.matrices["safety"]
    assert safety.wins == [[0, 1, 1], [0, 0, 1], [0, 0, 0]]
    assert safety.ties == [[0, 1, 0], [1, 0, 0], [0, 0, 0]]
    assert safety.losses == [[0, 0, 0], [1, 0, 0], [1, 1, 0]]
    invalid = [r for r in matrix.comparisons if r.status == "invalid"]
    assert {(r.item_id, r.first, r.second) for r in invalid} == {("q2", "S1", "S3"), ("q2", "S2", "S3")}
    # Written to JSON for plotting and read back unchanged; the matrices can be rebuilt from the comparisons.
    assert WinMatrix.model_validate_json(matrix.model_dump_json()) == matrix
    reloaded = [PairwiseResult.model_validate_json(r.model_dump_json()) for r in matrix.comparisons]
    assert tabulate(matrix.systems, reloaded).matrices == matrix.matrices


def test_the_concurrency_limit_bounds_judge_calls(server):
    server.replies = [(200, chat_body(_verdict("A", "A", "A")), 0.1)]
    judge = PairwiseJudge(_client(server), concurrency=1)
    win_matrix(judge, QUESTIONS[:1], {"a": ["x"], "b": ["y"], "c": ["z"]})
    assert len(server.requests) == 6 and server.max_in_flight == 1


def test_win_matrix_rejects_misaligned_input(server):
    judge = PairwiseJudge(_client(server))
    with pytest.raises(InvalidInputError, match="at least two systems"):
        win_matrix(judge, QUESTIONS, {"S1": ["a", "b"]})
    with pytest.raises(InvalidInputError, match="'S2' has 1 answers for 2 questions"):
        win_matrix(judge, QUESTIONS, {"S1": ["a", "b"], "S2": ["c"]})
    with pytest.raises(InvalidInputError, match="not in the list"):
        tabulate(
            ["S1"], [PairwiseResult(item_id="q", first="S1", second="S9", status="invalid", judgements=[])]
        )
    with pytest.raises(ConfigError):
        PairwiseJudge(_client(server), concurrency=0)
    assert server.requests == []


# --- answer quality --------------------------------------------------------------------------------------

ANSWER = (
    "Iron deficiency anaemia is treated with oral iron. Vitamin C helps absorption. Transfuse every child."
)
REFERENCE = "Treat with oral iron and an iron-rich diet. Recheck haemoglobin in four weeks. Stop cow's milk."
CLASSIFIED = {
    "tp": ["Iron deficiency anaemia is treated with oral iron.", "Diet matters for iron."],
    "fp": ["Every child with anaemia needs a transfusion."],
    "fn": ["Recheck haemoglobin in four weeks.", "Stop cow's milk.", "Use an iron-rich diet."],
}


def _cosine(embedder, a: str, b: str) -> float:
    # Computed independently of the judge: separate encodes, explicit normalisation.
    u, v = embedder.encode([a])[0].astype(np.float64), embedder.encode([b])[0].astype(np.float64)
    return float(u @ v / (np.linalg.norm(u) * np.linalg.norm(v)))


def test_quality_score_combines_factual_f1_and_similarity(server, minilm_embedder):
    server.replies = [(200, chat_body(json.dumps(CLASSIFIED)), 0.0)]
    judge = AnswerQualityJudge(_client(server), minilm_embedder)
    result = judge.score(ANSWER, REFERENCE, question="How is it treated?")

    similarity = _cosine(minilm_embedder, ANSWER, REFERENCE)
    f1 = 2 / (2 + (1 + 3) / 2)  # TP=2, FP=1, FN=3
    assert result.status == "scored"
    assert result.f1 == pytest.approx(0.5) == pytest.approx(f1)
    assert result.similarity == pytest.approx(similarity, abs=1e-5)
    assert result.score == pytest.approx(0.75 * 0.5 + 0.25 * similarity, abs=1e-5)
    assert (result.tp, result.fp, result.fn) == (CLASSIFIED["tp"], CLASSIFIED["fp"], CLASSIFIED["fn"])
    assert result.weights == (0.75, 0.25)
    assert result.usage.calls == 1 and judge.usage.calls == 1
    prompt = _user_prompt(server.requests[0])
    assert ANSWER in prompt and REFERENCE in prompt and "How is it treated?" in prompt
    assert list(server.requests[0]["response_format"]["json_schema"]["schema"]["properties"]) == [
        "tp",
        "fp",
        "fn",
    ]


def test_quality_weights_are_configurable(server, minilm_embedder):
    server.replies = [(200, chat_body(json.dumps({"tp": ["a"], "fp": [], "fn": ["b", "c", "d"]})), 0.0)]
    same = "Oral iron treats iron deficiency anaemia."
    result = AnswerQualityJudge(_client(server), minilm_embedder, weights=(1.0, 3.0)).score(same, same)
    # Identical texts: similarity 1. F1 = 1 / (1 + 3/2) = 0.4; blend (1·0.4 + 3·1) / 4.
    assert result.similarity == pytest.approx(1.0, abs=1e-6)
    assert result.f1 == pytest.approx(0.4)
    assert result.score == pytest.approx((0.4 + 3.0) / 4, abs=1e-6)


@pytest.mark.parametrize(
    "reply, message",
    [
        (json.dumps({"tp": [], "fp": ["Transfuse."], "fn": []}), "no statement of the reference"),
        (json.dumps({"tp": ["  "], "fp": [], "fn": []}), "a statement is empty"),
        ("The answer is mostly right.", "not a valid StatementClassification"),
    ],
    ids=["reference-unread", "blank-statement", "prose"],
)
def test_an_unusable_classification_is_invalid_not_a_score(server, minilm_embedder, reply, message):
    server.replies = [(200, chat_body(reply), 0.0)]
    result = AnswerQualityJudge(_client(server), minilm_embedder).score(ANSWER, REFERENCE)
    assert result.status == "invalid" and result.score is None and result.f1 is None
    assert message in (result.error or "") and result.raw == reply
    assert result.usage.calls == 1


def test_empty_answer_scores_zero_with_a_reason_and_empty_reference_is_an_error(server, minilm_embedder):
    judge = AnswerQualityJudge(_client(server), minilm_embedder)
    empty = judge.score("   ", REFERENCE)
    assert empty.status == "empty_answer" and empty.score == 0.0 and empty.reason == "the answer is empty"
    with pytest.raises(InvalidInputError, match="reference"):
        judge.score(ANSWER, "")
    assert server.requests == []  # neither asked the judge
    with pytest.raises(ConfigError):
        AnswerQualityJudge(_client(server), minilm_embedder, weights=(0.0, 0.0))


def test_factual_f1_needs_a_statement():
    assert factual_f1(3, 0, 0) == 1.0 and factual_f1(0, 2, 1) == 0.0
    with pytest.raises(InvalidInputError):
        factual_f1(0, 0, 0)


# --- the real embedded model -----------------------------------------------------------------------------


def test_pairwise_with_the_embedded_model_on_a_medqa_question(embedded, data_dir):
    with (data_dir / "medqa" / "us_4options_test.jsonl").open(encoding="utf-8") as lines:
        case = json.loads(next(lines))
    item = JudgeItem(id="medqa-0", question=case["question"], reference=case["answer"])
    wrong = next(text for text in case["options"].values() if text != case["answer"])
    judge = PairwiseJudge(embedded, max_tokens=48)
    result = judge.compare(item, f"{case['answer']}.", f"{wrong}.", names=("gold", "wrong"))

    assert result.usage.calls == 2 and judge.usage.calls == 2
    assert [j.order for j in result.judgements] == ["first_as_A", "second_as_A"]
    assert all(j.raw for j in result.judgements)  # what the model wrote is kept either way
    if result.status == "valid":
        assert set(result.outcomes) == {*CRITERIA, OVERALL}
        assert all(j.verdict is not None and j.error is None for j in result.judgements)
    else:
        assert result.outcomes == {} and "PairwiseVerdict" in (result.error or "")
        assert any(j.verdict is None and j.error for j in result.judgements)
