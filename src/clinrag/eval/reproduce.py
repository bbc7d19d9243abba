"""`clinrag reproduce PAPER`: a paper's headline experiments on the datasets available here, with the
configured model, each method under its paper parameter set where it has one (`methods/presets/`); the runs,
and one table that puts the paper's published number, with its table and row, beside ours.

The experiments are data (`reproductions.jsonl`, one record an experiment): the dataset and its data (a path
under the data root, or a generator such as `synthetic:300:0`), the method and its parameters, the metric,
and the published figure with where the paper states it (or, where none is given, why). What a method needs
is built first, inside the output folder, from packaged or given sources, without a model call: a knowledge
base (`kb`, documents as written, as `clinrag kb build --no-rewrite` builds it) given as the parameter
`kb_param`, and a disease graph (`graph`) on clinrag's own graph server in a home of its own. A rerun resumes:
finished cases, built knowledge bases and imported graph batches are kept."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import srsly
from pydantic import BaseModel, ConfigDict, ValidationError

from clinrag.core.errors import DataFormatError, InvalidInputError
from clinrag.core.settings import Settings
from clinrag.eval.runner import EvalRunner, RunRequest
from clinrag.methods.parameter_sets import presets

REPRODUCTIONS = Path(__file__).parent / "reproductions.jsonl"
PAPER_PRESET = "paper"


class Experiment(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    paper: str  # the name `clinrag reproduce` takes
    name: str  # the run's folder
    dataset: str
    data: str | None = None  # under the data root, or a generator ("synthetic:300:0"); None: the default
    method: str
    params: dict[str, Any] = {}
    kb: list[str] = []  # sources of a knowledge base built for the method ("packaged:hpo", "pubmedqa/…")
    kb_param: str | None = None  # the method parameter that takes it
    graph: list[str] = []  # graph sources imported for the method, as `clinrag graph build -s` names them
    metric: str
    published: float | None = None  # on the metric's scale (0–1)
    where: str  # the paper's table and row that state it, or why there is no published figure here


class Row(BaseModel):
    experiment: str
    dataset: str
    method: str
    preset: str | None
    metric: str
    ours: float | None
    cases: int
    published: float | None
    where: str


@cache
def experiments(path: Path = REPRODUCTIONS) -> dict[str, tuple[Experiment, ...]]:
    """The experiments by paper."""
    found: dict[str, list[Experiment]] = {}
    try:
        for record in srsly.read_jsonl(path):
            experiment = Experiment.model_validate(record)
            found.setdefault(experiment.paper, []).append(experiment)
    except (ValueError, ValidationError) as exc:
        raise DataFormatError(f"{path}: malformed experiment ({exc})") from exc
    return {paper: tuple(items) for paper, items in found.items()}


def papers(path: Path = REPRODUCTIONS) -> list[str]:
    return sorted(experiments(path))


@dataclass
class Reproduction:
    """Runs one paper's experiments into `out` and writes `report.md` and `report.json` there (`limit`: a
    seeded sample of that many cases a dataset; `say`: where progress lines go)."""

    settings: Settings
    out: Path
    limit: int | None = None
    seed: int = 0
    concurrency: int = 4
    progress: bool = False
    say: Callable[[str], None] = lambda _: None
    catalogue: Path = REPRODUCTIONS

    def run(self, paper: str) -> list[Row]:
        known = experiments(self.catalogue)
        if paper not in known:
            raise InvalidInputError(f"no reproduction of {paper!r}: choose one of {', '.join(sorted(known))}")
        rows = [self._experiment(experiment) for experiment in known[paper]]
        self._write(paper, rows)
        return rows

    def _experiment(self, experiment: Experiment) -> Row:
        settings = self.settings
        if experiment.graph:
            # a graph of its own: clinrag's graph server on a home inside the output folder
            home = self.out / "resources" / f"home-{experiment.name}"
            settings = settings.model_copy(update={"home": home})
            self._import_graph(settings, experiment)
        params = dict(experiment.params)
        if PAPER_PRESET in presets(experiment.method):
            params.setdefault("preset", PAPER_PRESET)
        if experiment.kb:
            if experiment.kb_param is None:
                raise DataFormatError(f"experiment {experiment.name}: kb given without kb_param")
            params[experiment.kb_param] = str(self._knowledge_base(experiment))
        self.say(f"{experiment.name}: {experiment.method} on {experiment.dataset}")
        outcome = EvalRunner(settings, progress=self.progress).run(
            RunRequest(
                dataset=experiment.dataset,
                method=experiment.method,
                out=self.out / experiment.name,
                data_path=self._data(experiment.data),
                limit=self.limit,
                seed=self.seed,
                concurrency=self.concurrency,
                params=params,
            )
        )
        metric = outcome.summary.metrics.get(experiment.metric)
        return Row(
            experiment=experiment.name,
            dataset=experiment.dataset,
            method=experiment.method,
            preset=params.get("preset"),
            metric=experiment.metric,
            ours=metric.mean if metric is not None else None,
            cases=metric.n if metric is not None else 0,
            published=experiment.published,
            where=experiment.where,
        )

    def _data(self, relative: str | None) -> Path | None:
        """A path under the data root, or a generator ("synthetic:300:0") as it is (None: the dataset's
        default place under the data root)."""
        if relative is None:
            return None
        if ":" in relative:
            return Path(relative)
        if self.settings.data_dir is None:
            raise InvalidInputError("set the data root (--data or CLINRAG_DATA_DIR) to reproduce this paper")
        return self.settings.data_dir / relative

    def _source(self, spec: str) -> str:
        return spec if spec.startswith("packaged:") else str(self._data(spec))

    def _knowledge_base(self, experiment: Experiment) -> Path:
        from clinrag.embed.factory import build_embedder
        from clinrag.knowledge.base import INFO_FILE
        from clinrag.knowledge.builder import KnowledgeBaseBuilder
        from clinrag.knowledge.factory import build_tagger

        # one base for the experiments built from the same sources
        digest = hashlib.sha256("\n".join(experiment.kb).encode()).hexdigest()[:12]
        target = self.out / "resources" / f"kb-{digest}"
        if (target / INFO_FILE).is_file():
            return target
        self.say(f"{experiment.name}: building the knowledge base from {', '.join(experiment.kb)}")
        embedder = build_embedder(self.settings)
        builder = KnowledgeBaseBuilder(
            embedder=embedder, tagger=build_tagger(self.settings, embedder), rewriter=None, raw_records=True
        )
        builder.build([self._source(spec) for spec in experiment.kb], target, progress=False)
        return target

    def _import_graph(self, settings: Settings, experiment: Experiment) -> None:
        from clinrag.graph.importers.loader import import_sources

        self.say(f"{experiment.name}: importing {', '.join(experiment.graph)} into its graph")
        specs = [self._source(spec) for spec in experiment.graph]
        import_sources(settings, specs, settings.graph_data_dir, progress=False)

    def _write(self, paper: str, rows: list[Row]) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / "report.json").write_text(
            json.dumps({"paper": paper, "rows": [row.model_dump() for row in rows]}, indent=2) + "\n",
            encoding="utf-8",
        )
        (self.out / "report.md").write_text(report_table(paper, rows), encoding="utf-8")


def report_table(paper: str, rows: list[Row]) -> str:
    """The Markdown table: each experiment's figure here beside the paper's, and where the paper states it."""
    lines = [
        f"# Reproducing {paper}",
        "",
        "| experiment | dataset | method (parameters) | metric | ours | n | paper | where in the paper |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        ours = f"{row.ours:.3f}" if row.ours is not None else "–"
        published = f"{row.published:.3f}" if row.published is not None else "–"
        setting = f"{row.method} ({row.preset or 'defaults'})"
        lines.append(
            f"| {row.experiment} | {row.dataset} | {setting} | {row.metric} | {ours} | {row.cases} | "
            f"{published} | {row.where} |"
        )
    return "\n".join(lines) + "\n"
