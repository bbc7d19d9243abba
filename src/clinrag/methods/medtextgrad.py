"""Med-TextGrad (DoctorRAG, arXiv 2505.19538, §2.2 and Algorithm 1): refine a free-text answer by textual
gradient descent on the generator's prompt.

One iteration is 8 model calls in 5 sequential stages:
1. the context criterion (is the answer faithful to the retrieved knowledge and similar patients?) and the
   patient criterion (does it address this patient and their question?) critique the answer — in parallel;
2. two answer-gradients turn each critique into how the answer should change — in parallel;
3. two prompt-gradients turn each answer-gradient into how the prompt should change — in parallel;
4. the TGD update rewrites the prompt from both prompt-gradients;
5. the generator revises the answer under the new prompt (it is shown A_t, as Algorithm 1 refines it).

The answer-gradients see the context C and the patient's question q beside the critique and the answer
(eq. 9–10); the update sees the current answer and q beside the prompt and both prompt-gradients.

The loop runs T iterations (default 3) and stops early when both critiques report no issue or the answer
stops changing (configurable). Every iterate is scored — the context criterion's verdict and an
evidence-overlap faithfulness proxy — and the best one is kept, not blindly the last. Every intermediate
(prompt, answer, critiques, gradients) is a step of the trace. The prompts are ours, written to the roles the
paper describes; the critics answer in JSON so their verdicts can be read without guessing.

The context criterion also runs a model-free evidence check: sentences whose terms are mostly absent from the
retrieved evidence and citations of ids that were not retrieved are added to its issues. A small model
rarely finds fault with an answer; this gives its gradients something concrete, and "no remaining issue"
then means the check agrees too.
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass, field
from typing import Literal, get_args

from pydantic import BaseModel, Field

from clinrag.core.errors import ClinragError, InvalidInputError
from clinrag.core.models import Language, Trace, TraceStep
from clinrag.core.usage import Usage
from clinrag.index.tokenize import Tokenizer
from clinrag.knowledge.chunking import split_sentences
from clinrag.llm.base import ChatModel, ChatRequest, Message
from clinrag.methods.answering import complete, complete_structured
from clinrag.methods.context import ClinicalContext
from clinrag.tasks.citations import cited_ids

EarlyStop = Literal["critique", "unchanged", "both", "never"]
Verdict = Literal["no issues", "minor issues", "major issues"]
VERDICT_SCORE: dict[str, float] = {"no issues": 1.0, "minor issues": 0.5, "major issues": 0.0}
LANGUAGE_NAMES = {"en": "English", "zh": "Chinese", "fr": "French"}
CRITIC_PATIENT_CHARS = 400  # per similar patient in a critic's prompt; the full record stays in the evidence
SUPPORTED_SHARE = 0.5  # a sentence is supported when at least this share of its terms is in the evidence
MIN_PROMPT_WORDS = 4
MAX_EVIDENCE_ISSUES = 3

CONTEXT_CRITIC = """You are a medical reviewer. Check the answer below against the reference information \
(medical knowledge and similar patient cases). List the statements of the answer that the reference \
information contradicts or does not support, and the important points of the reference information that the \
answer misses.

Reference information:
{context}

Answer:
{answer}

Reply in JSON: {{"issues": [up to 3 short issues], "verdict": "no issues" or "minor issues" or \
"major issues"}}."""

PATIENT_CRITIC = """You are a medical reviewer. Check whether the answer below addresses this patient's own \
situation and question: their symptoms, their history and what they asked. List what the answer ignores, \
gets wrong about the patient, or says that was not asked.

Patient and question:
{patient}

Answer:
{answer}

Reply in JSON: {{"issues": [up to 3 short issues], "verdict": "no issues" or "minor issues" or \
"major issues"}}."""

ANSWER_GRADIENT = """A reviewer checked a medical answer for {criterion} and reported:
{critique}

Reference information:
{context}

Patient and question:
{patient}

Answer:
{answer}

Explain briefly how the answer should change to resolve each issue. Do not rewrite the answer."""

PROMPT_GRADIENT = """A medical assistant was given the instructions below and wrote the answer below. \
Feedback says how the answer should change.

Instructions:
{prompt}

Answer:
{answer}

Feedback on the answer:
{gradient}

Explain briefly how the instructions should change so that the assistant's next answer follows the \
feedback."""

