"""Run comparison on real MedQA questions answered by simple deterministic rules."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from scipy import stats as sps

from clinrag.core.errors import DataFormatError, InvalidInputError
from clinrag.core.models import Answer, Gold, StructuredResult
from clinrag.core.usage import Usage
from clinrag.eval.compare import Comparison, compare_runs, scoring_warning
from clinrag.eval.results import CaseResult, RunConfig, RunDirectory

Rule = Callable[[dict[str, str]], str]


def longest_option(options: dict[str, str]) -> str:
    return max(options, key=lambda key: (len(options[key]), key))


def shortest_option(options: dict[str, str]) -> str:
    return min(options, key=lambda key: (len(options[key]), key))


def option_a(options: dict[str, str]) -> str:
    return "A"


def read_medqa(data_dir: Path, n: int = 30) -> list[dict]:
    with (data_dir / "medqa" / "us_4options_test.jsonl").open(encoding="utf-8") as handle:
        return [json.loads(line) for _, line in zip(range(n), handle, strict=False)]


def correct(rows: list[dict], rule: Rule) -> list[int]:
    """The test's own scoring: 1 when the rule picks the gold option."""
    return [int(rule(row["options"]) == row["answer_idx"]) for row in rows]


def build_medqa_run(
    path: Path,
    rows: list[dict],
    method: str,
    rule: Rule,
    *,
    dataset: str = "medqa",
    ids: range | None = None,
    params: dict | None = None,
    fail: frozenset[int] = frozenset(),
) -> RunDirectory:
    """A run directory: case i answers rows[i] with `rule` (cases in `fail` error out, scored 0)."""
    ids = ids if ids is not None else range(len(rows))
    run = RunDirectory(path)
    run.write_config(
        RunConfig(
            dataset=dataset,
            method=method,
            method_params=params or {},
            data_path="medqa/us_4options_test.jsonl",
            case_ids=[f"medqa-{i}" for i in ids],
            created_at="2024-01-01T00:00:00Z",
        )
    )
    for i in ids:
        run.append(_medqa_result(rows[i], f"medqa-{i}", method, rule, failed=i in fail))
    return run


def _medqa_result(row: dict, case_id: str, method: str, rule: Rule, *, failed: bool) -> CaseResult:
    choice = None if failed else rule(row["options"])
    answer = Answer(
        case_id=case_id,
        method=method,
        text="" if choice is None else row["options"][choice],
        result=StructuredResult(choice=choice),
        usage=Usage(calls=1, prompt_tokens=len(row["question"].split()), completion_tokens=1),
        error="AnswerParseError: no option named" if failed else None,
    )
    return CaseResult(
        case_id=case_id,
        task="multiple_choice",
        gold=Gold(answer=row["answer_idx"]),
        answer=answer,
        scores={"accuracy": float(choice == row["answer_idx"])},
        elapsed_s=0.5,
        run_id=f"{method}-1",
    )


@pytest.fixture(scope="module")
def rows(data_dir: Path) -> list[dict]:
    return read_medqa(data_dir, 40)


def _wtl(a: list[int], b: list[int]) -> tuple[int, int, int]:
    return (
        sum(x > y for x, y in zip(a, b, strict=True)),
        sum(x == y for x, y in zip(a, b, strict=True)),
        sum(x < y for x, y in zip(a, b, strict=True)),
    )


def test_compare_two_rules_on_medqa(tmp_path: Path, rows: list[dict]):
    first = rows[:30]
    build_medqa_run(tmp_path / "longest", first, "longest", longest_option)
    build_medqa_run(tmp_path / "a", first, "option-a", option_a)
    comparison = compare_runs(tmp_path / "longest", tmp_path / "a")

    assert (comparison.dataset, comparison.method_a, comparison.method_b) == ("medqa", "longest", "option-a")
    assert (comparison.n_paired, comparison.unpaired_a, comparison.unpaired_b) == (30, 0, 0)
    assert list(comparison.metrics) == ["accuracy"]
    acc = comparison.metrics["accuracy"]
    a, b = correct(first, longest_option), correct(first, option_a)
    assert (acc.wins, acc.ties, acc.losses) == _wtl(a, b)
    assert acc.mean_a == pytest.approx(sum(a) / 30) and acc.mean_b == pytest.approx(sum(b) / 30)
    assert acc.p_a_beats_b == pytest.approx(acc.wins / 30)
    reference = sps.ttest_rel(a, b)
    assert acc.t_stat == pytest.approx(reference.statistic)
    assert acc.p_value == pytest.approx(reference.pvalue)
    assert Comparison.model_validate_json(comparison.model_dump_json()) == comparison


def test_pairs_by_case_id_and_counts_unpaired(tmp_path: Path, rows: list[dict]):
    build_medqa_run(tmp_path / "a", rows, "longest", longest_option, ids=range(0, 30))
    # B finished cases 5..39, written in reverse order: pairing must follow ids, not line positions.
    build_medqa_run(tmp_path / "b", rows, "shortest", shortest_option, ids=range(39, 4, -1))
    comparison = compare_runs(tmp_path / "a", tmp_path / "b")
    assert (comparison.n_paired, comparison.unpaired_a, comparison.unpaired_b) == (25, 5, 10)
    common = rows[5:30]
    acc = comparison.metrics["accuracy"]
    assert acc.n == 25
    assert (acc.wins, acc.ties, acc.losses) == _wtl(
        correct(common, longest_option), correct(common, shortest_option)
    )


