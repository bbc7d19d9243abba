"""The OpenAI-compatible backend against a real HTTP server on loopback (see conftest.py)."""

import asyncio
import time

import pytest

from clinrag.core.errors import (
    ModelAuthError,
    ModelRequestError,
    ModelUnavailableError,
    StructuredOutputError,
)
from clinrag.core.remote import RetryPolicy
from clinrag.llm.base import ChatRequest
from clinrag.llm.openai_compat import OpenAICompatible
from tests.openai_server import chat_body

FAST_RETRY = RetryPolicy(max_retries=3, backoff_s=0.01)


def _model(server, **kwargs) -> OpenAICompatible:
    kwargs.setdefault("retry", FAST_RETRY)
    return OpenAICompatible(model="served-model", base_url=server.base_url, api_key="sk-test", **kwargs)


def test_retries_a_500_then_succeeds(server):
    server.replies = [(500, {"error": {"message": "overloaded"}}, 0), (200, chat_body("Angina."), 0)]
    completion = _model(server).chat("List one cause of chest pain.")
    assert completion.text == "Angina."
    assert len(server.requests) == 2
    assert completion.usage.prompt_tokens == 11 and completion.usage.completion_tokens == 7
    assert server.requests[0]["auth"] == "Bearer sk-test"
    assert server.requests[0]["messages"][-1]["content"] == "List one cause of chest pain."


def test_retries_a_429_with_backoff_and_gives_up_with_a_typed_error(server):
    server.replies = [(429, {"error": {"message": "rate limited"}}, 0)]
    started = time.perf_counter()
    with pytest.raises(ModelUnavailableError, match="429"):
        _model(server, retry=RetryPolicy(max_retries=2, backoff_s=0.1)).chat("hi")
    assert len(server.requests) == 3
    assert time.perf_counter() - started >= 0.1 * 0.5 + 0.2 * 0.5  # two backoff sleeps, jitter ≥ half


def test_invalid_api_key_is_not_retried(server):
    server.replies = [(401, {"error": {"message": "Incorrect API key provided"}}, 0)]
    with pytest.raises(ModelAuthError, match="API key"):
        _model(server).chat("hi")
    assert len(server.requests) == 1


def test_bad_request_is_a_request_error(server):
    server.replies = [(400, {"error": {"message": "context length exceeded"}}, 0)]
    with pytest.raises(ModelRequestError, match="context length"):
        _model(server).chat("hi")


def test_timeout_becomes_unavailable(server):
    server.replies = [(200, chat_body("late"), 2.0)]
    with pytest.raises(ModelUnavailableError, match="timed out"):
        _model(server, timeout_s=0.2, retry=RetryPolicy(max_retries=1, backoff_s=0.01)).chat("hi")
    assert len(server.requests) == 2


def test_unreachable_server():
    model = OpenAICompatible(model="m", base_url="http://127.0.0.1:9/v1", retry=RetryPolicy(0, 0.01))
    with pytest.raises(ModelUnavailableError, match="cannot reach"):
        model.chat("hi")


def test_json_schema_is_sent_as_response_format(server):
    server.replies = [(200, chat_body('{"answer": "B"}'), 0)]
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    _model(server).complete(ChatRequest.of("Pick.", json_schema=schema))
    assert server.requests[0]["response_format"]["json_schema"]["schema"] == schema
    _model(server, structured_output="json_object").complete(ChatRequest.of("Pick.", json_schema=schema))
    assert server.requests[1]["response_format"] == {"type": "json_object"}


def test_option_scoring_reads_top_logprobs(server):
    server.replies = [
        (200, chat_body("B", logprobs=[("B", -0.2), ("A", -1.9), (" C", -3.0), ("x", -4.0)]), 0)
    ]
    scores = _model(server).score_options(ChatRequest.of("Which?"), ["A", "B", "C", "D"])
    assert scores.method == "top_logprobs"
    assert scores.logprobs == [-1.9, -0.2, -3.0, None]
    assert scores.options[scores.best()] == "B"
    request = server.requests[0]
    assert request["max_tokens"] == 1 and request["logprobs"] is True and request["top_logprobs"] == 20


def test_option_scoring_falls_back_to_constrained_generation(server):
    # The server ignores the logprobs request, so the option is chosen by schema-constrained generation.
    server.replies = [(200, chat_body("A"), 0), (200, chat_body('{"answer": "B"}'), 0)]
    scores = _model(server).score_options(ChatRequest.of("Which?"), ["A", "B"])
    assert scores.method == "generation" and scores.options[scores.best()] == "B"
    assert scores.usage.calls == 2  # the ignored logprobs request is metered too
    server.requests.clear()
    server.replies = [(200, chat_body('{"answer": "Pneumonia"}'), 0)]
    scores = _model(server).score_options(ChatRequest.of("Diagnosis?"), ["Asthma", "Pneumonia"])
    assert scores.method == "generation" and scores.options[scores.best()] == "Pneumonia"
    enum = server.requests[0]["response_format"]["json_schema"]["schema"]["properties"]["answer"]["enum"]
    assert enum == ["Asthma", "Pneumonia"]


def test_concurrency_limit_holds_and_calls_overlap(server):
    server.replies = [(200, chat_body("ok"), 0.3)]
    model = _model(server, concurrency=2)

    async def burst():
        return await asyncio.gather(*(model.acomplete(ChatRequest.of(f"q{i}")) for i in range(6)))

    started = time.perf_counter()
    results = asyncio.run(burst())
    elapsed = time.perf_counter() - started
    assert len(results) == 6 and server.max_in_flight == 2
    assert elapsed < 6 * 0.3  # calls ran two at a time, not one by one


def test_generated_choice_outside_the_options_is_a_typed_error(server):
    server.replies = [(200, chat_body('{"answer": "Influenza"}'), 0)]
    with pytest.raises(StructuredOutputError, match="not one of the options"):
        _model(server, logprobs=False).score_options(ChatRequest.of("Diagnosis?"), ["Asthma", "Pneumonia"])
