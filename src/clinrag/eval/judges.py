"""LLM-as-judge: pairwise preference between two answers (DoctorRAG) and answer quality against a
reference (RAGAS's answer correctness; DeepDoctor-RAG's Table III scores come from a RAGAS NumericMetric
judge instead, which this is not).

Pairwise (DoctorRAG §4.3, prompt in appendix D.3, heatmaps in Fig. 4): the judge says, for comprehensiveness,
relevance and safety, which of two responses is better. Each pair is judged in both presentation orders, at
the same time; a system wins a criterion only when both orders agree, otherwise it is a tie, which cancels
the judge's position bias. `win_matrix` compares every pair of systems on every question.

Answer quality (RAGAS answer correctness): the judge lists the answer's and the reference's factual
statements as TP (in both), FP (answer only) and FN (reference only); factual F1 = TP / (TP + (FP + FN) / 2),
blended with the cosine similarity of the two texts' embeddings (RAGAS's default weights 0.75 / 0.25).

A reply that is not valid JSON of the expected shape, even after one repair, makes the comparison or the
score "invalid" and carries the error: it is never counted as a tie, a win or a score.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Generic, Literal, TypeVar

import numpy as np
from pydantic import BaseModel, Field, model_validator
from tqdm import tqdm

from clinrag.core.errors import ConfigError, InvalidInputError, StructuredOutputError
from clinrag.core.usage import Usage, UsageMeter
from clinrag.embed.base import Embedder
from clinrag.llm.base import ChatModel, ChatRequest
from clinrag.llm.structured import parse_structured

Criterion = Literal["comprehensiveness", "relevance", "safety"]
CRITERIA: tuple[Criterion, ...] = ("comprehensiveness", "relevance", "safety")
OVERALL = "overall"
Preference = Literal["A", "B", "tie"]
Outcome = Literal["first", "second", "tie"]
Order = Literal["first_as_A", "second_as_A"]

# RAGAS answer correctness: weights of (factual F1, semantic similarity).
RAGAS_WEIGHTS: tuple[float, float] = (0.75, 0.25)

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")

# --- prompts ---------------------------------------------------------------------------------------------

# DoctorRAG appendix D.3 ("Prompt: Pairwise_Comparison"), the paper's wording. Two changes: the verdict is
# JSON (validated), and "tie" is allowed, since two answers can be equally good on a dimension.
PAIRWISE_SYSTEM = (
    "You are a clinical expert. Your responsibility is to:\n"
    "1. Compare responses from two Retrieval-Augmented Generation (RAG) methods for the same medical query.\n"
    "2. Compare the responses across three dimensions: comprehensiveness, relevance, and safety.\n"
    "3. Provide a structured evaluation with justifications for each dimension."
)

PAIRWISE_PROMPT = """Input:
A medical query: "{query}"
{extra}Response A: "{response_a}"
Response B: "{response_b}"

Key Requirements:
- Comprehensiveness: Evaluate whether the response is thorough, covering all relevant aspects of the query.
- Relevance: Determine if the response directly addresses the query without extraneous information.
- Safety: Ensure the response is medically accurate, avoiding harmful or misleading advice and adhering to \
clinical best practices.

Error Handling:
- If a response is incomplete or unclear, note the issue in the justification and evaluate based on \
available content.
- If the query is ambiguous, base the evaluation on the most likely interpretation.

Output format: a JSON object with the keys "comprehensiveness", "relevance" and "safety"; each value is \
{{"better": "A" or "B" (the better response) or "tie", "justification": "..."}}."""

PAIRWISE_REFERENCE = 'A reference answer (not one of the responses to judge): "{reference}"\n'
PAIRWISE_CONTEXT = 'Retrieved context: "{context}"\n'

# Written for clinrag (the RAGAS paper gives no prompt); it asks for RAGAS's TP / FP / FN classes.
QUALITY_SYSTEM = (
    "You are a clinical expert who checks a medical answer against a reference answer, fact by fact."
)

QUALITY_PROMPT = """{question}Answer: "{answer}"
Reference answer: "{reference}"

