"""MeSH descriptors in a local SQLite index, built from NLM descriptor XML or the MeSH TSV tables.

Sources:
- descriptor XML (`desc20xx.xml`, a `DescriptorRecordSet`): per record the UI, the preferred name, the scope
  note of the preferred concept, the tree numbers and every term string of every concept (entry terms).
  It is streamed with `iterparse`, each record dropped once stored: a 300 MB file needs little memory
  (parsing and its safeguards: `mesh_sources`).
- TSV tables (`terms.tsv`, `tree-numbers.tsv`, `symptoms.tsv`, recognised by their header): UI, name, tree
  numbers, symptom flags; no scope notes and no entry terms. The metadata says which of these the index has.

A build writes a temporary file beside the target and moves it into place, so a failed build leaves nothing
behind; building again from the same files is a no-op unless forced (the same files give the same rows).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from clinrag.core.errors import DataFormatError, IndexMismatchError
from clinrag.core.files import private_dir
from clinrag.terms.mesh_names import normalize, singular, token_key
from clinrag.terms.mesh_sources import (
    Descriptor,
    DescriptorXml,
    SourceKind,
    read_tsv,
    sha256_of,
    source_files,
)

FORMAT = "clinrag-mesh"
FORMAT_VERSION = 1
# Fuzzy pre-selection searches for the rarest trigrams of the query only: on 275k stored strings, 8 of them
# find as many right candidates as all of them, at a third of the time (about 20 ms).
_RAREST_TRIGRAMS = 8
_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE descriptor (ui TEXT PRIMARY KEY, name TEXT NOT NULL, scope_note TEXT);
CREATE TABLE tree_number (ui TEXT NOT NULL, tree_number TEXT NOT NULL, PRIMARY KEY (ui, tree_number));
CREATE INDEX tree_number_by_number ON tree_number (tree_number);
CREATE TABLE term (
    id INTEGER PRIMARY KEY, ui TEXT NOT NULL, term TEXT NOT NULL, norm TEXT NOT NULL, singular TEXT NOT NULL,
    token_key TEXT NOT NULL, is_name INTEGER NOT NULL, is_entry INTEGER NOT NULL, UNIQUE (ui, term)
);
CREATE INDEX term_by_norm ON term (norm);
CREATE INDEX term_by_singular ON term (singular);
CREATE INDEX term_by_key ON term (token_key);
CREATE VIRTUAL TABLE term_fts USING fts5 (norm, content='term', content_rowid='id', tokenize='trigram');
CREATE TABLE trigram (trigram TEXT PRIMARY KEY, docs INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE symptom (ui TEXT PRIMARY KEY, in_hsdn INTEGER NOT NULL);
"""


class MeshIndexNotFoundError(DataFormatError):
    """No MeSH index at the given path (build one with `clinrag terms mesh-build`)."""


@dataclass
class MeshBuildReport:
    path: Path
    skipped: bool
    version: str
    fingerprint: str
    counts: dict[str, int]
    seconds: float
    size_bytes: int
    sources: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "path": str(self.path)}


class _Writer:
    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        self.origin: dict[str, str] = {}

    def descriptor(self, ui: str, name: str, source: Path, scope_note: str | None = None) -> None:
        row = self.db.execute("SELECT name, scope_note FROM descriptor WHERE ui = ?", (ui,)).fetchone()
        if row is None:
            self.db.execute("INSERT INTO descriptor VALUES (?, ?, ?)", (ui, name, scope_note))
            self.origin[ui] = source.name
            self.term(ui, name, is_name=True)
        elif row[0] != name:
            raise DataFormatError(
                f"{source}: descriptor {ui} is named {name!r} here but {row[0]!r} in {self.origin[ui]} "
                "(sources from different MeSH releases?)"
            )
        elif scope_note and not row[1]:
            self.db.execute("UPDATE descriptor SET scope_note = ? WHERE ui = ?", (scope_note, ui))

    def term(self, ui: str, term: str, *, is_name: bool = False) -> None:
        self.db.execute(
            "INSERT INTO term (ui, term, norm, singular, token_key, is_name, is_entry) "
            "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (ui, term) DO UPDATE SET "
            "is_name = max(is_name, excluded.is_name), is_entry = max(is_entry, excluded.is_entry)",
            (ui, term, normalize(term), singular(term), token_key(term), int(is_name), int(not is_name)),
        )

    def tree_number(self, ui: str, number: str) -> None:
        self.db.execute("INSERT OR IGNORE INTO tree_number VALUES (?, ?)", (ui, number))