PROMPT_UPDATE = """Improve the instructions given to a medical assistant, using the two pieces of feedback \
below. Keep what works, add what the feedback asks for, and keep the instructions short. The assistant must \
still answer in {language}.

Current instructions:
{prompt}

Patient and question:
{patient}

The answer these instructions gave:
{answer}

Feedback from the check against the medical knowledge and similar patients:
{context_feedback}

Feedback from the check against the patient's situation and question:
{patient_feedback}

Reply with the new instructions only."""

# Algorithm 1 refines the answer: the generator revises A_t under the updated instructions
REVISE = """Your previous answer was:
{answer}

Revise it, following your instructions. Reply with the revised answer only."""

CRITERIA = {
    "context": "consistency with the retrieved medical knowledge and similar patients (context criterion)",
    "patient": "relevance to the patient's own situation and question (patient criterion)",
}


class Critique(BaseModel):
    issues: list[str] = Field(default_factory=list, max_length=3)
    verdict: Verdict

    def render(self) -> str:
        listed = "\n".join(f"- {issue}" for issue in self.issues) or "- (no issue listed)"
        return f"{listed}\nVerdict: {self.verdict}"

    @property
    def clean(self) -> bool:
        return self.verdict == "no issues"


@dataclass
class Iterate:
    """One answer of the trajectory: 0 is the original answer (OA), t the answer after t updates."""

    iteration: int
    prompt: str
    answer: str
    faithfulness: float
    evidence_issues: list[str] = field(default_factory=list)
    context_critique: Critique | None = None
    patient_critique: Critique | None = None
    seconds: float = 0.0  # wall time of the iteration that produced it (the initial generation for OA)
    calls: int = 0

    @property
    def score(self) -> float:
        """The context criterion's verdict and the faithfulness proxy, equally weighted (the proxy alone
        while the iterate has no critique)."""
        if self.context_critique is None:
            return self.faithfulness
        return 0.5 * VERDICT_SCORE[self.context_critique.verdict] + 0.5 * self.faithfulness

    def summary(self) -> dict:
        return {
            "iteration": self.iteration,
            "score": round(self.score, 4),
            "faithfulness": round(self.faithfulness, 4),
            "evidence_issues": len(self.evidence_issues),
            "context_verdict": self.context_critique.verdict if self.context_critique else None,
            "patient_verdict": self.patient_critique.verdict if self.patient_critique else None,
            "seconds": round(self.seconds, 3),
            "calls": self.calls,
        }


@dataclass
class Refinement:
    iterates: list[Iterate]
    selected: int  # index into iterates
    stopped: str
    usage: Usage = field(default_factory=Usage)

    @property
    def answer(self) -> str:
        return self.iterates[self.selected].answer

    def trajectory_text(self) -> str:
        lines = [f"Med-TextGrad: {len(self.iterates) - 1} update(s), stopped: {self.stopped}"]
        for item in self.iterates:
            name = "OA" if item.iteration == 0 else f"T{item.iteration}"
            mark = "  ← kept" if item is self.iterates[self.selected] else ""
            verdict = item.context_critique.verdict if item.context_critique else "not critiqued"
            lines.append(
                f"  {name}: score {item.score:.2f} (context: {verdict}, faithfulness {item.faithfulness:.2f})"
                f"{mark}"
            )
        return "\n".join(lines)


@dataclass(frozen=True)
class MedTextGradConfig:
    iterations: int = 3
    early_stop: EarlyStop = "both"
    select: Literal["best", "last"] = "best"
    max_tokens: int = 256  # answers
    feedback_tokens: int = 160  # critiques, gradients and prompts

    def __post_init__(self) -> None:
        if self.iterations < 0:
            raise InvalidInputError(f"Med-TextGrad iterations must be 0 or more, got {self.iterations}")
        if self.early_stop not in get_args(EarlyStop):
            raise InvalidInputError(f"early_stop must be one of {get_args(EarlyStop)}: {self.early_stop!r}")
        if self.select not in ("best", "last"):
            raise InvalidInputError(f"select must be 'best' or 'last', got {self.select!r}")