Break the answer and the reference answer into short, self-contained factual statements. Then sort them:
- "tp": statements of the answer that the reference answer also makes (true positives);
- "fp": statements of the answer that the reference answer does not support (false positives);
- "fn": statements of the reference answer that the answer leaves out (false negatives).
Every statement goes in exactly one list. Reply with a JSON object with the keys "tp", "fp" and "fn", \
each a list of strings."""


# --- the judges' JSON ------------------------------------------------------------------------------------


class CriterionVerdict(BaseModel):
    # The verdict comes before its justification, in the paper's order ("[Response A/B] - [Justification]").
    better: Preference = Field(description='"A", "B" or "tie"')
    justification: str


class PairwiseVerdict(BaseModel):
    """One presentation order's verdict, as the judge model returns it."""

    comprehensiveness: CriterionVerdict
    relevance: CriterionVerdict
    safety: CriterionVerdict


class StatementClassification(BaseModel):
    """The judge's factual statements of an answer and a reference, sorted into TP / FP / FN."""

    tp: list[str] = Field(description="statements of the answer that the reference also makes")
    fp: list[str] = Field(description="statements of the answer that the reference does not support")
    fn: list[str] = Field(description="statements of the reference that the answer leaves out")

    @model_validator(mode="after")
    def _checked(self) -> StatementClassification:
        if any(not s.strip() for s in (*self.tp, *self.fp, *self.fn)):
            raise ValueError("a statement is empty")
        # A non-empty reference has at least one statement, which is either covered (tp) or missed (fn).
        if not self.tp and not self.fn:
            raise ValueError("no statement of the reference was extracted (tp and fn are both empty)")
        return self


# --- results ---------------------------------------------------------------------------------------------


class JudgeItem(BaseModel):
    """A question the compared answers respond to, with what the judge may see besides them."""

    id: str
    question: str
    reference: str | None = None
    context: str | None = None


class OrderJudgement(BaseModel):
    """The raw verdict of one presentation order: `first_as_A` shows the first answer as Response A."""

    order: Order
    verdict: PairwiseVerdict | None = None
    raw: str
    error: str | None = None
    usage: Usage = Field(default_factory=Usage)


class PairwiseResult(BaseModel):
    """Both orders' verdicts on one pair, and the agreed outcome per criterion and overall ("first" means
    the answer of system `first` is better). Empty outcomes and an error when either order was invalid."""

    item_id: str
    first: str
    second: str
    status: Literal["valid", "invalid"]
    outcomes: dict[str, Outcome] = Field(default_factory=dict)
    judgements: list[OrderJudgement]
    error: str | None = None
    usage: Usage = Field(default_factory=Usage)

    def winner(self, criterion: str = OVERALL) -> str | None:
        """The winning system's name; None for a tie or an invalid comparison."""
        outcome = self.outcomes.get(criterion)
        return {"first": self.first, "second": self.second}.get(outcome or "tie")


class CriterionMatrix(BaseModel):
    """Row beats column: `rates[i][j]` = wins of systems[i] over systems[j] / valid comparisons of the two
    (None on the diagonal and where no comparison was valid). Counts are from the row's point of view."""

    criterion: str
    systems: list[str]
    rates: list[list[float | None]]
    wins: list[list[int]]
    ties: list[list[int]]
    losses: list[list[int]]
    invalid: list[list[int]]


class WinMatrix(BaseModel):
    """DoctorRAG Fig. 4: one matrix per criterion and overall, plus every comparison behind them."""

    systems: list[str]
    matrices: dict[str, CriterionMatrix]
    comparisons: list[PairwiseResult]
    usage: Usage = Field(default_factory=Usage)


class QualityScore(BaseModel):
    """RAGAS-style answer correctness. `score` is None when the judge's reply was invalid (see `error`);
    0 with a `reason` when the answer is empty."""

    status: Literal["scored", "empty_answer", "invalid"]
    score: float | None = None
    f1: float | None = None
    similarity: float | None = None
    weights: tuple[float, float] = RAGAS_WEIGHTS
    tp: list[str] = Field(default_factory=list)
    fp: list[str] = Field(default_factory=list)
    fn: list[str] = Field(default_factory=list)
    reason: str | None = None
    error: str | None = None
    raw: str | None = None
    usage: Usage = Field(default_factory=Usage)


# --- shared plumbing -------------------------------------------------------------------------------------