def _load_xml(writer: _Writer, path: Path, progress: Callable[[str], None]) -> dict[str, Any]:
    records, rows = DescriptorXml(path), 0
    for descriptor in records:
        writer.descriptor(descriptor.ui, descriptor.name, path, descriptor.scope_note)
        for number in descriptor.tree_numbers:
            writer.tree_number(descriptor.ui, number)
        for term in descriptor.entry_terms:
            writer.term(descriptor.ui, term)
        rows += 1
        if rows % 5000 == 0:
            progress(f"{path.name}: {rows} descriptors")
    return {
        "rows": rows,
        "language": records.language,
        "dtd": records.dtd,
        "active_years": sorted(records.active_years),
    }


def _load_tsv(writer: _Writer, path: Path, kind: SourceKind) -> dict[str, Any]:
    rows = 0
    for row in read_tsv(path):
        writer.descriptor(row[0], row[1], path)
        if kind == "tsv-tree-numbers":
            writer.tree_number(row[0], row[2])
        elif kind == "tsv-symptoms":
            if row[2] not in {"0", "1"}:
                raise DataFormatError(f"{path}: in_hsdn of {row[0]} is {row[2]!r}, not 0 or 1")
            writer.db.execute("INSERT OR REPLACE INTO symptom VALUES (?, ?)", (row[0], int(row[2])))
        rows += 1
    return {"rows": rows}


def _load(writer: _Writer, path: Path, kind: SourceKind, progress: Callable[[str], None]) -> dict[str, Any]:
    info = _load_xml(writer, path, progress) if kind == "xml" else _load_tsv(writer, path, kind)
    if not info["rows"]:
        raise DataFormatError(f"{path}: no MeSH descriptor records in it")
    return info


def _version(sources: list[dict[str, Any]], given: str | None) -> tuple[str, str]:
    """The MeSH year(s) and where they were read: file name, DTD name, or the active-year lists."""
    if given:
        return given, "given"
    years: set[str] = set()
    origins: set[str] = set()
    for source in sources:
        if source["kind"] != "xml":
            continue
        found = re.search(r"desc(\d{4})", source["name"])
        origin = "file name"
        if found is None:
            found, origin = re.search(r"(\d{4})\d{0,4}\.dtd$", source.get("dtd") or ""), "DTD name"
        if found is not None:
            years.add(found.group(1))
            origins.add(origin)
        elif source.get("active_years"):
            years.add(str(max(source["active_years"])))
            origins.add("ActiveMeSHYearList")
    if not years:
        return "unknown", "no XML source names a MeSH year"
    return "+".join(sorted(years)), ", ".join(sorted(origins))


def _fingerprint(files: list[tuple[Path, SourceKind, str]], given_version: str | None) -> str:
    payload = json.dumps(
        [FORMAT_VERSION, given_version, sorted([kind, sha] for _, kind, sha in files)], separators=(",", ":")
    )
    return hashlib.sha256(payload.encode()).hexdigest()


