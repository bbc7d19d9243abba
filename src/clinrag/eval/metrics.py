"""Per-case metrics: accuracy, multi-select set metrics, differential ranks (GTPA@k, rank, Δprogress).

Labels are compared in the case's answer space: an option key and its option text name the same answer,
and free labels match case- and whitespace-insensitively. Aggregation (means, CIs) happens elsewhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from clinrag.core.errors import InvalidInputError
from clinrag.core.models import Answer, Case, RankedDiagnosis
from clinrag.eval.results import TurnScore

TOP_K = 10
# MEDDxAgent §3.2: a gold diagnosis missing from the top 10 of the differential counts as rank 11.
RANK_CAP = TOP_K + 1
GTPA_KS = (1, 3, 5, 10)
TURN_METRICS = ("gtpa@1", "gtpa@5", "rank")
SINGLE_CHOICE_TASKS = ("multiple_choice", "diagnosis")
SET_TASKS = ("multi_select", "treatment")


class AnswerSpace:
    """Maps option keys, option texts and free labels to one canonical form, so they compare equal."""

    def __init__(self, options: dict[str, str]) -> None:
        self._canon = {_norm(text): _norm(key) for key, text in options.items()}
        self._canon.update({_norm(key): _norm(key) for key in options})

    def canonical(self, label: str) -> str:
        norm = _norm(label)
        return self._canon.get(norm, norm)


def _norm(label: str) -> str:
    return " ".join(label.casefold().split())


def accuracy(predicted: str | None, gold: str, space: AnswerSpace) -> float:
    return float(predicted is not None and space.canonical(predicted) == space.canonical(gold))


def set_scores(predicted: Iterable[str], gold: Iterable[str], space: AnswerSpace) -> dict[str, float]:
    """Exact-set accuracy, precision, recall and F1. An empty prediction scores precision 0 (it asserted
    nothing correct), so a method cannot score well by abstaining."""
    pred = {space.canonical(label) for label in predicted}
    truth = {space.canonical(label) for label in gold}
    if not truth:
        raise InvalidInputError("multi-select scoring needs at least one gold answer")
    hits = len(pred & truth)
    precision = hits / len(pred) if pred else 0.0
    recall = hits / len(truth)
    f1 = 2 * precision * recall / (precision + recall) if hits else 0.0
    return {"exact_set": float(pred == truth), "precision": precision, "recall": recall, "f1": f1}


def gold_rank(
    ddx: Sequence[RankedDiagnosis],
    gold: str,
    space: AnswerSpace,
    also: Sequence[str] = (),
    code: str | None = None,
) -> int:
    """1-based position of the gold diagnosis within the top 10, or 11 when it is not there. A diagnosis is
    the gold one when its name or one of its own synonyms is the gold name or one of `also` (the gold's
    synonyms), when its code is one of `also`
    exactly (a rare disease's "OMIM:154700"), or when its ICD-10 code and the gold `code` are the same code or
    one's category holds the other (J18 and J18.9)."""
    targets = {space.canonical(name) for name in (gold, *also)}
    for position, item in enumerate(ddx[:TOP_K], 1):
        named = any(space.canonical(name) in targets for name in (item.name, *item.synonyms))
        coded = item.code is not None and space.canonical(item.code) in targets
        if named or coded or _same_code(item.code, code):
            return position
    return RANK_CAP


def _same_code(predicted: str | None, gold: str | None) -> bool:
    if not predicted or not gold:
        return False
    a, b = (code.replace(".", "").upper() for code in (predicted, gold))
    return a.startswith(b) or b.startswith(a)


def ddx_scores(
    ddx: Sequence[RankedDiagnosis],
    gold: str,
    space: AnswerSpace,
    also: Sequence[str] = (),
    code: str | None = None,
) -> dict[str, float]:
    rank = gold_rank(ddx, gold, space, also, code)
    scores = {f"gtpa@{k}": float(rank <= k) for k in GTPA_KS}
    scores["rank"] = float(rank)
    return scores


def delta_progress(ranks: Sequence[float]) -> float:
    """MEDDxAgent's ΔProgress: the gold diagnosis' rank improvement per step, averaged over the N − 1 steps
    between N iterations, (r_1 − r_N) / (N − 1) (positive = better; 0 for one iteration)."""
    return (ranks[0] - ranks[-1]) / (len(ranks) - 1) if len(ranks) > 1 else 0.0


def score_case(case: Case, answer: Answer) -> tuple[dict[str, float], list[TurnScore]]:
    """The case's metric values and, for interactive answers, its per-iteration differential scores.
    A failed answer (empty result) scores 0 / rank 11, so failures count against the method."""
    gold = case.gold
    if gold is None:
        return {}, []
    space = AnswerSpace(case.options)
    result = answer.result
    scores: dict[str, float] = {}
    turns: list[TurnScore] = []
    if case.task in SET_TASKS or (gold.answers and not gold.answer):
        scores.update(set_scores(result.choices, gold.answers, space))
    elif case.task in SINGLE_CHOICE_TASKS and gold.answer is not None:
        predicted = result.choice or (result.ddx[0].name if result.ddx else None)
        scores["accuracy"] = accuracy(predicted, gold.answer, space)
    if case.task in ("ddx", "diagnosis") and gold.answer is not None and (result.ddx or case.task == "ddx"):
        # Free-text cases name the gold diagnosis with synonyms and an ICD-10 code (`text-cases`).
        also, code = gold.answers, case.meta.get("icd10")
        scores.update(ddx_scores(result.ddx, gold.answer, space, also, code))
        turns = [
            TurnScore(
                iteration=snap.iteration,
                questions_asked=snap.questions_asked,
                scores={
                    name: ddx_scores(snap.ddx, gold.answer, space, also, code)[name] for name in TURN_METRICS
                },
            )
            for snap in result.ddx_history
        ]
        if turns:
            ranks = [turn.scores["rank"] for turn in turns]
            scores["delta_progress"] = delta_progress(ranks)
            scores["rank_gain"] = ranks[0] - ranks[-1]  # the whole improvement, first to last iteration
            scores["questions_asked"] = float(turns[-1].questions_asked)
    if case.task == "free_text" and gold.answer:
        from clinrag.eval.text_metrics import text_scores  # nltk/rouge load only when text is scored

        scores.update(text_scores(answer.text, gold.answer, case.language))
    return scores, turns