class MedTextGrad:
    def __init__(self, model: ChatModel, config: MedTextGradConfig = MedTextGradConfig()) -> None:
        self.model = model
        self.config = config

    async def arefine(
        self,
        *,
        system: str,
        user: str,
        patient: str,
        context: ClinicalContext,
        language: Language,
        trace: Trace,
    ) -> Refinement:
        """Refine the answer to `user` (the task prompt with its context) generated under the system prompt
        `system` (the variable being optimised). `patient` is the patient's own text and question, what the
        patient criterion checks against."""
        run = _Run(self, context, patient, language, trace)
        started = time.perf_counter()
        answer = await run.generate(system, user, 0)
        first = Iterate(0, system, answer, *run.check(answer), seconds=time.perf_counter() - started, calls=1)
        iterates = [first]
        stopped = "iterations done"
        try:
            for t in range(self.config.iterations + 1):
                current = iterates[-1]
                # Stage 1: both criteria critique the current answer (the last one only to score it).
                current.context_critique, current.patient_critique = await asyncio.gather(
                    run.critique("context", current.answer, t), run.critique("patient", current.answer, t)
                )
                if t == self.config.iterations:
                    break
                if self.config.early_stop in ("critique", "both") and (
                    current.context_critique.clean
                    and current.patient_critique.clean
                    and not current.evidence_issues
                ):
                    stopped = "both criteria report no issue"
                    break
                step_started = time.perf_counter()
                new_prompt = await run.update(current, t + 1)
                new_answer = await run.generate(new_prompt, user, t + 1, previous=current.answer)
                if self.config.early_stop in ("unchanged", "both") and _same(new_answer, current.answer):
                    stopped = f"the answer did not change at iteration {t + 1}"
                    break
                iterates.append(
                    Iterate(
                        t + 1,
                        new_prompt,
                        new_answer,
                        *run.check(new_answer),
                        seconds=time.perf_counter() - step_started,
                        calls=8,
                    )
                )
        except ClinragError as exc:
            # A failed step (a critic's invalid JSON, a model timeout) ends the refinement; what was
            # produced so far stands, and the failure is on its trace step.
            stopped = f"{type(exc).__name__} during refinement: {exc}"
        selected = (
            len(iterates) - 1
            if self.config.select == "last"
            else max(range(len(iterates)), key=lambda i: (iterates[i].score, -i))
        )
        refinement = Refinement(iterates, selected, stopped, run.usage)
        with trace.step("medtextgrad.summary") as step:
            step.output = {
                "trajectory": [item.summary() for item in iterates],
                "selected_iteration": iterates[selected].iteration,
                "select": self.config.select,
                "stopped": stopped,
                "trajectory_text": refinement.trajectory_text(),
            }
        return refinement


