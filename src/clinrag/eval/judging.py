"""Judging finished runs: the pairwise win matrix across runs, and answer quality against the reference.

The cases are reloaded from the dataset each run names, so the judge sees the question the method saw.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from clinrag.core.errors import InvalidInputError
from clinrag.core.models import Case, case_text
from clinrag.core.settings import Settings
from clinrag.eval.datasets import load_dataset
from clinrag.eval.judges import (
    AnswerQualityJudge,
    JudgeItem,
    PairwiseJudge,
    QualityScore,
    WinMatrix,
    win_matrix,
)
from clinrag.eval.results import CaseResult, RunDirectory


def _cases(settings: Settings, run: RunDirectory) -> dict[str, Case]:
    config = run.config()
    dataset = load_dataset(config.dataset, config.data_path or None, data_dir=settings.data_dir)
    return {case.id: case for case in dataset.cases}


def reference_answer(case: Case) -> str | None:
    """The gold answer as text: an option key becomes its option text."""
    gold = case.gold
    if gold is None:
        return None
    if gold.answer:
        return case.options.get(gold.answer, gold.answer)
    if gold.answers:
        return "; ".join(case.options.get(label, label) for label in gold.answers)
    return None


def judge_item(case: Case) -> JudgeItem:
    return JudgeItem(id=case.id, question=case_text(case), reference=reference_answer(case))


def judge_runs(
    settings: Settings, run_dirs: Sequence[Path], judge: PairwiseJudge, limit: int | None
) -> WinMatrix:
    """Every pair of runs compared on the cases all of them answered (first `limit` of them, in the first
    run's order). Runs must be on the same dataset."""
    runs = [RunDirectory(path) for path in run_dirs]
    datasets = {run.config().dataset for run in runs}
    if len(datasets) > 1:
        raise InvalidInputError(f"runs to judge must be on one dataset, got {', '.join(sorted(datasets))}")
    names = _system_names(run_dirs)
    answers = [{r.case_id: r for r in run.results()} for run in runs]
    shared = [case_id for case_id in answers[0] if all(case_id in a for a in answers[1:])][:limit]
    if not shared:
        raise InvalidInputError("the runs have no answered case in common")
    cases = _cases(settings, runs[0])
    items = [judge_item(cases[case_id]) for case_id in shared]
    texts = {name: [_text(a[case_id]) for case_id in shared] for name, a in zip(names, answers, strict=True)}
    return win_matrix(judge, items, texts, progress=True)


def _text(result: CaseResult) -> str:
    return result.answer.text or "(no answer)"


def _system_names(run_dirs: Sequence[Path]) -> list[str]:
    names = [Path(path).name for path in run_dirs]
    if len(set(names)) != len(names):
        names = [str(path) for path in run_dirs]
    return names


async def ascore_quality(
    settings: Settings, run_dir: Path, judge: AnswerQualityJudge, limit: int | None
) -> list[tuple[str, QualityScore]]:
    """(case id, quality score) for the run's answered cases that have a reference."""
    run = RunDirectory(run_dir)
    cases = _cases(settings, run)
    scored = []
    for result in run.results()[:limit]:
        case = cases.get(result.case_id)
        reference = reference_answer(case) if case else None
        if reference:
            scored.append(
                (result.case_id, judge.ascore(result.answer.text, reference, question=case_text(case)))
            )
    if not scored:
        raise InvalidInputError(f"{run_dir}: no answered case has a reference answer to score against")
    scores = await asyncio.gather(*(call for _, call in scored))
    return [(case_id, score) for (case_id, _), score in zip(scored, scores, strict=True)]
