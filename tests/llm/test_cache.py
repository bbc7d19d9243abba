import json
import subprocess
import sys

import pytest

from clinrag.llm.base import ChatRequest, Message
from clinrag.llm.cache import CachedChatModel, ResponseCache, cache_key
from clinrag.llm.openai_compat import OpenAICompatible


def test_second_identical_request_is_a_hit_with_no_model_call(embedded, tmp_path):
    model = CachedChatModel(embedded, ResponseCache(tmp_path / "cache.sqlite"))
    request = ChatRequest.of("Name a symptom of anaemia.", max_tokens=16)
    first = model.complete(request)
    second = model.complete(request)
    assert (first.cached, first.usage.calls, first.usage.cache_misses) == (False, 1, 1)
    assert (second.cached, second.usage.calls, second.usage.cache_hits) == (True, 0, 1)
    assert second.text == first.text
    assert second.usage.prompt_tokens == 0  # nothing was spent on the hit


def test_option_scores_are_cached_separately_from_completions(embedded, tmp_path):
    model = CachedChatModel(embedded, ResponseCache(tmp_path / "cache.sqlite"))
    request = ChatRequest.of("Is aspirin an antiplatelet drug?")
    scored = model.score_options(request, ["yes", "no"])
    again = model.score_options(request, ["yes", "no"])
    assert again.cached and again.logprobs == scored.logprobs
    assert not model.score_options(request, ["no", "yes"]).cached  # another option list, another key
    assert not model.complete(request.model_copy(update={"max_tokens": 4})).cached


def test_cache_persists_across_instances(embedded, tmp_path):
    path = tmp_path / "cache.sqlite"
    request = ChatRequest.of("Define tachycardia in five words.", max_tokens=12)
    text = CachedChatModel(embedded, ResponseCache(path)).complete(request).text
    reopened = CachedChatModel(embedded, ResponseCache(path))
    hit = reopened.complete(request)
    assert hit.cached and hit.text == text
    assert len(reopened.cache) == 1


def test_key_depends_on_every_request_parameter():
    base = ChatRequest.of("q", system="s")
    content = base.content_key("complete")
    variants = [
        base.model_copy(update={"temperature": 0.7}),
        base.model_copy(update={"max_tokens": 5}),
        base.model_copy(update={"stop": ["\n"]}),
        base.model_copy(update={"seed": 1}),
        base.model_copy(update={"json_schema": {"type": "object"}}),
        ChatRequest(messages=[Message(role="user", content="q")]),
    ]
    assert len({content, *(v.content_key("complete") for v in variants)}) == 1 + len(variants)
    assert base.content_key("score", ["a"]) != content


def _served(model: str = "m", port: int = 8000, **modes) -> OpenAICompatible:
    # Both modes fixed: `auto` would probe the (absent) server to name its output settings.
    modes = {"structured_output": "json_schema", "scoring": "ranking", **modes}
    return OpenAICompatible(model=model, base_url=f"http://127.0.0.1:{port}/v1", **modes)


def test_key_depends_on_backend_model_and_output_settings(embedded):
    content = ChatRequest.of("q").content_key("complete")
    here = _served()
    keys = {
        cache_key(embedded, content),
        cache_key(here, content),
        cache_key(_served(model="n"), content),
        cache_key(_served(port=8001), content),
        cache_key(_served(structured_output="json_object_schema"), content),
        cache_key(_served(scoring="top_logprobs"), content),
        cache_key(_served(ranking_samples=3), content),
    }
    assert len(keys) == 7
    assert cache_key(_served(), content) == cache_key(here, content)
    penalty = embedded.repeat_penalty
    try:
        embedded.repeat_penalty = 1.0
        assert cache_key(embedded, content) not in keys
    finally:
        embedded.repeat_penalty = penalty
    assert cache_key(embedded, content) in keys


@pytest.mark.integration
def test_key_is_stable_across_processes():
    # No dependence on hash randomisation or object identity: another interpreter computes the same key.
    code = (
        "from clinrag.llm.base import ChatRequest;"
        "print(ChatRequest.of('chest pain', system='doctor', max_tokens=9).content_key('complete'))"
    )
    keys = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed},
        ).stdout.strip()
        for seed in ("1", "2")
    }
    here = ChatRequest.of("chest pain", system="doctor", max_tokens=9).content_key("complete")
    assert keys == {here}
    assert json.loads(json.dumps(here)) == here and len(here) == 64
