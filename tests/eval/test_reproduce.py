"""`clinrag reproduce`: the packaged catalogue names real datasets, methods and metrics, each published figure
with where the paper states it; a reproduction runs its experiments for real (a knowledge base built from
packaged sources, the evaluation runner), writes the table beside the paper's figures, and resumes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clinrag.core.errors import InvalidInputError
from clinrag.core.settings import Settings
from clinrag.eval.datasets import dataset_names
from clinrag.eval.reproduce import Reproduction, experiments, papers
from clinrag.eval.results import RunDirectory
from clinrag.methods.registry import method_names

pytestmark = pytest.mark.integration


def test_the_catalogue_reproduces_the_five_papers_with_real_datasets_and_methods() -> None:
    assert papers() == ["deepdoctor", "doctorrag", "exprag", "imedrag", "meddx"]
    for items in experiments().values():
        for experiment in items:
            assert experiment.dataset in dataset_names() and experiment.method in method_names()
            assert experiment.metric in {"accuracy", "f1", "gtpa@1"}
            assert (experiment.kb_param is None) == (not experiment.kb), experiment
            if experiment.published is not None:
                assert 0 < experiment.published <= 1
                assert "Table" in experiment.where or "abstract" in experiment.where
            else:
                assert experiment.where.startswith(("none", "not given")), experiment


def test_a_reproduction_runs_writes_its_table_and_resumes(
    tmp_path: Path, data_dir: Path, consult_home: Path
) -> None:
    catalogue = tmp_path / "catalogue.jsonl"
    records = [
        {
            "paper": "demo",
            "name": "knn",
            "dataset": "ddxplus",
            "method": "knn-vote",
            "metric": "gtpa@1",
            "published": 0.5,
            "where": "Table 9, the knn row",
        },
        {
            "paper": "demo",
            "name": "consult-kb",
            "dataset": "ddxplus-text",
            "method": "consult",
            "params": {"sources": "packaged:faker-diseases"},
            "kb": ["packaged:faker-diseases"],
            "kb_param": "kb",
            "metric": "gtpa@1",
            "published": None,
            "where": "none: a test",
        },
    ]
    catalogue.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    settings = Settings(home=consult_home, data_dir=data_dir)
    out = tmp_path / "reproduced"
    reproduction = Reproduction(settings, out, limit=2, catalogue=catalogue)
    rows = reproduction.run("demo")
    for row, name in zip(rows, ["knn", "consult-kb"], strict=True):
        summary = RunDirectory(out / name).summary()
        assert row.experiment == name and row.cases == 2 == summary.n_finished
        assert row.ours == summary.metrics["gtpa@1"].mean
    assert rows[0].published == 0.5 and rows[1].published is None
    config = RunDirectory(out / "consult-kb").config()
    assert Path(config.method_params["kb"]).parent == out / "resources"  # built here, from the packaged table
    table = (out / "report.md").read_text(encoding="utf-8")
    assert "| knn | ddxplus | knn-vote (defaults) | gtpa@1 |" in table and "Table 9, the knn row" in table
    assert json.loads((out / "report.json").read_text(encoding="utf-8"))["rows"][1]["where"] == "none: a test"
    # a rerun resumes: every case is finished, the figures stay
    assert Reproduction(settings, out, limit=2, catalogue=catalogue).run("demo") == rows
    with pytest.raises(InvalidInputError, match="choose one of demo"):
        reproduction.run("nope")