def build_mesh_index(
    sources: Sequence[Path],
    out: Path,
    *,
    force: bool = False,
    version: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> MeshBuildReport:
    """Build the SQLite MeSH index at `out` from XML and TSV files or folders of them (atomic, idempotent)."""
    started = time.perf_counter()
    say = progress or (lambda _message: None)
    out = Path(out)
    files = [(path, kind, sha256_of(path)) for path, kind in source_files(sources)]
    fingerprint = _fingerprint(files, version)
    if out.exists():
        existing = read_metadata(out)  # refuses to replace a file that is not a MeSH index
        current = existing.get("format_version") == FORMAT_VERSION and existing["fingerprint"] == fingerprint
        if current and not force:
            say(f"{out} is up to date with its sources")
            return _report(existing, out, skipped=True, seconds=time.perf_counter() - started)
    private_dir(out.parent)  # in clinrag's home by default: created owner-only
    temporary = out.with_name(f".{out.name}.{uuid.uuid4().hex}.tmp")
    try:
        db = sqlite3.connect(temporary, isolation_level=None)
        try:
            db.executescript("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;" + _SCHEMA)
            db.execute("BEGIN")
            writer = _Writer(db)
            described = []
            for path, kind, sha in files:
                say(f"reading {path} ({kind})")
                info = _load(writer, path, kind, say)
                described.append({"path": str(path), "name": path.name, "kind": kind, "sha256": sha, **info})
            db.execute("INSERT INTO term_fts (term_fts) VALUES ('rebuild')")
            db.execute("CREATE VIRTUAL TABLE temp.vocabulary USING fts5vocab (main, term_fts, 'row')")
            db.execute("INSERT INTO trigram SELECT term, doc FROM temp.vocabulary")
            _write_meta(db, described, fingerprint, version, time.perf_counter() - started)
            db.execute("COMMIT")
            db.execute("ANALYZE")
        finally:
            db.close()
        os.replace(temporary, out)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return _report(read_metadata(out), out, skipped=False, seconds=time.perf_counter() - started)


def _write_meta(
    db: sqlite3.Connection, sources: list[dict[str, Any]], fingerprint: str, given: str | None, seconds: float
) -> None:
    counts = {
        name: db.execute(query).fetchone()[0]
        for name, query in {
            "descriptors": "SELECT count(*) FROM descriptor",
            "tree_numbers": "SELECT count(*) FROM tree_number",
            "terms": "SELECT count(*) FROM term",
            "entry_terms": "SELECT count(*) FROM term WHERE is_entry = 1",
            "scope_notes": "SELECT count(*) FROM descriptor WHERE scope_note IS NOT NULL",
            "symptoms": "SELECT count(*) FROM symptom",
        }.items()
    }
    version, version_source = _version(sources, given)
    languages = sorted({s["language"] for s in sources if s.get("language")})
    meta = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "version": version,
        "version_source": version_source,
        "language": "+".join(languages) if languages else None,
        "fingerprint": fingerprint,
        "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "build_seconds": round(seconds, 3),
        "counts": counts,
        "has": {"scope_notes": counts["scope_notes"] > 0, "entry_terms": counts["entry_terms"] > 0},
        "sources": sources,
    }
    db.executemany("INSERT INTO meta VALUES (?, ?)", [(k, json.dumps(v)) for k, v in meta.items()])


def _report(metadata: dict[str, Any], out: Path, *, skipped: bool, seconds: float) -> MeshBuildReport:
    return MeshBuildReport(
        path=out,
        skipped=skipped,
        version=str(metadata["version"]),
        fingerprint=str(metadata["fingerprint"]),
        counts=dict(metadata["counts"]),
        seconds=round(seconds, 3),
        size_bytes=out.stat().st_size,
        sources=list(metadata["sources"]),
    )


# ---------------------------------------------------------------------------------------------- reading


LookupLevel = Literal["normalized", "singular", "word_order"]
_LEVEL_COLUMNS: dict[LookupLevel, tuple[str, Callable[[str], str]]] = {
    "normalized": ("norm", normalize),
    "singular": ("singular", singular),
    "word_order": ("token_key", token_key),
}
_HIT_COLUMNS = "t.ui, d.name, t.term, t.norm, t.is_name"


@dataclass(frozen=True)
class TermHit:
    """One stored string (a descriptor's name or one of its entry terms) that matched a query."""

    ui: str
    name: str
    term: str
    norm: str
    is_name: bool


def _hit(row: tuple[Any, ...]) -> TermHit:
    return TermHit(row[0], row[1], row[2], row[3], bool(row[4]))


def _connect_read_only(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True, check_same_thread=False)


def read_metadata(path: Path) -> dict[str, Any]:
    """The metadata of a MeSH index of any format version; a typed error when there is none."""
    if not path.exists():
        raise MeshIndexNotFoundError(f"no MeSH index at {path} (build one with `clinrag terms mesh-build`)")
    if not path.is_file():
        raise IndexMismatchError(f"{path} is not a file, so not a MeSH index")
    db = _connect_read_only(path)
    try:
        metadata = {key: json.loads(value) for key, value in db.execute("SELECT key, value FROM meta")}
    except (sqlite3.Error, ValueError, TypeError) as exc:
        raise IndexMismatchError(f"{path} is not a MeSH index ({exc})") from None
    finally:
        db.close()
    if metadata.get("format") != FORMAT:
        raise IndexMismatchError(f"{path} is not a MeSH index (no {FORMAT} metadata)")
    return metadata


