"""The OpenAI-compatible backend against a real HTTP server on loopback (see conftest.py)."""

import asyncio
import json
import math
import time

import pytest

from clinrag.core.errors import (
    ConfigError,
    ModelAuthError,
    ModelRequestError,
    ModelUnavailableError,
    StructuredOutputError,
)
from clinrag.core.remote import RetryPolicy
from clinrag.llm.base import ChatRequest
from clinrag.llm.openai_compat import OpenAICompatible
from tests.openai_server import chat_body, ranking_body, scripted_model

FAST_RETRY = RetryPolicy(max_retries=3, backoff_s=0.01)


def _model(server, **kwargs) -> OpenAICompatible:
    kwargs.setdefault("retry", FAST_RETRY)
    return scripted_model(server, model="served-model", api_key="sk-test", **kwargs)


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
    _model(server, structured_output="json_schema").complete(ChatRequest.of("Pick.", json_schema=schema))
    assert server.requests[0]["response_format"]["json_schema"]["schema"] == schema
    _model(server, structured_output="json_object").complete(ChatRequest.of("Pick.", json_schema=schema))
    assert server.requests[1]["response_format"] == {"type": "json_object"}
    _model(server, structured_output="none").complete(ChatRequest.of("Pick.", json_schema=schema))
    assert "response_format" not in server.requests[2] and "guided_json" not in server.requests[2]


def test_json_object_schema_sends_the_schema_inside_json_object(server):
    # llama.cpp's form: the schema rides in a `json_object` response format.
    server.replies = [(200, chat_body('{"answer": "B"}'), 0)]
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    completion = _model(server, structured_output="json_object_schema").complete(
        ChatRequest.of("Pick.", json_schema=schema)
    )
    assert completion.text == '{"answer": "B"}'
    assert server.requests[0]["response_format"] == {"type": "json_object", "schema": schema}


def test_a_refused_schema_request_is_a_config_error_naming_the_setting(server):
    server.replies = [(400, {"error": {"message": "unknown response_format type 'json_schema'"}}, 0)]
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    with pytest.raises(ConfigError, match="CLINRAG_LLM_STRUCTURED_OUTPUT"):
        _model(server, structured_output="json_schema").complete(ChatRequest.of("Pick.", json_schema=schema))
    assert len(server.requests) == 1  # a refusal is not retried
    # The same 400 on a request without a schema stays a request error: the form is not to blame.
    with pytest.raises(ModelRequestError, match="response_format"):
        _model(server, structured_output="json_schema").chat("hi")


def test_option_scoring_reads_top_logprobs(server):
    server.replies = [
        (200, chat_body("B", logprobs=[("B", -0.2), ("A", -1.9), (" C", -3.0), ("x", -4.0)]), 0)
    ]
    scores = _model(server, scoring="top_logprobs").score_options(
        ChatRequest.of("Which?"), ["A", "B", "C", "D"]
    )
    assert scores.method == "top_logprobs"
    assert scores.logprobs == [-1.9, -0.2, -3.0, None]
    assert scores.options[scores.best()] == "B"
    request = server.requests[0]
    assert request["max_tokens"] == 1 and request["logprobs"] is True and request["top_logprobs"] == 20


def test_option_scoring_by_ranking_gives_the_rank_rule_distribution(server):
    server.replies = [(200, ranking_body("Pneumonia", "Asthma"), 0)]
    scores = _model(server).score_options(ChatRequest.of("Diagnosis?"), ["Asthma", "Pneumonia"])
    assert scores.method == "ranking" and scores.options[scores.best()] == "Pneumonia"
    assert scores.token_counts == [1, 1]
    assert [math.exp(lp) for lp in scores.logprobs] == pytest.approx([1 / 3, 2 / 3])
    request = server.requests[0]
    assert "Rank the 2 most likely" in request["messages"][-1]["content"]
    ranking = request["response_format"]["json_schema"]["schema"]["properties"]["ranking"]
    assert ranking["items"]["enum"] == ["Asthma", "Pneumonia"]
    assert ranking["minItems"] == ranking["maxItems"] == 2


def test_ranking_weighs_by_rank_and_shares_the_rest_among_unlisted_options(server):
    # Options written as continuations (leading space) are shown and matched stripped; an unknown name and a
    # repeat are dropped. Ranked: C (1), A (1/2); B and D share 1/3 equally: weights 1, 1/2, 1/6, 1/6.
    options = [" Asthma", " Bronchitis", " Croup", " Dengue"]
    server.replies = [(200, ranking_body("Croup", "Gout", "Asthma", "Croup"), 0)]
    scores = _model(server).score_options(ChatRequest.of("Diagnosis?"), options)
    assert scores.method == "ranking" and scores.options[scores.best()] == " Croup"
    total = 1 + 1 / 2 + 1 / 6 + 1 / 6
    expected = [(1 / 2) / total, (1 / 6) / total, 1 / total, (1 / 6) / total]
    assert [math.exp(lp) for lp in scores.logprobs] == pytest.approx(expected)
    enum = server.requests[0]["response_format"]["json_schema"]["schema"]["properties"]["ranking"]["items"]
    assert enum["enum"] == ["Asthma", "Bronchitis", "Croup", "Dengue"]


