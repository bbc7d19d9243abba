"""MeSH source files: descriptor XML (`DescriptorRecordSet`, streamed) and the MeSH TSV tables.

The standard-library parser never fetches the external DTD named by the DOCTYPE, and an undefined or external
entity is a parse error; an internal DTD subset (entity declarations: the billion-laughs vector) is refused
before parsing.
"""

from __future__ import annotations

import csv
import hashlib
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from clinrag.core.errors import DataFormatError, InvalidInputError

SourceKind = Literal["xml", "tsv-terms", "tsv-tree-numbers", "tsv-symptoms"]
_KIND_ORDER: dict[str, int] = {"xml": 0, "tsv-terms": 1, "tsv-tree-numbers": 2, "tsv-symptoms": 3}
_TSV_HEADERS: dict[SourceKind, tuple[str, ...]] = {
    "tsv-tree-numbers": ("mesh_id", "mesh_name", "mesh_tree_number"),
    "tsv-symptoms": ("mesh_id", "mesh_name", "in_hsdn"),
    "tsv-terms": ("mesh_id", "mesh_name"),
}
_PROLOG_BYTES = 65536
_POSITION = re.compile(r": line \d+, column \d+$")


@dataclass(frozen=True)
class Descriptor:
    ui: str
    name: str
    scope_note: str | None = None
    tree_numbers: tuple[str, ...] = ()
    entry_terms: tuple[str, ...] = ()


def _text(element: ET.Element | None) -> str | None:
    text = (element.text or "").strip() if element is not None else ""
    return text or None


def _check_prolog(path: Path) -> str | None:
    """Refuse an internal DTD subset before the parser sees it; return the DOCTYPE's system id, if any."""
    with path.open("rb") as handle:
        head_bytes = handle.read(_PROLOG_BYTES)
    encoding = "utf-16" if head_bytes.startswith((b"\xff\xfe", b"\xfe\xff")) else "latin-1"
    head = head_bytes.decode(encoding, errors="replace")
    root = re.search(r"<[A-Za-z_]", head)
    prolog = head[: root.start()] if root else head
    if "<!ENTITY" in prolog or re.search(r"<!DOCTYPE[^>\[]*\[", prolog):
        raise DataFormatError(f"{path}: refusing XML with an internal DTD subset (entity declarations)")
    if root is None:
        raise DataFormatError(f"{path}: no XML element in the first {_PROLOG_BYTES} bytes")
    system = re.search(r"<!DOCTYPE\s+\S+\s+(?:SYSTEM|PUBLIC\s+\"[^\"]*\")\s+\"([^\"]*)\"", prolog)
    return system.group(1) if system else None


