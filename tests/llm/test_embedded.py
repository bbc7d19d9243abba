"""The real packaged SmolLM2 model through llama.cpp."""

import asyncio

import pytest
from pydantic import BaseModel

from clinrag.core.errors import InvalidInputError
from clinrag.llm.base import ChatRequest
from clinrag.llm.structured import complete_structured


def test_chat_returns_text_and_token_counts(embedded):
    completion = embedded.chat("Name one organ of the human body.", max_tokens=24)
    assert completion.text
    assert completion.usage.calls == 1
    assert completion.usage.prompt_tokens > 10
    assert 0 < completion.usage.completion_tokens <= 24
    assert completion.model.startswith("SmolLM2")


def test_greedy_decoding_is_deterministic(embedded):
    first = embedded.chat("What does the heart do?", max_tokens=20).text
    embedded.chat("Unrelated prompt to disturb the KV cache.", max_tokens=5)
    assert embedded.chat("What does the heart do?", max_tokens=20).text == first


def test_stop_sequences_cut_the_completion(embedded):
    text = embedded.chat("Count from 1 to 10, separated by commas.", max_tokens=40, stop=["5"]).text
    assert "5" not in text and "6" not in text


class Triage(BaseModel):
    urgency: int
    department: str
    red_flags: list[str]


def test_grammar_constrained_json_always_validates(embedded):
    request = ChatRequest.of(
        "A 60-year-old man has crushing chest pain radiating to the left arm. "
        "Give urgency 1-5, department and red flags as JSON.",
        max_tokens=120,
    )
    triage, completion = complete_structured(embedded, request, Triage)
    assert isinstance(triage.urgency, int) and isinstance(triage.red_flags, list)
    assert completion.text.lstrip().startswith("{")


def test_option_scoring_prefers_the_right_answer(embedded):
    scores = embedded.score_options(
        ChatRequest.of("What is the capital of France? Answer with the city name."),
        ["London", "Paris", "Berlin"],
    )
    assert scores.method == "loglik"
    assert scores.options[scores.best()] == "Paris"
    assert sum(scores.probabilities()) == pytest.approx(1.0)
    assert all(count >= 2 for count in scores.token_counts)  # option tokens + end of turn


def test_option_scores_do_not_depend_on_order_or_cache_state(embedded):
    request = ChatRequest.of("Which vitamin deficiency causes scurvy?")
    options = ["Vitamin C", "Vitamin D", "Vitamin B12"]
    forward = embedded.score_options(request, options)
    embedded.chat("Something else entirely.", max_tokens=5)
    backward = embedded.score_options(request, list(reversed(options)))
    assert forward.logprobs == list(reversed(backward.logprobs))  # exactly: every prompt is evaluated afresh


def test_async_calls_serialise_safely(embedded):
    async def ask_all():
        requests = [ChatRequest.of(f"Say the number {i}.", max_tokens=8) for i in range(3)]
        return await asyncio.gather(*(embedded.acomplete(r) for r in requests))

    results = asyncio.run(ask_all())
    assert [r.usage.calls for r in results] == [1, 1, 1]
    assert all(r.text for r in results)


def test_prompt_longer_than_context_is_a_typed_error(embedded):
    long_prompt = "chest pain " * 3000  # far beyond the 2048-token context, below the character limit
    with pytest.raises(InvalidInputError, match="context"):
        embedded.chat(long_prompt)


@pytest.mark.parametrize("prompt", ["", "   \n"])
def test_empty_prompt_is_rejected(embedded, prompt):
    with pytest.raises(InvalidInputError, match="empty"):
        embedded.chat(prompt)


def test_bad_options_are_rejected(embedded):
    request = ChatRequest.of("Pick one.")
    with pytest.raises(InvalidInputError, match="distinct"):
        embedded.score_options(request, ["a", "a"])
    with pytest.raises(InvalidInputError, match="at least one"):
        embedded.score_options(request, [])