class MeshIndex:
    """A built MeSH index, opened read-only; one SQLite connection per thread (`close` closes the
    calling thread's)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.metadata: dict[str, Any] = read_metadata(self.path)
        if self.metadata.get("format_version") != FORMAT_VERSION:
            raise IndexMismatchError(
                f"{self.path} has MeSH index format {self.metadata.get('format_version')}, this clinrag "
                f"reads {FORMAT_VERSION}: rebuild it with `clinrag terms mesh-build --force`"
            )
        self._local = threading.local()

    def _db(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            db = self._local.db = _connect_read_only(self.path)
        return db

    def close(self) -> None:
        db = getattr(self._local, "db", None)
        if db is not None:
            db.close()
            self._local.db = None

    def __enter__(self) -> MeshIndex:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @property
    def version(self) -> str:
        """The MeSH release year(s) of the sources, 'unknown' when no source says (the TSV tables)."""
        return str(self.metadata["version"])

    @property
    def fingerprint(self) -> str:
        """A hash of the source files and format: two indexes with one fingerprint hold the same rows."""
        return str(self.metadata["fingerprint"])

    def descriptor(self, ui: str) -> Descriptor | None:
        row = self._db().execute("SELECT ui, name, scope_note FROM descriptor WHERE ui = ?", (ui,)).fetchone()
        if row is None:
            return None
        numbers = self._db().execute(
            "SELECT tree_number FROM tree_number WHERE ui = ? ORDER BY tree_number", (ui,)
        )
        return Descriptor(row[0], row[1], row[2], tuple(n for (n,) in numbers), tuple(self.entry_terms(ui)))

    def entry_terms(self, ui: str) -> list[str]:
        """The term strings of every concept of the descriptor (none from TSV sources); the name first."""
        rows = self._db().execute("SELECT term FROM term WHERE ui = ? AND is_entry = 1 ORDER BY id", (ui,))
        return [term for (term,) in rows]

    def is_symptom(self, ui: str) -> bool | None:
        """Whether the symptom table lists the descriptor (None when the index has no symptom table rows)."""
        if not self.metadata["counts"].get("symptoms"):
            return None
        return self._db().execute("SELECT 1 FROM symptom WHERE ui = ?", (ui,)).fetchone() is not None

    def lookup(self, name: str) -> tuple[list[TermHit], LookupLevel | None]:
        """Names and entry terms equal to `name` at the first of three ever looser levels that has any:
        normalised, singular, then the same words in any order ('type 2 diabetes mellitus' →
        'Diabetes Mellitus, Type 2'). Names come first, then by UI."""
        for level, (column, form) in _LEVEL_COLUMNS.items():
            rows = self._db().execute(
                f"SELECT {_HIT_COLUMNS} FROM term t JOIN descriptor d ON d.ui = t.ui "
                f"WHERE t.{column} = ? ORDER BY t.is_name DESC, t.ui, t.id",
                (form(name),),
            )
            hits = [_hit(row) for row in rows]
            if hits:
                return hits, level
        return [], None

    def candidates(self, name: str, limit: int = 300) -> list[TermHit]:
        """A cheap pre-selection for fuzzy matching: the stored strings that best share (by BM25) the
        rarest character trigrams of the normalised name, from a trigram FTS5 index; below 3 characters,
        the strings it begins."""
        norm = normalize(name)  # word characters and single spaces only: no LIKE or FTS5 syntax in it
        if len(norm) < 3:
            where, argument, order, source = "t.norm LIKE ?", norm + "%", "length(t.norm), t.id", "term t"
        else:
            trigrams = sorted({norm[i : i + 3] for i in range(len(norm) - 2)})
            marks = ", ".join("?" * len(trigrams))
            known = self._db().execute(
                f"SELECT trigram FROM trigram WHERE trigram IN ({marks}) ORDER BY docs, trigram LIMIT ?",
                (*trigrams, _RAREST_TRIGRAMS),
            )
            chosen = [trigram for (trigram,) in known]
            if not chosen:
                return []
            where, argument = "term_fts MATCH ?", " OR ".join(f'"{t}"' for t in chosen)
            order, source = "f.rank, t.id", "term_fts f JOIN term t ON t.id = f.rowid"
        rows = self._db().execute(
            f"SELECT {_HIT_COLUMNS} FROM {source} JOIN descriptor d ON d.ui = t.ui "
            f"WHERE {where} ORDER BY {order} LIMIT ?",
            (argument, limit),
        )
        return [_hit(row) for row in rows]