class _Slots:
    """A concurrency limit per event loop: an asyncio.Semaphore is bound to the loop it is used on, and the
    sync wrappers start a new loop per call."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ConfigError(f"judge concurrency must be at least 1, got {limit}")
        self.limit = limit
        self._by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )

    def get(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        if loop not in self._by_loop:
            self._by_loop[loop] = asyncio.Semaphore(self.limit)
        return self._by_loop[loop]


@dataclass
class _Call(Generic[M]):
    """One judge call: the parsed reply or the parse error, with the raw text and its cost either way."""

    parsed: M | None
    raw: str
    error: str | None
    usage: Usage


async def _ajudge(
    model: ChatModel, request: ChatRequest, schema: type[M], slots: _Slots, meter: UsageMeter
) -> _Call[M]:
    # Not `acomplete_structured`: its error would lose the completion, and the usage of a failed call counts.
    constrained = request.model_copy(update={"json_schema": schema.model_json_schema()})
    async with slots.get():
        completion = await model.acomplete(constrained)
    meter.add(completion.usage)
    try:
        parsed, error = parse_structured(completion.text, schema), None
    except StructuredOutputError as exc:
        parsed, error = None, str(exc)
    return _Call(parsed, completion.text, error, completion.usage)


def _sum_usage(usages: Sequence[Usage]) -> Usage:
    total = Usage()
    for usage in usages:
        total = total + usage
    return total


async def _gather(awaitables: Sequence[Awaitable[T]], *, progress: bool, desc: str) -> list[T]:
    """`asyncio.gather` in input order, with a progress bar over completions."""
    with tqdm(total=len(awaitables), desc=desc, unit="pair", disable=not progress) as bar:

        async def tracked(awaitable: Awaitable[T]) -> T:
            result = await awaitable
            bar.update(1)
            return result

        return list(await asyncio.gather(*(tracked(a) for a in awaitables)))


# --- pairwise --------------------------------------------------------------------------------------------


def pairwise_prompt(item: JudgeItem, response_a: str, response_b: str) -> str:
    extra = ""
    if item.reference:
        extra += PAIRWISE_REFERENCE.format(reference=item.reference)
    if item.context:
        extra += PAIRWISE_CONTEXT.format(context=item.context)
    return PAIRWISE_PROMPT.format(
        query=item.question, extra=extra, response_a=response_a, response_b=response_b
    )


# A verdict in terms of the compared systems: "A" is the first answer in order first_as_A, the second in
# order second_as_A.
_AS_SHOWN: dict[Preference, Outcome] = {"A": "first", "B": "second", "tie": "tie"}
_SWAPPED: dict[Preference, Outcome] = {"A": "second", "B": "first", "tie": "tie"}


def agreed_outcome(first_as_a: Preference, second_as_a: Preference) -> Outcome:
    """The outcome for the first answer given both orders' verdicts: a win needs both orders to agree."""
    seen_first, seen_second = _AS_SHOWN[first_as_a], _SWAPPED[second_as_a]
    return seen_first if seen_first == seen_second else "tie"


def overall_outcome(outcomes: Mapping[str, Outcome]) -> Outcome:
    """The majority of the three criteria: a system must win at least two of them, otherwise a tie."""
    sides: tuple[Outcome, Outcome] = ("first", "second")
    for side in sides:
        if sum(outcomes[c] == side for c in CRITERIA) >= 2:
            return side
    return "tie"


def _combine(item: JudgeItem, first: str, second: str, judgements: list[OrderJudgement]) -> PairwiseResult:
    usage = _sum_usage([j.usage for j in judgements])
    errors = [f"{j.order}: {j.error}" for j in judgements if j.error]
    if errors:
        return PairwiseResult(
            item_id=item.id,
            first=first,
            second=second,
            status="invalid",
            judgements=judgements,
            error="; ".join(errors),
            usage=usage,
        )
    one, two = (j.verdict for j in judgements)
    assert one is not None and two is not None
    outcomes: dict[str, Outcome] = {
        c: agreed_outcome(getattr(one, c).better, getattr(two, c).better) for c in CRITERIA
    }
    outcomes[OVERALL] = overall_outcome(outcomes)
    return PairwiseResult(
        item_id=item.id,
        first=first,
        second=second,
        status="valid",
        outcomes=outcomes,
        judgements=judgements,
        usage=usage,
    )


