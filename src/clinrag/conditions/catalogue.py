"""The knowledge base as read from its files: the conditions of every system's file and the registry of
sources they cite. A malformed line, a duplicate id or a fact citing no registered source is a
`DataFormatError` naming the file and line; `audit` checks the rest (codes, coverage)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from clinrag.conditions.records import Condition, FindingNames, Source
from clinrag.core.errors import DataFormatError
from clinrag.core.text import folded

DATA = Path(__file__).parent / "data"
SOURCES = "sources.jsonl"
CONDITIONS = "conditions"
FINDING_NAMES = "finding_names.jsonl"
R = TypeVar("R", bound=BaseModel)


@dataclass(frozen=True)
class Catalogue:
    conditions: tuple[Condition, ...]
    sources: dict[str, Source]
    folder: Path
    finding_names: tuple[FindingNames, ...] = ()

    @classmethod
    def read(cls, folder: Path = DATA) -> Catalogue:
        sources: dict[str, Source] = {}
        for where, source in read_records(folder / SOURCES, Source):
            if source.id in sources:
                raise DataFormatError(f"{where}: source id {source.id!r} registered twice")
            sources[source.id] = source
        files = sorted((folder / CONDITIONS).glob("*.jsonl"))
        if not files:
            raise DataFormatError(f"{folder / CONDITIONS}: no condition files (*.jsonl)")
        conditions: list[Condition] = []
        ids: set[str] = set()
        for path in files:
            for where, condition in read_records(path, Condition):
                if condition.id in ids:
                    raise DataFormatError(f"{where}: condition id {condition.id!r} given twice")
                if condition.system != path.stem:
                    raise DataFormatError(f"{where}: system {condition.system!r} in {path.stem!r}'s file")
                unknown = sorted({s for _, fact in condition.cited() for s in fact.source} - set(sources))
                if unknown:
                    raise DataFormatError(f"{where}: cites sources not in {SOURCES}: {', '.join(unknown)}")
                ids.add(condition.id)
                conditions.append(condition)
        names = tuple(n for _, n in read_records(folder / FINDING_NAMES, FindingNames))
        return cls(tuple(conditions), sources, folder, names)

    def names_in(self, language: str) -> dict[str, tuple[str, ...]]:
        """The HPO findings' names in `language` ("fr", "zh"), by their HPO name; none in English."""
        if language == "en":
            return {}
        return {n.label: names for n in self.finding_names if (names := getattr(n, language, ()))}

    @cached_property
    def _by_name(self) -> dict[str, list[Condition]]:
        index: dict[str, list[Condition]] = {}
        for condition in self.conditions:
            names = {condition.id, condition.name, condition.icd10, condition.ddxplus or ""}
            names.update(n for words in (*condition.names.values(), *condition.lay.values()) for n in words)
            for name in names:
                if key := folded(name).strip():
                    index.setdefault(key, []).append(condition)
        return index

    def find(self, name: str) -> list[Condition]:
        """The conditions `name` names: by id, ICD-10 code, DDXPlus name, or a name or lay name in any
        language (case and accents aside); else those whose English name contains it."""
        key = folded(name).strip()
        if not key:
            return []
        found = self._by_name.get(key)
        if found:
            return list({c.id: c for c in found}.values())
        return [c for c in self.conditions if key in folded(c.name)]

    def same_condition(self, name: str | None, icd10: str | None = None) -> Condition | None:
        """The one condition another source's disease is: by its name, else by its ICD-10-CM code (one
        condition only, either way); None when neither names exactly one."""
        found = self.find(name) if name else []
        if len(found) != 1 and icd10:
            code = icd10.strip().upper()
            found = [c for c in self.conditions if c.icd10.upper() == code]
        return found[0] if len(found) == 1 else None

    def documents(self, ids: tuple[str, ...] | list[str]) -> list[Source]:
        return [self.sources[i] for i in ids if i in self.sources]


@cache
def packaged_catalogue() -> Catalogue:
    return Catalogue.read()


def read_records(path: Path, kind: type[R]) -> Iterator[tuple[str, R]]:
    """Each record of a JSON-lines file as `kind` validates it, with where it stands ("file:line"); a file
    that cannot be read, a line that is not JSON or not such a record is a `DataFormatError` saying where."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise DataFormatError(f"{path}: cannot read the file ({exc})") from exc
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            yield where, kind(**json.loads(line))
        except (json.JSONDecodeError, ValidationError, TypeError) as exc:
            raise DataFormatError(f"{where}: not a {kind.__name__} record ({exc})") from exc
