"""`cot` with `samples` > 1 is self-consistency (i-MedRAG's baseline): each chain is sampled with its own seed
and the option most chains answer wins, on real MedQA questions.

A loopback server that answers by seed stands in for a model server: the embedded model cannot be made to
give chosen answers to chosen chains."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from clinrag.eval.datasets import load_dataset
from clinrag.methods.cot import CONCLUDE, REASON, CoTConfig, CoTMethod
from tests.openai_server import LoopbackServer, chat_body, scripted_model

# the letter each sampled chain concludes with: A wins 3 to 2
CONCLUSIONS = {0: "B", 1: "A", 2: "A", 3: "B", 4: "A"}


class SeededServer(LoopbackServer):
    def respond(self, body: dict) -> tuple[int, dict, float]:
        last = body["messages"][-1]["content"]
        seed = body.get("seed")
        if last.endswith(REASON):
            return 200, chat_body(f"Reasoning of chain {seed}."), 0.0
        assert last == CONCLUDE
        return 200, chat_body(CONCLUSIONS[seed] if seed is not None else "C"), 0.0


@pytest.fixture
def server():
    running = SeededServer()
    yield running
    running.close()


@pytest.fixture(scope="module")
def case(data_dir: Path):
    return load_dataset("medqa", data_dir / "medqa" / "us_4options_test.jsonl").cases[0]


def test_self_consistency_samples_seeded_chains_and_takes_the_majority(server, case) -> None:
    method = CoTMethod(scripted_model(server), CoTConfig(samples=5, temperature=0.7))
    answer = asyncio.run(method.aanswer(case))
    assert answer.error is None and answer.result.choice == "A"
    reasoning = [r for r in server.requests if r["messages"][-1]["content"].endswith(REASON)]
    assert sorted(r["seed"] for r in reasoning) == [0, 1, 2, 3, 4]
    assert {r["temperature"] for r in reasoning} == {0.7}
    votes = next(step for step in answer.trace.steps if step.name == "self_consistency").output
    assert votes["votes"] == {"A": 3, "B": 2} and votes["answers"] == ["B", "A", "A", "B", "A"]
    assert answer.usage.calls == 10  # a reasoning and a conclusion per chain


def test_one_sample_is_plain_chain_of_thought_and_a_vote_needs_options(server, case) -> None:
    plain = asyncio.run(CoTMethod(scripted_model(server), CoTConfig()).aanswer(case))
    assert plain.result.choice == "C" and all("seed" not in r for r in server.requests)
    no_options = case.model_copy(update={"options": {}, "task": "free_text"})
    voted = asyncio.run(CoTMethod(scripted_model(server), CoTConfig(samples=3)).aanswer(no_options))
    assert voted.error is not None and "votes over options" in voted.error
