"""Build a knowledge base from corpora: read → declarative rewrite → concept tagging → embed → index.

Resumable: every processed source item is appended to a checkpoint file beside the output, so a crashed or
interrupted build continues where it stopped (model calls are also served from the response cache). The
finished knowledge base is written atomically and the checkpoint is removed."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path

from tqdm import tqdm

from clinrag.core.errors import ConfigError, InvalidInputError
from clinrag.core.files import private_dir
from clinrag.embed.base import Embedder
from clinrag.knowledge.base import KnowledgeBase
from clinrag.knowledge.items import SourceItem
from clinrag.knowledge.rewrite import DeclarativeRewriter, Rewrite
from clinrag.knowledge.sources import read_source
from clinrag.knowledge.statement import Statement
from clinrag.knowledge.tagging import Tagger, Tagging


@dataclass
class BuildReport:
    sources: dict[str, str] = field(default_factory=dict)  # source → its read report, as text
    items: int = 0
    resumed_items: int = 0
    statements: int = 0
    rewrite_failures: int = 0
    untagged: int = 0
    tag_counts: Counter = field(default_factory=Counter)
    seconds: float = 0.0

    def as_dict(self) -> dict:
        return {**self.__dict__, "tag_counts": dict(sorted(self.tag_counts.items()))}


def _raw_text(item: SourceItem) -> str:
    """The item as it stands, used when rewriting is off or failed (a record: its whole text)."""
    if item.kind == "mcq":
        return f"{item.question} Answer: {item.answer}"
    return item.text


class KnowledgeBaseBuilder:
    def __init__(
        self,
        *,
        embedder: Embedder,
        tagger: Tagger,
        rewriter: DeclarativeRewriter | None,
        raw_records: bool = False,
        language: str = "en",
        batch_size: int = 16,
    ) -> None:
        """`rewriter` turns text and exam items into declarative statements (None: they are indexed as they
        are). Structured records carry their declarative statements already; `raw_records` indexes each
        record's whole text instead (the "no declarative statements" ablation for record sources)."""
        self.embedder = embedder
        self.tagger = tagger
        self.rewriter = rewriter
        self.raw_records = raw_records
        self.language = language
        self.batch_size = batch_size

    def build(
        self, sources: Sequence[str | Path], out: Path, *, limit: int | None = None, progress: bool = True
    ) -> BuildReport:
        started = time.perf_counter()
        report = BuildReport()
        checkpoint = out.parent / f".{out.name}.checkpoint.jsonl"
        done = _read_checkpoint(checkpoint, self._settings())
        report.resumed_items = len(done)

        items: list[SourceItem] = []
        source_files: dict[str, str] = {}
        for source in sources:
            reading = read_source(source)
            read = list(islice(reading, limit))
            items.extend(read)
            report.sources[str(source)] = reading.report.summary()
            source_files.update((item.origin.file, str(source)) for item in read if item.origin is not None)
        report.items = len(items)
        duplicates = [item_id for item_id, n in Counter(item.id for item in items).items() if n > 1]
        if duplicates:
            # Checked before any work: the index would refuse them only at the very end.
            raise InvalidInputError(f"duplicate item ids across the sources: {', '.join(duplicates[:5])}")

        pending = [item for item in items if item.id not in done]
        private_dir(checkpoint.parent)  # in clinrag's home by default: created owner-only
        if not checkpoint.exists():
            checkpoint.write_text(json.dumps({"settings": self._settings()}) + "\n", encoding="utf-8")
        with (
            checkpoint.open("a", encoding="utf-8") as sink,
            tqdm(
                total=len(items), initial=len(items) - len(pending), desc="statements", disable=not progress
            ) as bar,
        ):
            for batch in _batches(pending, self.batch_size):
                for item_id, statements in self._process(batch):
                    done[item_id] = statements
                    sink.write(
                        json.dumps({"item": item_id, "statements": [s.model_dump() for s in statements]})
                    )
                    sink.write("\n")
                sink.flush()
                bar.update(len(batch))

        statements = [statement for item in items for statement in done[item.id]]
        for statement in statements:
            report.rewrite_failures += "rewrite_error" in statement.provenance
            report.untagged += not statement.tags
            report.tag_counts.update(statement.tags)
        report.statements = len(statements)
        base = KnowledgeBase.create(statements, self.embedder, language=self.language, progress=progress)
        base.info["sources"] = dict(report.sources)
        base.info["source_files"] = source_files
        base.save(out)
        checkpoint.unlink()
        report.seconds = round(time.perf_counter() - started, 1)
        return report

    def _settings(self) -> dict[str, str | bool]:
        """What decides the statements; a checkpoint written under other settings cannot be resumed."""
        return {
            "tagger": self.tagger.name,
            "rewrite": self.rewriter is not None,
            "raw_records": self.raw_records,
            "embedder": self.embedder.name,
            "language": self.language,
        }

    def _process(self, batch: list[SourceItem]) -> Iterator[tuple[str, list[Statement]]]:
        drafts = [(item, self._rewrite(item)) for item in batch]
        # Records with a code bring their chapters; only the other texts go to the tagger.
        untagged = [
            text
            for item, rewrite in drafts
            if not item.tags
            for text in (rewrite.statements or [_raw_text(item)])
        ]
        taggings = iter(self._tag(untagged))
        for item, rewrite in drafts:
            provenance = {**item.provenance, "item": item.id}
            if rewrite.error:
                provenance["rewrite_error"] = rewrite.error
            result = []
            for index, text in enumerate(rewrite.statements or [_raw_text(item)]):
                tagging = Tagging(sorted(item.tags)) if item.tags else next(taggings)
                extra = {"untagged_reason": tagging.untagged_reason} if tagging.untagged_reason else {}
                if tagging.rejected:
                    extra["rejected_tags"] = tagging.rejected
                result.append(
                    Statement(
                        id=f"{item.id}#{index}",
                        text=text,
                        tags=tagging.tags,
                        source=item.source,
                        provenance={**provenance, **extra},
                        origin=item.origin,
                    )
                )
            yield item.id, result

    def _rewrite(self, item: SourceItem) -> Rewrite:
        if item.kind == "record":
            return Rewrite([] if self.raw_records else list(item.statements))
        if self.rewriter is None:
            return Rewrite([])
        if item.kind == "mcq":
            return self.rewriter.rewrite_mcq(item.question or "", item.answer or "")
        return self.rewriter.rewrite_chunk(item.text)

    def _tag(self, texts: list[str]) -> list[Tagging]:
        if not texts:
            return []
        tag_many = getattr(self.tagger, "tag_many", None)
        return tag_many(texts) if tag_many else [self.tagger.tag(text) for text in texts]


def _batches(items: list[SourceItem], size: int) -> Iterable[list[SourceItem]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _read_checkpoint(path: Path, settings: dict[str, str | bool]) -> dict[str, list[Statement]]:
    """Items already processed. A torn last line (the process died mid-write) is cut off so that the next
    append starts on a fresh line; its item is simply processed again."""
    done: dict[str, list[Statement]] = {}
    if not path.exists():
        return done
    data = path.read_bytes()
    complete = data[: data.rfind(b"\n") + 1]
    if len(complete) != len(data):
        path.write_bytes(complete)
    header, *records = complete.decode("utf-8").splitlines() or ["{}"]
    if json.loads(header).get("settings") != settings:
        raise ConfigError(
            f"an interrupted build with other settings left {path} ({header}); rerun it with those "
            "settings to finish it, or delete the file to start over"
        )
    for line in records:
        record = json.loads(line)
        done[record["item"]] = [Statement.model_validate(s) for s in record["statements"]]
    return done
