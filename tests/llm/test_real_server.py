"""The production path on a real server: llama.cpp's OpenAI-compatible server (llama-cpp-python's `server`
extra) serving the packaged SmolLM2 GGUF on loopback. What the probe finds, the structured-output form the
server enforces, and option scoring in each mode, against the same model run embedded."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from pydantic import BaseModel

from clinrag.core.errors import ConfigError
from clinrag.core.settings import Settings
from clinrag.llm.base import ChatRequest
from clinrag.llm.embedded import EmbeddedLlama
from clinrag.llm.openai_compat import OpenAICompatible, from_settings
from clinrag.llm.structured import complete_structured

QUESTION = ChatRequest.of("Crushing chest pain with sweating and nausea. What is the most likely diagnosis?")
NAMES = ["Myocardial infarction", "Migraine", "Appendicitis", "Gastritis"]


def _model(llama_server, home: Path, **settings) -> OpenAICompatible:
    return from_settings(
        Settings(
            home=home,
            llm_backend="openai",
            llm_model=llama_server.model,
            llm_base_url=llama_server.base_url,
            llm_chat_template=llama_server.model_path,
            **settings,
        )
    )


def test_the_probe_finds_what_the_server_supports_and_keeps_it(llama_server, isolated_home: Path) -> None:
    model = _model(llama_server, isolated_home)
    found = model.capabilities
    assert (
        found.structured == "json_object_schema"
    )  # llama.cpp's form; it answers `json_schema` with an error
    assert found.chat_logprobs and found.echo and found.echo_ms_per_token is not None
    kept = json.loads((isolated_home / "model_servers.json").read_text())
    (entry,) = kept.values()
    assert (
        entry["model"] == llama_server.model and entry["capabilities"]["structured"] == "json_object_schema"
    )
    # Echo costs llama-cpp-python's server tens of milliseconds a prompt token (it sorts the vocabulary in
    # Python for each), so `auto` ranks names there; letters come from the top logprobs.
    assert model.scoring_name == "ranking (answer letters: top_logprobs)"
    again = _model(llama_server, isolated_home)
    assert again.capabilities == found


class Finding(BaseModel):
    symptom: str
    present: bool


def test_schemas_are_enforced_in_the_probed_form(llama_server, isolated_home: Path) -> None:
    finding, completion = complete_structured(
        _model(llama_server, isolated_home),
        ChatRequest.of("The patient has a cough. Extract the symptom as JSON.", max_tokens=40),
        Finding,
    )
    assert finding.symptom and json.loads(completion.text)["present"] in (True, False)


def test_a_form_the_server_refuses_is_a_configuration_error(llama_server, isolated_home: Path) -> None:
    model = _model(llama_server, isolated_home, llm_structured_output="json_schema", llm_max_retries=0)
    with pytest.raises(ConfigError, match="CLINRAG_LLM_STRUCTURED_OUTPUT"):
        complete_structured(model, ChatRequest.of("Extract the symptom: cough."), Finding)


def test_ranking_gives_every_option_a_probability(llama_server, isolated_home: Path) -> None:
    scores = _model(llama_server, isolated_home, llm_scoring="ranking").score_options(QUESTION, NAMES)
    assert scores.method == "ranking"
    probabilities = scores.probabilities("mean")
    assert math.isclose(sum(probabilities), 1.0) and min(probabilities) > 0
    # The rank rule over a full list of four: 1, 1/2, 1/3, 1/4, normalised.
    assert sorted(probabilities, reverse=True) == pytest.approx([12 / 25, 6 / 25, 4 / 25, 3 / 25])


def test_options_with_a_line_break_or_quotes_are_ranked(llama_server, isolated_home: Path) -> None:
    """MedQA's options hold stray line breaks and quotes ('Meningitis\\n"'). llama-cpp-python turns the
    ranking schema's enum into a grammar that an escaped quote breaks, and then no longer answers; the options
    are shown with their whitespace collapsed and double quotes as single ones, and matched back."""
    options = ['Meningitis\n"', 'Osgood-Schlatter "disease"', "Fat embolism", "Thyroid storm"]
    model = _model(llama_server, isolated_home, llm_scoring="ranking")
    for _ in range(2):  # the server still answers after the first
        scores = model.score_options(QUESTION, options)
        assert scores.method == "ranking" and scores.options == options
        assert math.isclose(sum(scores.probabilities("mean")), 1.0)


def test_letters_are_scored_from_the_top_logprobs(llama_server, isolated_home: Path) -> None:
    scores = _model(llama_server, isolated_home).score_options(QUESTION, ["A", "B", "C", "D"])
    assert scores.method == "top_logprobs"
    assert sum(value is not None for value in scores.logprobs) >= 2


@pytest.fixture(scope="module")
def source_embedded() -> EmbeddedLlama:
    """The same GGUF on the same llama.cpp (llama-cpp-python), in-process, as the server runs it."""
    return EmbeddedLlama(n_ctx=4096)


@pytest.mark.parametrize("options", [NAMES, [" " + name for name in NAMES], ["A", "B", "C", "D"]])
def test_echo_scores_are_the_embedded_likelihoods(
    llama_server, isolated_home: Path, source_embedded: EmbeddedLlama, options: list[str]
) -> None:
    served = _model(llama_server, isolated_home, llm_scoring="echo").score_options(QUESTION, options)
    embedded = source_embedded.score_options(QUESTION, options)
    assert served.method == "echo" and served.token_counts == embedded.token_counts
    # The same tokens and the same quantity; the values differ only by llama.cpp's evaluation order (the
    # server reuses the prompt it evaluated for the previous request).
    assert served.best() == embedded.best()
    assert max(abs(a - b) for a, b in zip(served.logprobs, embedded.logprobs, strict=True)) < 0.5