def test_top_logprobs_without_logprobs_in_the_reply_falls_back_to_a_ranking(server):
    # The server ignores the logprobs request, so the options are ranked in a second, schema-bound request.
    server.replies = [(200, chat_body("A"), 0), (200, ranking_body("B", "A"), 0)]
    scores = _model(server, scoring="top_logprobs").score_options(ChatRequest.of("Which?"), ["A", "B"])
    assert scores.method == "ranking" and scores.options[scores.best()] == "B"
    assert [math.exp(lp) for lp in scores.logprobs] == pytest.approx([1 / 3, 2 / 3])
    first, second = server.requests
    assert first["logprobs"] is True and first["max_tokens"] == 1 and "response_format" not in first
    schema = second["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["ranking"]["items"]["enum"] == ["A", "B"]
    assert "logprobs" not in second
    assert scores.usage.calls == 2  # the ignored logprobs request is accounted too
    # The async path falls back the same way.
    server.requests.clear()
    model = _model(server, scoring="top_logprobs")
    again = asyncio.run(model.ascore_options(ChatRequest.of("Which?"), ["A", "B"]))
    assert again.method == "ranking" and again.logprobs == pytest.approx(scores.logprobs)
    assert again.usage.calls == 2
    assert (
        len(server.requests) == 2
        and "ranking" in server.requests[1]["response_format"]["json_schema"]["schema"]["properties"]
    )


def test_top_logprobs_mode_ranks_options_longer_than_two_characters(server):
    server.replies = [(200, ranking_body("Pneumonia", "Asthma"), 0)]
    scores = _model(server, scoring="top_logprobs").score_options(
        ChatRequest.of("Diagnosis?"), ["Asthma", "Pneumonia"]
    )
    assert scores.method == "ranking" and scores.options[scores.best()] == "Pneumonia"
    assert len(server.requests) == 1 and "logprobs" not in server.requests[0]


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


def test_a_ranking_naming_none_of_the_options_is_a_typed_error(server):
    server.replies = [(200, ranking_body("Influenza", "Gout"), 0)]
    with pytest.raises(StructuredOutputError, match="names none of the options"):
        _model(server).score_options(ChatRequest.of("Diagnosis?"), ["Asthma", "Pneumonia"])


def test_auto_probes_the_server_once_and_keeps_what_it_found(server, tmp_path):
    # The probe's requests, in the order it sends them: the enforcing forms (json_schema, json_object_schema,
    # guided_json) until one answers exactly the probe's value; the completions endpoint (plain, then echo),
    # which this server does not have; chat logprobs.
    kept = tmp_path / "servers.json"
    not_found = (404, {"error": {"message": "Not Found"}}, 0)
    server.replies = [
        (200, chat_body("Apple."), 0),  # json_schema ignored: a free reply
        (200, chat_body('{"answer": "kumquat-7"}'), 0),  # json_object_schema enforced
        not_found,  # /v1/completions, plain: no echo scoring
        (200, chat_body("A", logprobs=[("A", -0.1), ("B", -2.3)]), 0),  # chat logprobs
        (200, chat_body('{"answer": "B"}'), 0),  # the model's own request
    ]
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    model = _model(server, structured_output="auto", scoring="auto", probe_cache=kept)
    model.complete(ChatRequest.of("Pick.", json_schema=schema))
    paths = [request["path"] for request in server.requests]
    assert paths == ["/v1/chat/completions"] * 2 + ["/v1/completions"] + ["/v1/chat/completions"] * 2
    assert server.requests[0]["response_format"]["type"] == "json_schema"
    assert server.requests[1]["response_format"]["type"] == "json_object"
    assert server.requests[3]["logprobs"] is True
    assert server.requests[-1]["response_format"] == {"type": "json_object", "schema": schema}
    assert model.structured_output == "json_object_schema"
    assert model.scoring_name == "ranking (answer letters: top_logprobs)"
    (entry,) = json.loads(kept.read_text()).values()
    assert entry["model"] == "served-model"
    assert entry["capabilities"]["structured"] == "json_object_schema"
    assert entry["capabilities"]["chat_logprobs"] is True and entry["capabilities"]["echo"] is False

    # A second model on the same server and cache asks nothing before its own request.
    server.requests.clear()
    server.replies = [(200, chat_body('{"answer": "C"}'), 0)]
    again = _model(server, structured_output="auto", scoring="auto", probe_cache=kept)
    assert again.capabilities == model.capabilities and server.requests == []
    again.complete(ChatRequest.of("Pick.", json_schema=schema))
    assert len(server.requests) == 1
    assert server.requests[0]["response_format"] == {"type": "json_object", "schema": schema}
