"""Markdown reports and plots over run directories built from real MedQA and DDXPlus rows."""

from __future__ import annotations

import ast
import csv
import re
import struct
from pathlib import Path

import matplotlib.image as mpimg
import numpy as np
import pytest

from clinrag.core.errors import InvalidInputError
from clinrag.core.models import Answer, Gold, RankedDiagnosis, StructuredResult
from clinrag.core.usage import Usage
from clinrag.eval import plots
from clinrag.eval.report import write_report
from clinrag.eval.results import CaseResult, MetricSummary, RunConfig, RunDirectory, RunSummary, TurnScore
from tests.eval.test_compare import (
    build_medqa_run,
    correct,
    longest_option,
    option_a,
    read_medqa,
    shortest_option,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) from the IHDR chunk, after checking the PNG signature."""
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC, f"{path} is not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def assert_png(path: Path, min_width: int = 300, min_height: int = 200) -> None:
    assert path.is_file()
    width, height = png_size(path)
    assert width >= min_width and height >= min_height


def table_blocks(markdown: str) -> list[list[str]]:
    blocks, current = [], []
    for line in markdown.splitlines():
        if line.startswith("|"):
            current.append(line)
        elif current:
            blocks.append(current)
            current = []
    return blocks + ([current] if current else [])


def cells(line: str) -> list[str]:
    assert line.startswith("|") and line.endswith("|"), line
    return [c.strip() for c in re.split(r"(?<!\\)\|", line[1:-1])]


def assert_valid_tables(markdown: str) -> list[list[list[str]]]:
    """Each table: header, a separator and rows all of the same width; returns the parsed cells."""
    parsed = []
    for block in table_blocks(markdown):
        header = cells(block[0])
        assert len(block) >= 3, block
        assert all(re.fullmatch(r":?-{3,}:?", c) for c in cells(block[1])), block[1]
        assert len(cells(block[1])) == len(header)
        rows = [cells(line) for line in block[2:]]
        assert all(len(row) == len(header) for row in rows), block
        parsed.append([header, *rows])
    return parsed


def images(markdown: str) -> list[str]:
    return re.findall(r"!\[[^\]]*\]\(([^)]+)\)", markdown)


# ---- DDXPlus differential runs with per-turn scores -------------------------------------------------------


def read_ddxplus(data_dir: Path, n: int) -> list[dict]:
    with (data_dir / "ddxplus" / "test_patients_mini.csv").open(encoding="utf-8", newline="") as handle:
        rows = [row for _, row in zip(range(n), csv.DictReader(handle), strict=False)]
    for row in rows:
        row["ddx"] = [name for name, _ in ast.literal_eval(row["top5_diagnoses"])][:10]
        row["features_list"] = ast.literal_eval(row["features"])
    return rows


def ddx_scores(ranked: list[str], gold: str) -> dict[str, float]:
    rank = ranked.index(gold) + 1 if gold in ranked[:10] else 11
    return {"rank": float(rank), **{f"gtpa@{k}": float(rank <= k) for k in (1, 5)}}


def growing_turns(row: dict) -> list[TurnScore]:
    """An interactive differential that reveals one more candidate per question: 1, 3 then 5 visible."""
    return [
        TurnScore(
            iteration=i, questions_asked=2 * i, scores=ddx_scores(row["ddx"][: 1 + 2 * i], row["diagnosis"])
        )
        for i in range(3)
    ]


def build_ddx_run(path: Path, rows: list[dict], method: str, *, interactive: bool) -> None:
    run = RunDirectory(path)
    ids = [f"ddx-{i}" for i in range(len(rows))]
    run.write_config(
        RunConfig(
            dataset="ddxplus", method=method, data_path="ddxplus", case_ids=ids, created_at="2024-01-01"
        )
    )
    for case_id, row in zip(ids, rows, strict=True):
        turns = growing_turns(row) if interactive else []
        final = row["ddx"][:5] if interactive else list(reversed(row["ddx"]))
        scores = ddx_scores(final, row["diagnosis"])
        if turns:
            scores["delta_progress"] = turns[0].scores["rank"] - turns[-1].scores["rank"]
        answer = Answer(
            case_id=case_id,
            method=method,
            result=StructuredResult(ddx=[RankedDiagnosis(name=name) for name in final]),
            usage=Usage(calls=len(turns) or 1, prompt_tokens=100, completion_tokens=20),
        )
        run.append(
            CaseResult(
                case_id=case_id,
                task="ddx",
                gold=Gold(answer=row["diagnosis"]),
                answer=answer,
                scores=scores,
                turns=turns,
                elapsed_s=1.0,
                run_id="r",
            )
        )


# ---- plots ----------


def _turn_case(case_id: str, turns: list[tuple[int, int, float, float]]) -> CaseResult:
    return CaseResult(
        case_id=case_id,
        task="ddx",
        answer=Answer(case_id=case_id, method="m"),
        turns=[
            TurnScore(iteration=i, questions_asked=q, scores={"gtpa@1": g, "rank": r}) for i, q, g, r in turns
        ],
        run_id="r",
    )


def test_turn_curve_by_hand_carries_stopped_cases_forward():
    results = [
        _turn_case("a", [(0, 0, 0.0, 4.0), (1, 2, 1.0, 1.0)]),
        _turn_case("b", [(0, 0, 0.0, 11.0)]),  # stopped after the first iteration
        CaseResult(case_id="c", task="ddx", answer=Answer(case_id="c", method="m"), run_id="r"),  # no turns
    ]
    first, second = plots.turn_curve(results)
    assert (first.iteration, first.n, first.questions_asked) == (0, 2, 0.0)
    assert first.scores == {"gtpa@1": 0.0, "rank": 7.5}
    assert second.questions_asked == 1.0  # (2 + 0) / 2
    assert second.scores == {"gtpa@1": 0.5, "rank": 6.0}  # (1 + 0) / 2, (1 + 11) / 2
    with pytest.raises(InvalidInputError, match="no case has per-turn scores"):
        plots.turn_curve(results[2:])


def test_metric_bars_and_win_matrix_png(tmp_path: Path):
    summaries = [
        MetricSummary(mean=0.5, ci_low=0.3, ci_high=0.7, n=30),
        MetricSummary(mean=0.2, ci_low=0.1, ci_high=0.4, n=30),
    ]
    assert_png(plots.metric_bars(["x", "y"], summaries, tmp_path / "bars.png", metric="accuracy"))
    rates = [[None, 0.7, 0.6], [0.3, None, 0.45], [0.4, 0.55, None]]
    assert_png(plots.win_matrix_heatmap(["DoctorRAG", "RAG", "CoT"], rates, tmp_path / "win.png"))
    with pytest.raises(InvalidInputError, match=r"\[0\]\[1\]"):
        plots.win_matrix_heatmap(["a", "b"], [[None, None], [0.5, None]], tmp_path / "bad.png")
    with pytest.raises(InvalidInputError, match="2×2"):
        plots.win_matrix_heatmap(["a", "b"], [[None, 0.5]], tmp_path / "bad.png")
    with pytest.raises(InvalidInputError):
        plots.metric_bars(["x"], summaries, tmp_path / "bad.png", metric="accuracy")


# UMAP's numba kernels compile in each new process: the first projection takes 12 s on two idle cores, over
# 20 s under the suite's load.
@pytest.mark.slow
def test_umap_greys_labels_beyond_top_n(tmp_path: Path, data_dir: Path):
    rows = read_ddxplus(data_dir, 60)
    codes = sorted({code for row in rows for code in row["features_list"]})
    column = {code: i for i, code in enumerate(codes)}
    vectors = np.zeros((len(rows), len(codes)), dtype=np.float32)  # multi-hot evidence codes per patient
    for i, row in enumerate(rows):
        vectors[i, [column[c] for c in row["features_list"]]] = 1.0
    labels = [row["diagnosis"] for row in rows]
    assert len(set(labels)) > 3

    out = plots.umap_projection(vectors, labels, tmp_path / "umap.png", top_n=3, n_neighbors=5)
    assert_png(out)
    pixels = mpimg.imread(out)[..., :3]
    grey = np.abs(pixels - np.array([0xBB, 0xBB, 0xBB]) / 255).max(axis=-1) < 0.02
    assert grey.sum() > 20  # the patients outside the top 3 diagnoses are drawn in grey

    with pytest.raises(InvalidInputError, match="one label per row"):
        plots.umap_projection(vectors, labels[:-1], tmp_path / "bad.png")


# ---- the report ----------


@pytest.fixture(scope="module")
def medqa_rows(data_dir: Path) -> list[dict]:
    return read_medqa(data_dir, 30)


def test_report_on_medqa_runs(tmp_path: Path, medqa_rows: list[dict]):
    rows = medqa_rows
    build_medqa_run(tmp_path / "longest", rows, "longest", longest_option)
    build_medqa_run(tmp_path / "option-a", rows, "option-a", option_a, fail=frozenset({0, 1}))
    build_medqa_run(tmp_path / "shortest", rows, "shortest", shortest_option, ids=range(0, 25))
    # A completed run: its summary.json is what the report shows (sentinel wall time 321.5 s).
    longest_acc = sum(correct(rows, longest_option)) / 30
    RunDirectory(tmp_path / "longest").write_summary(
        RunSummary(
            dataset="medqa",
            method="longest",
            model="none",
            n_cases=30,
            n_finished=30,
            n_errors=0,
            metrics={"accuracy": MetricSummary(mean=longest_acc, ci_low=0.1, ci_high=0.9, n=30)},
            usage=Usage(calls=30),
            calls_per_case=1.0,
            tokens_per_case=99.0,
            wall_s=321.5,
            run_ids=["longest-1"],
        )
    )
    out = tmp_path / "report"
    report = write_report([tmp_path / "longest", tmp_path / "option-a", tmp_path / "shortest"], out)
    assert report == out / "report.md"
    text = report.read_text(encoding="utf-8")
    tables = assert_valid_tables(text)

    runs_table = tables[0]
    header = runs_table[0]
    assert header[:7] == ["run", "dataset", "method", "model", "scoring", "n", "errors"]
    assert header[-3:] == ["calls/case", "tokens/case", "wall s"]
    by_run = {row[0]: dict(zip(header, row, strict=True)) for row in runs_table[1:]}
    assert by_run["longest"]["wall s"] == "321.5"
    assert by_run["longest"]["accuracy"] == f"{longest_acc:.3f} [0.100, 0.900]"
    # option-a and shortest have no summary.json: computed from results.jsonl
    hits_a = [0, 0, *correct(rows[2:], option_a)]
    assert by_run["option-a"]["errors"] == "2"
    assert by_run["option-a"]["accuracy"].startswith(f"{sum(hits_a) / 30:.3f} [")
    assert by_run["shortest"]["n"] == "25/25"
    tokens = np.mean([len(row["question"].split()) + 1 for row in rows[:25]])
    assert by_run["shortest"]["tokens/case"] == f"{tokens:.1f}"
    assert "summary computed from results.jsonl" in text

    # three pairs, each with its own table; W/T/L counted here from the rules' answers
    assert len(tables) == 4
    assert "5 only in A, 0 only in B" in text  # longest (30 cases) vs shortest (25)
    longest_vs_a = dict(zip(tables[1][0], tables[1][1], strict=True))
    a, b = correct(rows, longest_option), hits_a
    wtl = (
        sum(x > y for x, y in zip(a, b, strict=True)),
        sum(x == y for x, y in zip(a, b, strict=True)),
        sum(x < y for x, y in zip(a, b, strict=True)),
    )
    assert longest_vs_a["W/T/L"] == "{}/{}/{}".format(*wtl)
    assert longest_vs_a["n"] == "30"

    linked = images(text)
    assert len(linked) == 2  # accuracy bars and the derived win matrix (three runs)
    for name in linked:
        assert not Path(name).is_absolute()
        assert_png(out / name)


@pytest.mark.slow  # the patients' UMAP projection: see test_umap_greys_labels_beyond_top_n
def test_report_with_turns_k_series_umap_and_two_datasets(
    tmp_path: Path, data_dir: Path, medqa_rows: list[dict]
):
    ddx_rows = read_ddxplus(data_dir, 40)
    build_ddx_run(tmp_path / "meddx", ddx_rows, "meddx", interactive=True)
    build_ddx_run(tmp_path / "static", ddx_rows, "static", interactive=False)
    ks = (1, 2, 4)
    for k in ks:  # "rag" with deeper retrieval: the option context grows with k
        run = build_medqa_run(tmp_path / f"rag-k{k}", medqa_rows[:10], "rag", longest_option, params={"k": k})
        results = run.results()
        run.results_path.unlink()
        for result, row in zip(results, medqa_rows[:10], strict=True):
            extra = sum(len(text.split()) for text in list(row["options"].values())[:k])
            result.answer.usage.prompt_tokens += extra
            run.append(result)
    vectors = np.random.default_rng(0).normal(size=(30, 8)).astype(np.float32)
    labels = [row["diagnosis"] for row in ddx_rows[:30]]
    win = {"systems": ["meddx", "static"], "rates": [[None, 0.6], [0.4, None]], "title": "Judge wins"}

    dirs = [tmp_path / "meddx", tmp_path / "static"] + [tmp_path / f"rag-k{k}" for k in ks]
    text = write_report(dirs, tmp_path / "out", patients=(vectors, labels), win_matrix=win).read_text()
    tables = assert_valid_tables(text)
    (per_turn,) = [t for t in tables if t[0][:3] == ["run", "iteration", "questions asked"]]
    assert [row[:3] for row in per_turn[1:]] == [["meddx", str(i), f"{2 * i:.2f}"] for i in range(3)]
    for i, row in enumerate(per_turn[1:]):  # GTPA@5 per iteration, from the revealed candidates
        expected = np.mean([r["diagnosis"] in r["ddx"][: 1 + 2 * i][:5] for r in ddx_rows])
        assert row[per_turn[0].index("gtpa@5")] == f"{expected:.3f}"
    assert "## Dataset `ddxplus`" in text and "## Dataset `medqa`" in text
    assert "rank (lower is better)" in text
    # the static run has no turns; the interactive one does
    assert "### Differential vs questions asked" in text and "### Token cost vs k" in text
    assert "`meddx` (A) vs `static` (B)" in text and "`meddx` (A) vs `rag-k1` (B)" not in text

    linked = images(text)
    names = {Path(name).name for name in linked}
    assert {
        "d0-ddxplus-turns.png",
        "d1-medqa-tokens-vs-k.png",
        "win-matrix.png",
        "patients-umap.png",
    } <= names
    for name in linked:
        assert_png(tmp_path / "out" / name)

    series = plots.k_series(
        [(d.name, RunDirectory(d).config(), _summary(d)) for d in dirs if d.name.startswith("rag")]
    )
    expected = [
        np.mean(
            [
                len(r["question"].split()) + 1 + sum(len(t.split()) for t in list(r["options"].values())[:k])
                for r in medqa_rows[:10]
            ]
        )
        for k in ks
    ]
    ((name, points),) = series.items()
    assert name == "rag (none)"
    assert [k for k, _ in points] == [1.0, 2.0, 4.0]
    assert [t for _, t in points] == pytest.approx(expected)


def _summary(path: Path) -> RunSummary:
    from clinrag.eval.summary import summarize

    run = RunDirectory(path)
    return summarize(run.config(), run.results(), wall_s=0.0)


def test_report_without_runs_or_with_bad_win_matrix(tmp_path: Path, medqa_rows: list[dict]):
    with pytest.raises(InvalidInputError, match="at least one run"):
        write_report([], tmp_path / "out")
    build_medqa_run(tmp_path / "a", medqa_rows[:5], "longest", longest_option)
    with pytest.raises(InvalidInputError, match="systems"):
        write_report([tmp_path / "a"], tmp_path / "out", win_matrix={"rates": []})
    text = write_report([tmp_path / "a"], tmp_path / "out").read_text()
    assert "Paired comparisons" not in text  # a single run has nothing to pair with
    assert_valid_tables(text)


def test_report_draws_the_grid_of_two_varied_parameters(tmp_path: Path, data_dir: Path):
    rows = read_medqa(data_dir, 20)
    right = correct(rows, longest_option)
    expected = {}
    dirs = []
    for m in (1, 2, 3):
        for n in (1, 2):
            fail = frozenset(range(m * n))  # a cell's first m·n cases error out and score 0
            path = tmp_path / f"imedrag-{m}x{n}"
            run = build_medqa_run(
                path, rows, "imedrag", longest_option, params={"iterations": m, "queries": n}, fail=fail
            )
            if (m, n) == (3, 2):  # served from the response cache: still one request per case
                results = run.results()
                run.results_path.unlink()
                for result in results:
                    result.answer.usage = Usage(cache_hits=1)
                    run.append(result)
            expected[m, n] = np.mean([0 if i in fail else right[i] for i in range(len(rows))])
            dirs.append(path)
    build_medqa_run(tmp_path / "rag", rows, "rag", shortest_option, params={"k": 5})
    dirs.append(tmp_path / "rag")

    out = tmp_path / "out"
    text = write_report(dirs, out).read_text()
    tables = assert_valid_tables(text)
    assert "### imedrag (none): accuracy by iterations × queries" in text
    grid_table = next(t for t in tables if t[0][0] == "queries \\ iterations")
    assert grid_table[0][1:] == ["1", "2", "3"]
    for row in grid_table[1:]:
        n = int(row[0])
        for m, cell in zip((1, 2, 3), row[1:], strict=True):
            assert cell == f"{expected[m, n]:.3f} (1.0 calls)"
    runs_table = tables[0]
    assert "cache hits/case" in runs_table[0]
    assert "d0-medqa-grid0.png" in images(text)
    assert_png(out / "d0-medqa-grid0.png")

    (grid,) = plots.param_grids([(RunDirectory(d).config(), _summary(d)) for d in dirs], "accuracy")
    assert (grid.x, grid.y, grid.xs, grid.ys) == ("iterations", "queries", [1.0, 2.0, 3.0], [1.0, 2.0])
    assert grid.means[1, 2] == pytest.approx(expected[3, 2])