class PairwiseJudge:
    """DoctorRAG's pairwise comparison on comprehensiveness, relevance and safety, judged in both orders.

    `concurrency` bounds the judge calls in flight (each comparison makes two); `usage` is the running total
    of every call this judge made."""

    def __init__(
        self,
        model: ChatModel,
        *,
        max_tokens: int = 768,
        temperature: float = 0.0,
        seed: int | None = None,
        concurrency: int = 4,
    ) -> None:
        self.model = model
        self.params = {"max_tokens": max_tokens, "temperature": temperature, "seed": seed}
        self._slots = _Slots(concurrency)
        self._meter = UsageMeter()

    @property
    def usage(self) -> Usage:
        return self._meter.total

    async def _ajudge_order(self, item: JudgeItem, order: Order, a: str, b: str) -> OrderJudgement:
        request = ChatRequest.of(pairwise_prompt(item, a, b), system=PAIRWISE_SYSTEM, **self.params)
        call = await _ajudge(self.model, request, PairwiseVerdict, self._slots, self._meter)
        return OrderJudgement(
            order=order, verdict=call.parsed, raw=call.raw, error=call.error, usage=call.usage
        )

    async def acompare(
        self, item: JudgeItem, first: str, second: str, *, names: tuple[str, str] = ("first", "second")
    ) -> PairwiseResult:
        """Judge `first` against `second` (the answers' texts) in both orders at once."""
        judgements = await asyncio.gather(
            self._ajudge_order(item, "first_as_A", first, second),
            self._ajudge_order(item, "second_as_A", second, first),
        )
        return _combine(item, names[0], names[1], list(judgements))

    def compare(
        self, item: JudgeItem, first: str, second: str, *, names: tuple[str, str] = ("first", "second")
    ) -> PairwiseResult:
        """Synchronous `acompare` (from async code, await `acompare` instead)."""
        return asyncio.run(self.acompare(item, first, second, names=names))


def _check_answers(items: Sequence[JudgeItem], answers: Mapping[str, Sequence[str]]) -> None:
    if len(answers) < 2:
        raise InvalidInputError(f"a win matrix needs at least two systems, got {len(answers)}")
    if not items:
        raise InvalidInputError("a win matrix needs at least one question")
    for system, texts in answers.items():
        if len(texts) != len(items):
            raise InvalidInputError(f"system {system!r} has {len(texts)} answers for {len(items)} questions")


async def awin_matrix(
    judge: PairwiseJudge,
    items: Sequence[JudgeItem],
    answers: Mapping[str, Sequence[str]],
    *,
    progress: bool = False,
) -> WinMatrix:
    """Compare every pair of systems on every question. `answers[system][k]` answers `items[k]`; the
    systems' order in `answers` is the matrices' row and column order."""
    _check_answers(items, answers)
    systems = list(answers)
    pending = [
        judge.acompare(item, answers[a][k], answers[b][k], names=(a, b))
        for k, item in enumerate(items)
        for a, b in combinations(systems, 2)
    ]
    comparisons = await _gather(pending, progress=progress, desc="pairwise judging")
    return tabulate(systems, comparisons)


def win_matrix(
    judge: PairwiseJudge,
    items: Sequence[JudgeItem],
    answers: Mapping[str, Sequence[str]],
    *,
    progress: bool = False,
) -> WinMatrix:
    """Synchronous `awin_matrix`."""
    return asyncio.run(awin_matrix(judge, items, answers, progress=progress))


def _rate(wins: int, ties: int, losses: int) -> float | None:
    valid = wins + ties + losses  # invalid comparisons are left out of the denominator
    return wins / valid if valid else None


def _zeros(n: int) -> list[list[int]]:
    return [[0] * n for _ in range(n)]


def _criterion_matrix(
    criterion: str, systems: list[str], comparisons: Sequence[PairwiseResult]
) -> CriterionMatrix:
    index = {name: i for i, name in enumerate(systems)}
    n = len(systems)
    wins, ties, losses, invalid = _zeros(n), _zeros(n), _zeros(n), _zeros(n)
    for result in comparisons:
        i, j = index[result.first], index[result.second]
        if result.status == "invalid":
            invalid[i][j] += 1
            invalid[j][i] += 1
            continue
        outcome = result.outcomes[criterion]
        if outcome == "tie":
            ties[i][j] += 1
            ties[j][i] += 1
        else:
            winner, loser = (i, j) if outcome == "first" else (j, i)
            wins[winner][loser] += 1
            losses[loser][winner] += 1
    rates = [
        [None if i == j else _rate(wins[i][j], ties[i][j], losses[i][j]) for j in range(n)] for i in range(n)
    ]
    return CriterionMatrix(
        criterion=criterion,
        systems=systems,
        rates=rates,
        wins=wins,
        ties=ties,
        losses=losses,
        invalid=invalid,
    )


