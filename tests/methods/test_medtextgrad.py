"""Med-TextGrad: staged parallel calls over real HTTP, the trajectory and its selection, early stops, a
failing critic, and one real refinement by the embedded model on a real iCraft-MD case.

Where a reply must be controlled (a verdict, a changing answer, a delay), a loopback server that answers by
role stands in for a model server: the embedded model cannot be made to produce a given critique."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path

import pytest

from clinrag.core.models import Evidence, Trace, case_text
from clinrag.eval.datasets import load_dataset
from clinrag.index.tokenize import Tokenizer
from clinrag.methods.context import ClinicalContext
from clinrag.methods.medtextgrad import (
    MedTextGrad,
    MedTextGradConfig,
    sentence_support,
)
from tests.openai_server import LoopbackServer, chat_body, scripted_model

DELAY = 0.4


def _role(body: dict) -> str:
    prompt = body["messages"][-1]["content"]
    if prompt.startswith("You are a medical reviewer. Check the answer below against"):
        return "critic.context"
    if prompt.startswith("You are a medical reviewer. Check whether"):
        return "critic.patient"
    if prompt.startswith("A reviewer checked"):
        return "answer_gradient"
    if prompt.startswith("A medical assistant was given"):
        return "prompt_gradient"
    if prompt.startswith("Improve the instructions"):
        return "update"
    return "generate"


class RoleServer(LoopbackServer):
    """Answers each request by its role. `verdicts[role]` lists the verdicts of successive critiques (the
    last repeats); `answers` the successive generated answers; every reply waits `delay` seconds."""

    def __init__(self, answers: list[str], verdicts: dict[str, list[str]], delay: float = 0.0) -> None:
        self.answers = answers
        self.verdicts = verdicts
        self.delay = delay
        self.counts: dict[str, int] = {}
        self.prompts: dict[str, list[str]] = {}  # each role's request messages, joined, in order
        self.critic_text: str | None = None  # replaces a critic's JSON when set (a broken critic)
        self._count_lock = threading.Lock()
        super().__init__()

    def respond(self, body: dict) -> tuple[int, dict, float]:
        role = _role(body)
        with self._count_lock:
            n = self.counts.get(role, 0)
            self.counts[role] = n + 1
            text = "\n".join(message["content"] for message in body["messages"])
            self.prompts.setdefault(role, []).append(text)
        if role == "generate":
            text = self.answers[min(n, len(self.answers) - 1)]
        elif role.startswith("critic"):
            verdicts = self.verdicts[role.split(".")[1]]
            verdict = verdicts[min(n, len(verdicts) - 1)]
            issues = [] if verdict == "no issues" else ["The answer does not mention the fever."]
            text = self.critic_text or json.dumps({"issues": issues, "verdict": verdict})
        elif role == "update":
            text = (
                f"You are a careful physician. Revision {n + 1}: mention every symptom the patient reports."
            )
        else:
            text = f"Mention the fever explicitly ({role} {n + 1})."
        return 200, chat_body(text), self.delay


@pytest.fixture
def role_server():
    servers: list[RoleServer] = []

    def make(answers: list[str], verdicts: dict[str, list[str]], delay: float = 0.0) -> RoleServer:
        servers.append(RoleServer(answers, verdicts, delay))
        return servers[-1]

    yield make
    for server in servers:
        server.close()


CONTEXT = ClinicalContext(
    statements=[
        Evidence(
            id="kb:hpo:HP:0001945#0",
            kind="statement",
            text="Fever (HP:0001945) is defined as: Body temperature elevated above the normal range.",
            source="hpo",
        )
    ],
    patients=[
        Evidence(
            id="ddxplus:7",
            kind="patient",
            text="Presentation: fever and cough for three days. Diagnosis: Bronchitis",
            source="patients",
        )
    ],
)
PATIENT = "Patient: 30-year-old with fever and cough.\n\nWhat should I do?"


def _refine(server: RoleServer, config: MedTextGradConfig, trace: Trace):
    model = scripted_model(server, concurrency=4)
    refiner = MedTextGrad(model, config)
    return asyncio.run(
        refiner.arefine(
            system="You are a careful physician.",
            user=f"{PATIENT}\n\nAnswer briefly.",
            patient=PATIENT,
            context=CONTEXT,
            language="en",
            trace=trace,
        )
    )


def test_one_iteration_is_eight_calls_in_five_stages_that_overlap(role_server) -> None:
    server = role_server(
        ["Rest at home.", "Fever with cough suggests bronchitis; rest and fluids."],
        {"context": ["minor issues"], "patient": ["minor issues"]},
        delay=DELAY,
    )
    trace = Trace()
    started = time.perf_counter()
    refinement = _refine(server, MedTextGradConfig(iterations=1, early_stop="never"), trace)
    elapsed = time.perf_counter() - started
    # OA (1 call), one iteration (8 calls), the final answer's critiques (2 calls) = 11 calls, in
    # 1 + 5 + 1 = 7 sequential stages: parallel stages take one delay, not two.
    assert refinement.usage.calls == 11
    assert server.counts == {
        "generate": 2,
        "critic.context": 2,
        "critic.patient": 2,
        "answer_gradient": 2,
        "prompt_gradient": 2,
        "update": 1,
    }
    assert server.max_in_flight == 2
    assert 7 * DELAY <= elapsed < 9.5 * DELAY, elapsed
    assert [item.iteration for item in refinement.iterates] == [0, 1]
    assert refinement.iterates[1].calls == 8


def test_each_step_sees_what_algorithm_1_gives_it(role_server) -> None:
    """The answer-gradients see the context and the patient's question (eq. 9–10), the update the answer and
    the question, and the generator revises A_t rather than answering afresh."""
    first = "Rest at home."
    server = role_server(
        [first, "Fever with cough suggests bronchitis."],
        {"context": ["minor issues"], "patient": ["minor issues"]},
    )
    _refine(server, MedTextGradConfig(iterations=1, early_stop="never"), Trace())
    gradients = server.prompts["answer_gradient"]
    assert len(gradients) == 2
    for prompt in gradients:
        assert "Body temperature elevated above the normal range" in prompt  # C
        assert "What should I do?" in prompt  # q
    (update,) = server.prompts["update"]
    assert first in update and "What should I do?" in update
    original, revised = server.prompts["generate"]
    assert first not in original and first in revised


ANSWERS = ["Rest.", "Fever with cough suggests bronchitis; rest and drink fluids.", "Take antibiotics now."]
VERDICTS = {"context": ["major issues", "no issues", "major issues"], "patient": ["minor issues"]}


def test_every_intermediate_is_traced_and_the_best_iterate_is_kept(role_server) -> None:
    server = role_server(ANSWERS, VERDICTS)
    trace = Trace()
    refinement = _refine(server, MedTextGradConfig(iterations=2, early_stop="never"), trace)
    assert [i.context_critique.verdict for i in refinement.iterates] == [
        "major issues",
        "no issues",
        "major issues",
    ]
    assert refinement.selected == 1
    assert refinement.answer == "Fever with cough suggests bronchitis; rest and drink fluids."
    names = [step.name for step in trace.steps]
    for stage in ("answer_gradient", "prompt_gradient"):
        assert names.count(f"medtextgrad.{stage}.context") == names.count(f"medtextgrad.{stage}.patient") == 2
    assert names.count("medtextgrad.update") == 2 and names.count("medtextgrad.generate") == 3
    updates = [step for step in trace.steps if step.name == "medtextgrad.update"]
    assert refinement.iterates[2].prompt == updates[1].output["proposed"]
    summary = trace.steps[-1]
    assert summary.name == "medtextgrad.summary" and summary.output["selected_iteration"] == 1
    assert [t["context_verdict"] for t in summary.output["trajectory"]] == [
        "major issues",
        "no issues",
        "major issues",
    ]
    # `select="last"` keeps T2 instead (what the OA-vs-T1..T3 comparison needs).
    fresh = role_server(ANSWERS, VERDICTS)
    last = _refine(fresh, MedTextGradConfig(iterations=2, early_stop="never", select="last"), Trace())
    assert last.selected == 2 and last.answer == "Take antibiotics now."


def test_converged_critiques_stop_before_any_update(role_server) -> None:
    server = role_server(
        ["Fever and cough: rest and fluids."], {"context": ["no issues"], "patient": ["no issues"]}
    )
    refinement = _refine(server, MedTextGradConfig(iterations=3), Trace())
    assert refinement.stopped == "both criteria report no issue"
    assert len(refinement.iterates) == 1 and refinement.usage.calls == 3


def test_an_unchanged_answer_stops_the_loop(role_server) -> None:
    server = role_server(["Rest and fluids."], {"context": ["minor issues"], "patient": ["minor issues"]})
    refinement = _refine(server, MedTextGradConfig(iterations=3), Trace())
    assert refinement.stopped == "the answer did not change at iteration 1"
    assert len(refinement.iterates) == 1
    with_never = _refine(server, MedTextGradConfig(iterations=2, early_stop="never"), Trace())
    assert len(with_never.iterates) == 3


def test_a_critic_that_breaks_its_format_ends_refinement_with_the_answer_kept(role_server) -> None:
    server = role_server(["Rest and fluids."], {"context": ["minor issues"], "patient": ["minor issues"]})
    server.critic_text = "I think the answer is fine overall"
    model = scripted_model(server, structured_output="none")
    trace = Trace()
    refinement = asyncio.run(
        MedTextGrad(model, MedTextGradConfig(iterations=2)).arefine(
            system="You are a careful physician.",
            user=PATIENT,
            patient=PATIENT,
            context=CONTEXT,
            language="en",
            trace=trace,
        )
    )
    assert refinement.stopped.startswith("StructuredOutputError during refinement")
    assert refinement.answer == "Rest and fluids."
    failed = [step for step in trace.steps if step.error_type == "StructuredOutputError"]
    assert failed and failed[0].name.startswith("medtextgrad.critic")


def test_the_evidence_check_finds_unsupported_sentences() -> None:
    tokenizer = Tokenizer("en")
    terms = {t for item in CONTEXT.evidence for t in tokenizer(item.text)}
    supported = "Fever is a body temperature above the normal range."
    invented = "Prescribe warfarin and schedule a colonoscopy."
    assert sentence_support(f"{supported} {invented}", terms, tokenizer) == [
        (supported, True),
        (invented, False),
    ]
    assert sentence_support("", terms, tokenizer) == []


def test_the_evidence_check_keeps_refining_past_a_lenient_critic(role_server) -> None:
    # Both critics find nothing, but the answer invents a citation and an unsupported claim: the context
    # criterion's issues come from the evidence check, and the refinement goes on.
    server = role_server(
        ["Prescribe warfarin [kb:99].", "Fever with cough suggests bronchitis."],
        {"context": ["no issues"], "patient": ["no issues"]},
    )
    trace = Trace()
    refinement = _refine(server, MedTextGradConfig(iterations=2), trace)
    first = refinement.iterates[0]
    assert first.faithfulness == 0.0
    assert first.evidence_issues == [
        "Not supported by the reference information: “Prescribe warfarin [kb:99].”",
        "Cites [kb:99], which is not in the reference information.",
    ]
    context_gradient = next(
        r["messages"][-1]["content"]
        for r in server.requests
        if _role(r) == "answer_gradient" and "(context criterion)" in r["messages"][-1]["content"]
    )
    assert "Cites [kb:99]" in context_gradient and "Prescribe warfarin" in context_gradient
    # T1 is supported and clean: the loop stops there and keeps it.
    assert refinement.stopped == "both criteria report no issue"
    assert len(refinement.iterates) == 2 and refinement.answer == "Fever with cough suggests bronchitis."


@pytest.mark.slow
def test_real_refinement_by_the_embedded_model(data_dir: Path, embedded) -> None:
    case = load_dataset("icraft-md", data_dir / "icraft_md").cases[0]
    others = load_dataset("icraft-md", data_dir / "icraft_md").records[1:3]
    context = ClinicalContext(
        patients=[
            Evidence(id=r.id, kind="patient", text=r.narrative, source="patients", score=1.0) for r in others
        ]
    )
    trace = Trace()
    refinement = asyncio.run(
        MedTextGrad(embedded, MedTextGradConfig(iterations=1, early_stop="never", max_tokens=96)).arefine(
            system="You are a careful, experienced physician.",
            user=f"{context.render()}\n\n{case_text(case)}\n\nAnswer briefly.",
            patient=case_text(case),
            context=context,
            language="en",
            trace=trace,
        )
    )
    # The grammar keeps the small model's critiques valid JSON, so the iteration completes.
    assert refinement.stopped == "iterations done", refinement.stopped
    assert len(refinement.iterates) == 2 and all(item.answer for item in refinement.iterates)
    assert all(item.context_critique is not None for item in refinement.iterates)
    assert all(0.0 <= item.faithfulness <= 1.0 for item in refinement.iterates)
    assert refinement.usage.calls == 11
