"""The two embedded runtimes on the real packaged SmolLM2 model: the prebuilt `cyllama` wheel must answer
exactly as llama-cpp-python built from source does.

Both run llama.cpp's CPU kernels built for AVX2/FMA with the same thread count, so their logits agree to the
last bit (measured: 0.0 difference over 96 option scores on 12 MedQA questions). The tolerance on
log-likelihoods, 1e-6 nats, only absorbs float32 reordering should a rebuild change the kernels; it is far
below any gap that could reorder options. Greedy and grammar-constrained texts must be equal.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest
from pydantic import BaseModel, Field

from clinrag.core.errors import InvalidInputError, ModelUnavailableError
from clinrag.core.settings import Settings
from clinrag.llm.base import ChatRequest
from clinrag.llm.embedded import EmbeddedLlama, from_settings
from clinrag.llm.embedded_common import json_schema_to_gbnf
from clinrag.llm.embedded_wheel import EmbeddedLlamaWheel
from clinrag.llm.server_scoring import ranking_request
from clinrag.llm.structured import complete_structured

pytestmark = pytest.mark.integration  # both runtimes load the packaged model
TOLERANCE = 1e-6


def _require(module: str, what: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{what} is not installed, so the runtimes cannot be compared")


@pytest.fixture(scope="module")
def wheel() -> EmbeddedLlamaWheel:
    _require("cyllama", "the prebuilt runtime (pip install cyllama)")
    return EmbeddedLlamaWheel(n_ctx=2048)


@pytest.fixture(scope="module")
def source() -> EmbeddedLlama:
    _require("llama_cpp", "llama-cpp-python (built from source by scripts/install.sh)")
    return EmbeddedLlama(n_ctx=2048)


def _same_completion(source, wheel, request: ChatRequest) -> str:
    expected, actual = source.complete(request), wheel.complete(request)
    assert actual.text == expected.text
    assert actual.finish_reason == expected.finish_reason
    assert actual.usage.prompt_tokens == expected.usage.prompt_tokens
    assert actual.usage.completion_tokens == expected.usage.completion_tokens
    assert actual.model == expected.model
    return actual.text


@pytest.mark.parametrize(
    ("prompt", "params"),
    [
        ("What does the heart do?", {"max_tokens": 48}),
        (
            "A 60-year-old man has crushing chest pain radiating to the left arm. What is it?",
            {"max_tokens": 64},
        ),
        ("Count from 1 to 10, separated by commas.", {"max_tokens": 40, "stop": ["5"]}),
        # Multi-byte characters split across tokens: the stop and length checks wait for whole characters.
        ("Translate to Chinese: chest pain and fever.", {"max_tokens": 30}),
        ("Écris une phrase en français sur la fièvre et le cœur.", {"max_tokens": 40}),
    ],
)
def test_greedy_text_is_the_same(source, wheel, prompt, params):
    assert _same_completion(source, wheel, ChatRequest.of(prompt, **params))


def test_system_prompt_renders_the_same(source, wheel):
    request = ChatRequest.of(
        "Name one symptom of anaemia.", system="You are a terse clinician.", max_tokens=24
    )
    _same_completion(source, wheel, request)


class Finding(BaseModel):
    name: str = Field(max_length=40)
    present: bool


class Note(BaseModel):
    findings: list[Finding] = Field(min_length=1, max_length=3)
    severity: str = Field(json_schema_extra={"enum": ["mild", "moderate", "severe"]})
    temperature_c: float | None = None
    age: int | None = None


def test_grammar_constrained_json_is_the_same(source, wheel):
    request = ChatRequest.of(
        "A 7-year-old has fever of 39.2 C, a barking cough and stridor. Record the findings as JSON.",
        max_tokens=120,
    )
    note, completion = complete_structured(wheel, request, Note)
    assert 1 <= len(note.findings) <= 3
    assert completion.text == complete_structured(source, request, Note)[1].text


@pytest.mark.parametrize(
    ("question", "options"),
    [
        (
            "Crushing chest pain with ST elevation. Diagnosis?",
            ["Myocardial infarction", "Pneumothorax", "Gastritis"],
        ),
        # Non-ASCII options are written as raw characters, not as \\u escapes.
        ("Renin, aldosterone, potassium in Conn syndrome?", ["↓ ↓ ↓", "↑ ↓ normal", "↓ ↑ ↑", "↓ ↑ ↓"]),
    ],
)
def test_option_ranking_by_grammar_is_the_same(source, wheel, question, options):
    request = ranking_request(ChatRequest.of(question), options)
    text = _same_completion(source, wheel, request)
    assert set(json.loads(text)["ranking"]) <= set(options)


@pytest.mark.parametrize(
    ("question", "options"),
    [
        ("What is the capital of France? Answer with the city name.", ["London", "Paris", "Berlin"]),
        ("Which vitamin deficiency causes scurvy?", ["Vitamin C", "Vitamin D", "Vitamin B12"]),
        ("Chest pain, ST elevation in II, III, aVF. Which artery?", ["A", "B", "C", "D"]),
    ],
)
def test_option_scores_are_the_same(source, wheel, question, options):
    expected = source.score_options(ChatRequest.of(question), options)
    actual = wheel.score_options(ChatRequest.of(question), options)
    assert actual.method == "loglik"
    assert actual.token_counts == expected.token_counts
    assert actual.logprobs == pytest.approx(expected.logprobs, abs=TOLERANCE)
    assert actual.best() == expected.best()
    assert actual.usage.prompt_tokens == expected.usage.prompt_tokens


def test_option_scores_do_not_depend_on_order_or_cache_state(wheel):
    request = ChatRequest.of("Which vitamin deficiency causes scurvy?")
    options = ["Vitamin C", "Vitamin D", "Vitamin B12"]
    forward = wheel.score_options(request, options)
    wheel.chat("Something else entirely.", max_tokens=5)
    backward = wheel.score_options(request, list(reversed(options)))
    assert forward.logprobs == list(reversed(backward.logprobs))


def test_seeded_sampling_is_reproducible(wheel):
    # Sampled text is reproducible per runtime but not across them: llama.cpp's dist sampler changed between
    # the two builds. Every clinrag method decodes greedily.
    request = ChatRequest.of("Write one line about the heart.", max_tokens=24, temperature=0.8, seed=7)
    wheel.chat("Unrelated prompt to disturb the cache.", max_tokens=5)
    assert wheel.complete(request).text == wheel.complete(request).text


def test_output_settings_match_so_caches_carry_over(source, wheel):
    assert wheel.backend == source.backend
    assert wheel.output_settings == source.output_settings


def test_schema_beyond_the_supported_subset_is_a_typed_error(wheel):
    with pytest.raises(InvalidInputError, match="grammar"):
        wheel.complete(ChatRequest.of("Say a word.", json_schema={"type": "string", "pattern": "[a-z]+"}))


def test_grammar_lists_required_then_optional_properties_in_order():
    grammar = json_schema_to_gbnf(
        {
            "type": "object",
            "properties": {"a": {"type": "string"}, "b": {"type": "integer"}, "c": {"type": "boolean"}},
            "required": ["a"],
        }
    )
    obj = next(line for line in grammar.splitlines() if '"{"' in line)
    assert obj.index('"\\"a\\""') < obj.index('","')  # the required property comes first
    assert obj.index('"\\"b\\""') < obj.index('"\\"c\\""')
    assert "boolean ::=" in grammar and "integer ::=" in grammar


@pytest.mark.parametrize(
    ("runtime", "module", "expected"),
    [("wheel", "cyllama", EmbeddedLlamaWheel), ("source", "llama_cpp", EmbeddedLlama)],
)
def test_runtime_setting_picks_the_backend(runtime, module, expected):
    _require(module, f"the {runtime} runtime")
    assert type(from_settings(Settings(embedded_runtime=runtime, embedded_n_ctx=512))) is expected


def test_auto_prefers_the_wheel_when_installed():
    _require("cyllama", "the prebuilt runtime")
    assert type(from_settings(Settings(embedded_n_ctx=512))) is EmbeddedLlamaWheel


def test_backend_discovery_does_not_load_cyllama():
    # The registry imports every module of clinrag.llm, embedded_wheel included, installed cyllama or not.
    code = (
        "import sys; from clinrag.llm.backends import CHAT_BACKENDS; "
        "assert 'embedded' in CHAT_BACKENDS.names(); sys.exit('cyllama' in sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_missing_wheel_runtime_is_a_typed_error_naming_the_fix(monkeypatch):
    # A None entry in sys.modules makes the import fail as it does where cyllama is not installed.
    monkeypatch.setitem(sys.modules, "cyllama", None)
    monkeypatch.setitem(sys.modules, "cyllama.llama", None)
    with pytest.raises(ModelUnavailableError, match=r"pip install cyllama==0\.2\.18"):
        from_settings(Settings(embedded_runtime="wheel"))