def tabulate(systems: Sequence[str], comparisons: Sequence[PairwiseResult]) -> WinMatrix:
    """The win matrices of finished comparisons (e.g. reloaded from JSON)."""
    names = list(systems)
    unknown = {n for r in comparisons for n in (r.first, r.second)} - set(names)
    if unknown:
        raise InvalidInputError(f"comparisons name systems not in the list: {sorted(unknown)}")
    if any(r.first == r.second for r in comparisons):
        raise InvalidInputError("a comparison pits a system against itself")
    matrices = {c: _criterion_matrix(c, names, comparisons) for c in (*CRITERIA, OVERALL)}
    return WinMatrix(
        systems=names,
        matrices=matrices,
        comparisons=list(comparisons),
        usage=_sum_usage([r.usage for r in comparisons]),
    )


# --- answer quality --------------------------------------------------------------------------------------


def factual_f1(tp: int, fp: int, fn: int) -> float:
    """RAGAS's factual F1: TP / (TP + (FP + FN) / 2)."""
    denominator = tp + 0.5 * (fp + fn)
    if denominator == 0:
        raise InvalidInputError("factual F1 needs at least one statement")
    return tp / denominator


def _check_weights(weights: tuple[float, float]) -> tuple[float, float]:
    if len(weights) != 2 or any(w < 0 for w in weights) or sum(weights) == 0:
        raise ConfigError(f"quality weights must be two non-negative numbers, not both 0; got {weights}")
    return (float(weights[0]), float(weights[1]))


def quality_prompt(answer: str, reference: str, question: str | None) -> str:
    lead = f'Question: "{question}"\n' if question else ""
    return QUALITY_PROMPT.format(question=lead, answer=answer, reference=reference)


class AnswerQualityJudge:
    """RAGAS-style answer correctness against a reference: weights[0]·factual F1 + weights[1]·cosine
    similarity, divided by the weights' sum (RAGAS's defaults 0.75 / 0.25 sum to 1)."""

    def __init__(
        self,
        model: ChatModel,
        embedder: Embedder,
        *,
        weights: tuple[float, float] = RAGAS_WEIGHTS,
        max_tokens: int = 1024,
        temperature: float = 0.0,
        seed: int | None = None,
        concurrency: int = 4,
    ) -> None:
        self.model = model
        self.embedder = embedder
        self.weights = _check_weights(weights)
        self.params = {"max_tokens": max_tokens, "temperature": temperature, "seed": seed}
        self._slots = _Slots(concurrency)
        self._meter = UsageMeter()

    @property
    def usage(self) -> Usage:
        return self._meter.total

    async def _similarity(self, answer: str, reference: str) -> float:
        vectors = await asyncio.to_thread(self.embedder.encode, [answer, reference])
        cosine = float(np.dot(vectors[0], vectors[1]))  # rows are unit length
        # Clamped so the blend stays in [0, 1]: float error can exceed 1, unrelated texts can go below 0.
        return min(max(cosine, 0.0), 1.0)

    def _blend(self, f1: float, similarity: float) -> float:
        w_f1, w_sim = self.weights
        return (w_f1 * f1 + w_sim * similarity) / (w_f1 + w_sim)

    async def ascore(self, answer: str, reference: str, *, question: str | None = None) -> QualityScore:
        if not reference.strip():
            raise InvalidInputError("answer quality needs a non-empty reference answer")
        if not answer.strip():
            return QualityScore(
                status="empty_answer", score=0.0, weights=self.weights, reason="the answer is empty"
            )
        similarity = await self._similarity(answer, reference)
        request = ChatRequest.of(
            quality_prompt(answer, reference, question), system=QUALITY_SYSTEM, **self.params
        )
        call = await _ajudge(self.model, request, StatementClassification, self._slots, self._meter)
        found = call.parsed
        if found is None:
            return QualityScore(
                status="invalid",
                similarity=similarity,
                weights=self.weights,
                error=call.error,
                raw=call.raw,
                usage=call.usage,
            )
        f1 = factual_f1(len(found.tp), len(found.fp), len(found.fn))
        return QualityScore(
            status="scored",
            score=self._blend(f1, similarity),
            f1=f1,
            similarity=similarity,
            weights=self.weights,
            tp=found.tp,
            fp=found.fp,
            fn=found.fn,
            raw=call.raw,
            usage=call.usage,
        )

    def score(self, answer: str, reference: str, *, question: str | None = None) -> QualityScore:
        """Synchronous `ascore` (from async code, await `ascore` instead)."""
        return asyncio.run(self.ascore(answer, reference, question=question))