class DescriptorXml:
    """Iterate the descriptor records of an NLM MeSH descriptor XML file, streaming.

    After iteration `language` holds the record set's LanguageCode, `dtd` the DOCTYPE's system id and
    `active_years` the years of every ActiveMeSHYearList."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.language: str | None = None
        self.dtd: str | None = None
        self.active_years: set[int] = set()

    def __iter__(self) -> Iterator[Descriptor]:
        if not self.path.is_file():
            raise DataFormatError(f"{self.path}: no such file")
        self.dtd = _check_prolog(self.path)
        root: ET.Element | None = None
        count = 0
        try:
            with self.path.open("rb") as handle:
                for event, element in ET.iterparse(handle, events=("start", "end")):
                    if root is None:
                        root = element
                        if root.tag != "DescriptorRecordSet":
                            raise DataFormatError(
                                f"{self.path}: not MeSH descriptor XML (root element <{root.tag}>)"
                            )
                        self.language = root.get("LanguageCode")
                    elif event == "end" and element.tag == "DescriptorRecord":
                        count += 1
                        yield self._descriptor(element, count)
                        root.clear()  # the records read so far: memory stays bounded
        except ET.ParseError as exc:
            line, column = exc.position
            reason = _POSITION.sub("", str(exc))
            raise DataFormatError(
                f"{self.path}: not well-formed XML at line {line}, column {column} ({reason}); "
                f"{count} complete records before it"
            ) from None

    def _descriptor(self, record: ET.Element, number: int) -> Descriptor:
        ui, name = _text(record.find("DescriptorUI")), _text(record.find("DescriptorName/String"))
        if ui is None or name is None:
            raise DataFormatError(f"{self.path}: descriptor record {number} has no DescriptorUI or name")
        years = (_text(y) or "" for y in record.iterfind("ActiveMeSHYearList/Year"))
        self.active_years.update(int(y) for y in years if y.isdigit())
        preferred = record.find("ConceptList/Concept[@PreferredConceptYN='Y']")
        terms = (_text(s) for s in record.iterfind("ConceptList/Concept/TermList/Term/String"))
        return Descriptor(
            ui=ui,
            name=name,
            scope_note=_text(preferred.find("ScopeNote")) if preferred is not None else None,
            tree_numbers=tuple(
                t for t in (_text(e) for e in record.iterfind("TreeNumberList/TreeNumber")) if t
            ),
            entry_terms=tuple(dict.fromkeys(t for t in terms if t)),
        )


def tsv_kind(path: Path) -> SourceKind:
    """Which MeSH table a TSV file is, from its header."""
    try:
        with path.open(encoding="utf-8", newline="") as handle:
            header = tuple(handle.readline().rstrip("\r\n").split("\t"))
    except (OSError, UnicodeDecodeError) as exc:
        raise DataFormatError(f"{path}: cannot read the header: {exc}") from exc
    for kind, columns in _TSV_HEADERS.items():
        if header == columns:
            return kind
    raise DataFormatError(
        f"{path}: unknown MeSH TSV header {list(header)} "
        f"(expected one of {[list(c) for c in _TSV_HEADERS.values()]})"
    )


def read_tsv(path: Path) -> Iterator[tuple[str, ...]]:
    """The data rows of a MeSH TSV table, each checked for its column count and a UI; blank lines skipped."""
    width = len(_TSV_HEADERS[tsv_kind(path)])
    try:
        with path.open(encoding="utf-8", newline="") as handle:
            reader = csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
            next(reader)
            for row in reader:
                if not row:
                    continue
                values = tuple(v.strip() for v in row)
                if len(values) != width or not values[0] or not values[1]:
                    raise DataFormatError(f"{path}:{reader.line_num}: expected {width} non-empty columns")
                yield values
    except UnicodeDecodeError as exc:
        raise DataFormatError(f"{path}: not UTF-8 ({exc.reason} at byte {exc.start})") from None


def source_files(sources: Sequence[Path]) -> list[tuple[Path, SourceKind]]:
    """Files and folders → (file, kind), XML first then the TSV tables, in a fixed order."""
    found: list[tuple[Path, SourceKind]] = []
    for source in map(Path, sources):
        if source.is_dir():
            files = sorted(
                p for p in source.iterdir() if p.suffix.lower() in {".xml", ".tsv"} and p.is_file()
            )
            if not files:
                raise DataFormatError(f"{source}: no MeSH .xml or .tsv files in this folder")
        elif source.is_file():
            files = [source]
        else:
            raise DataFormatError(f"{source}: no such file or folder")
        for file in files:
            if file.suffix.lower() == ".xml":
                found.append((file, "xml"))
            elif file.suffix.lower() == ".tsv":
                found.append((file, tsv_kind(file)))
            else:
                raise DataFormatError(f"{file}: not a MeSH source (descriptor .xml or a .tsv table)")
    if not found:
        raise InvalidInputError("no MeSH source files given")
    unique = {file.resolve(): (file, kind) for file, kind in found}
    return sorted(unique.values(), key=lambda item: (_KIND_ORDER[item[1]], str(item[0])))


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