def test_failed_answers_count_against_the_method(tmp_path: Path, rows: list[dict]):
    first = rows[:20]
    failed = frozenset(i for i in range(20) if correct([first[i]], longest_option)[0])  # break every hit
    build_medqa_run(tmp_path / "a", first, "longest", longest_option, fail=failed)
    build_medqa_run(tmp_path / "b", first, "longest", longest_option)
    acc = compare_runs(tmp_path / "a", tmp_path / "b").metrics["accuracy"]
    assert acc.n == 20 and acc.mean_a == 0.0
    assert (acc.wins, acc.ties, acc.losses) == (0, 20 - len(failed), len(failed))


def test_only_metrics_in_both_runs_are_compared(tmp_path: Path, rows: list[dict]):
    build_medqa_run(tmp_path / "a", rows[:10], "longest", longest_option)
    run_b = RunDirectory(tmp_path / "b")
    run_b.write_config(RunDirectory(tmp_path / "a").config().model_copy(update={"method": "extra"}))
    for result in RunDirectory(tmp_path / "a").results():
        result.scores["f1"] = 0.5
        run_b.append(result)
    comparison = compare_runs(tmp_path / "a", tmp_path / "b")
    assert list(comparison.metrics) == ["accuracy"]
    assert comparison.metrics["accuracy"].ties == 10


def test_refuses_runs_on_different_datasets(tmp_path: Path, rows: list[dict]):
    build_medqa_run(tmp_path / "a", rows[:10], "longest", longest_option)
    build_medqa_run(tmp_path / "b", rows[:10], "longest", longest_option, dataset="medmcqa")
    with pytest.raises(InvalidInputError, match=r"different datasets.*'medqa'.*'medmcqa'"):
        compare_runs(tmp_path / "a", tmp_path / "b")


def test_refuses_fewer_than_two_common_cases(tmp_path: Path, rows: list[dict]):
    build_medqa_run(tmp_path / "a", rows, "longest", longest_option, ids=range(0, 5))
    build_medqa_run(tmp_path / "b", rows, "option-a", option_a, ids=range(4, 9))
    with pytest.raises(InvalidInputError, match="share 1 finished case"):
        compare_runs(tmp_path / "a", tmp_path / "b")


def test_not_a_run_directory(tmp_path: Path, rows: list[dict]):
    build_medqa_run(tmp_path / "a", rows[:5], "longest", longest_option)
    with pytest.raises(InvalidInputError, match="not an evaluation run directory"):
        compare_runs(tmp_path / "a", tmp_path / "missing")


def _write_quality(run: RunDirectory, scores: dict[str, float | None]) -> None:
    lines = [json.dumps({"case_id": cid, "status": "scored", "score": s}) for cid, s in scores.items()]
    (run.path / "quality.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_judge_quality_scores_are_compared_on_the_cases_both_runs_had_judged(
    tmp_path: Path, rows: list[dict]
):
    first = rows[:20]
    run_a = build_medqa_run(tmp_path / "longest", first, "longest", longest_option)
    run_b = build_medqa_run(tmp_path / "a", first, "option-a", option_a)
    # the answer's length as a stand-in judge score; case 3 of A had an invalid judge reply (no score)
    quality_a = {
        f"medqa-{i}": len(row["options"][longest_option(row["options"])]) / 100 for i, row in enumerate(first)
    }
    quality_a["medqa-3"] = None
    quality_b = {f"medqa-{i}": len(row["options"]["A"]) / 100 for i, row in enumerate(first)}
    _write_quality(run_a, quality_a)
    _write_quality(run_b, quality_b)

    judged = compare_runs(run_a.path, run_b.path).metrics["judge_quality"]
    kept = [i for i in range(20) if i != 3]
    a = [quality_a[f"medqa-{i}"] for i in kept]
    b = [quality_b[f"medqa-{i}"] for i in kept]
    assert judged.n == 19
    assert judged.mean_a == pytest.approx(sum(a) / 19) and judged.mean_b == pytest.approx(sum(b) / 19)
    assert judged.p_value == pytest.approx(sps.ttest_rel(a, b).pvalue)
    assert (judged.wins, judged.ties, judged.losses) == _wtl(a, b)

    (run_b.path / "quality.jsonl").write_text('{"case_id": "medqa-0", "score": "high"}\n', encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"quality\.jsonl:1"):
        compare_runs(run_a.path, run_b.path)


def test_runs_scored_in_different_modes_are_flagged_by_compare_and_report(tmp_path: Path, rows: list[dict]):
    from clinrag.eval.report import write_report

    first = rows[:10]
    for name, scoring in (("served", "ranking"), ("embedded", "loglik")):
        run = build_medqa_run(tmp_path / name, first, name, longest_option)
        run.write_config(run.config().model_copy(update={"scoring": scoring}))
    comparison = compare_runs(tmp_path / "served", tmp_path / "embedded")
    assert (comparison.scoring_a, comparison.scoring_b) == ("ranking", "loglik")
    warning = scoring_warning({"A": comparison.scoring_a, "B": comparison.scoring_b})
    assert warning is not None and "A: ranking, B: loglik" in warning
    assert scoring_warning({"A": "loglik", "B": "loglik"}) is None

    report = write_report([tmp_path / "served", tmp_path / "embedded"], tmp_path / "report")
    text = report.read_text(encoding="utf-8")
    assert "Warning: the runs scored options in different modes (served: ranking, embedded: loglik)" in text
    assert "| served | medqa | served | none | ranking |" in text