class _Run:
    """The state of one refinement: what the critics check against, usage, and the staged calls."""

    def __init__(
        self, owner: MedTextGrad, context: ClinicalContext, patient: str, language: Language, trace: Trace
    ) -> None:
        self.model = owner.model
        self.config = owner.config
        self.context = context
        self.patient = patient
        self.language = language
        self.trace = trace
        self.usage = Usage()
        self._tokenizer = Tokenizer("zh" if language == "zh" else language)
        evidence = [item.text for item in context.evidence] + [patient]
        self._evidence_terms = {term for text in evidence for term in self._tokenizer(text)}
        self._evidence_ids = {item.id for item in context.evidence}
        self.rendered_context = context.render(max_patient_chars=CRITIC_PATIENT_CHARS)

    def check(self, answer: str) -> tuple[float, list[str]]:
        """(faithfulness proxy, the evidence check's issues): unsupported sentences and invented citations."""
        support = sentence_support(answer, self._evidence_terms, self._tokenizer)
        faithfulness = sum(ok for _, ok in support) / len(support) if support else 0.0
        issues = [f"Not supported by the reference information: “{s}”" for s, ok in support if not ok]
        invented = [i for i in cited_ids(answer) if i not in self._evidence_ids]
        issues += [f"Cites [{i}], which is not in the reference information." for i in invented]
        return faithfulness, issues[:MAX_EVIDENCE_ISSUES]

    async def _text(self, request: ChatRequest, step: TraceStep) -> str:
        return (await complete(self.model, request, self, step)).text.strip()

    async def generate(self, system: str, user: str, iteration: int, previous: str | None = None) -> str:
        """The answer under the instructions `system`: the first one, or a revision of `previous` (A_t)."""
        if previous is not None:
            user = f"{user}\n\n{REVISE.format(answer=previous)}"
        request = ChatRequest(
            messages=[Message(role="system", content=system), Message(role="user", content=user)],
            max_tokens=self.config.max_tokens,
            temperature=0.0,
        )
        with self.trace.step("medtextgrad.generate", iteration=iteration, prompt=system) as step:
            answer = await self._text(request, step)
            step.output = {"answer": answer}
        if not answer:
            raise InvalidInputError(f"the generator returned an empty answer at iteration {iteration}")
        return answer

    async def critique(self, criterion: str, answer: str, iteration: int) -> Critique:
        if criterion == "context":
            prompt = CONTEXT_CRITIC.format(context=self.rendered_context, answer=answer)
        else:
            prompt = PATIENT_CRITIC.format(patient=self.patient, answer=answer)
        request = ChatRequest.of(prompt, max_tokens=self.config.feedback_tokens, temperature=0.0)
        with self.trace.step(f"medtextgrad.critic.{criterion}", iteration=iteration) as step:
            critique, _ = await complete_structured(self.model, request, Critique, self, step)
            step.output = critique.model_dump()
        return critique

    async def _gradients(self, current: Iterate, criterion: str, iteration: int) -> str:
        """The answer-gradient of one criterion, then the prompt-gradient it implies (two chained calls)."""
        critique = current.context_critique if criterion == "context" else current.patient_critique
        assert critique is not None
        reported = critique.render()
        if criterion == "context" and current.evidence_issues:
            reported += "\nThe evidence check also found:\n" + "\n".join(
                f"- {i}" for i in current.evidence_issues
            )
        with self.trace.step(f"medtextgrad.answer_gradient.{criterion}", iteration=iteration) as step:
            answer_gradient = await self._text(
                ChatRequest.of(
                    ANSWER_GRADIENT.format(
                        criterion=CRITERIA[criterion],
                        critique=reported,
                        context=self.rendered_context,
                        patient=self.patient,
                        answer=current.answer,
                    ),
                    max_tokens=self.config.feedback_tokens,
                    temperature=0.0,
                ),
                step,
            )
            step.output = {"gradient": answer_gradient}
        with self.trace.step(f"medtextgrad.prompt_gradient.{criterion}", iteration=iteration) as step:
            prompt_gradient = await self._text(
                ChatRequest.of(
                    PROMPT_GRADIENT.format(
                        prompt=current.prompt, answer=current.answer, gradient=answer_gradient or "(none)"
                    ),
                    max_tokens=self.config.feedback_tokens,
                    temperature=0.0,
                ),
                step,
            )
            step.output = {"gradient": prompt_gradient}
        return prompt_gradient

    async def update(self, current: Iterate, iteration: int) -> str:
        """Stages 2–4: the two gradient chains in parallel (answer-gradients together, then prompt-gradients
        together), then the TGD update of the prompt."""
        context_feedback, patient_feedback = await asyncio.gather(
            self._gradients(current, "context", iteration), self._gradients(current, "patient", iteration)
        )
        request = ChatRequest.of(
            PROMPT_UPDATE.format(
                language=LANGUAGE_NAMES[self.language],
                prompt=current.prompt,
                patient=self.patient,
                answer=current.answer,
                context_feedback=context_feedback or "(none)",
                patient_feedback=patient_feedback or "(none)",
            ),
            max_tokens=self.config.feedback_tokens,
            temperature=0.0,
        )
        with self.trace.step("medtextgrad.update", iteration=iteration) as step:
            proposed = _clean_prompt(await self._text(request, step))
            accepted = len(proposed.split()) >= MIN_PROMPT_WORDS
            step.output = {"proposed": proposed, "accepted": accepted}
            if not accepted:
                # An empty or one-word "prompt" would throw away the task instructions: keep the old one.
                step.error = f"the proposed prompt has fewer than {MIN_PROMPT_WORDS} words; kept the old one"
                step.error_type = "RejectedUpdate"
        return proposed if accepted else current.prompt


def _clean_prompt(text: str) -> str:
    text = re.sub(r"^\s*(?:new\s+)?instructions\s*:\s*", "", text.strip(), flags=re.IGNORECASE)
    return text.strip().strip('"').strip()


def _same(a: str, b: str) -> bool:
    return " ".join(a.split()).casefold() == " ".join(b.split()).casefold()


def sentence_support(answer: str, evidence_terms: set[str], tokenizer: Tokenizer) -> list[tuple[str, bool]]:
    """Each sentence of the answer that has a content term, and whether its terms are mostly
    (≥ SUPPORTED_SHARE) found in the evidence."""
    supported = []
    for sentence in split_sentences(answer):
        terms = set(tokenizer(sentence))
        if terms:
            supported.append((sentence, len(terms & evidence_terms) / len(terms) >= SUPPORTED_SHARE))
    return supported
