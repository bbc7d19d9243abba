"""`text:PATH`: disease knowledge that the chat model reads out of free text, as schema-checked triples.

PATH is a .txt or .md file, a directory of them (read in sorted order), or a corpus file the knowledge
readers recognise (PubMedQA's JSON of abstracts, JSONL records with a `text` field; see
`clinrag.knowledge.sources`). Each record — a text file, an abstract with its conclusion, a JSONL line — is
split into chunks of at most `MAX_CHARS` characters (paragraphs whole where they fit); each chunk is one
model request and one passage, with the stable id "<file fingerprint>:<record>:<chunk>". `limit` counts
records.

The model's triples are checked by `clinrag.graph.triples`: every rejected triple (wrong direction, wrong
type pair, a name not in the passage, …) and every chunk whose reply is not JSON is counted in the build
report by reason, with passage ids as examples. Accepted triples become edges that list the passages that
state them. Names join existing nodes as the loader joins them (same name after normalisation) and, when
the MeSH index exists, through the names of the descriptor a name maps to exactly (its name or an entry
term; never a fuzzy or ambiguous mapping).

Resumable: every model reply is appended to a journal in the work folder, keyed by the model and the
request's content, as soon as it arrives; a rerun takes the replies of finished chunks from it, so an
interrupted build asks the model only for the rest and yields the same records (so the loader's batch
checkpoint holds too). The journal also keeps each passage's text under its id.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import groupby, islice
from pathlib import Path

from tqdm import tqdm

from clinrag.core.errors import DataFormatError, InvalidInputError
from clinrag.core.files import existing, read_text
from clinrag.core.provenance import Origin, fingerprint
from clinrag.graph.importers.records import SourceRecords, SourceTraits
from clinrag.graph.importers.registry import PATH, GraphSource, SourceContext, register
from clinrag.graph.matching import Synonyms
from clinrag.graph.triples import INVALID_JSON, TripleExtraction, TripleExtractor, split_text
from clinrag.knowledge.sources import read_source
from clinrag.terms.mesh import MeshIndex
from clinrag.terms.mesh_mapper import MeshMapper

NAME = "text"
MAX_CHARS = 2000  # characters per chunk (one model request)
TEXT_SUFFIXES = frozenset({".txt", ".md"})
JOURNAL = "text-extractions.jsonl"
EMPTY_FILES = "empty files"
_WHOLE = 10**9  # chunk size given to the knowledge readers: whole records, chunked here instead


@dataclass(frozen=True)
class Passage:
    id: str  # "<file fingerprint>:<record>:<chunk>"
    text: str


@dataclass
class TextCorpus:
    """The passages of a `text:PATH` source, what was read and what was skipped (reason, where)."""

    path: Path
    passages: list[Passage]
    records: int
    skipped: list[tuple[str, str]] = field(default_factory=list)


def skip_reason(reason: str) -> str:
    """How the build report names a rejection reason of `clinrag.graph.triples` (read after a count)."""
    return f"chunks: {reason}" if reason == INVALID_JSON else f"triples: {reason}"


def read_passages(path: str | Path, *, limit: int | None = None, max_chars: int = MAX_CHARS) -> TextCorpus:
    """The passages of at most `limit` records under `path`; a typed error for a missing path, an empty
    or non-UTF-8 file, a directory without text files, or an unrecognised file."""
    corpus = TextCorpus(existing(path), [], 0)
    for file_id, record, text in islice(_records(corpus), limit):
        corpus.records += 1
        chunks = split_text(text, max_chars)
        corpus.passages += [Passage(f"{file_id}:{record}:{k}", chunk) for k, chunk in enumerate(chunks)]
    if not corpus.passages:
        raise DataFormatError(f"{corpus.path}: no text to extract triples from")
    return corpus


def _records(corpus: TextCorpus) -> Iterator[tuple[str, str, str]]:
    """(file fingerprint, record id, text) of each record; empty files of a directory are skipped."""
    path = corpus.path
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in TEXT_SUFFIXES)
        if not files:
            raise DataFormatError(f"{path}: no .txt or .md file in the directory")
        for file in files:
            relative = file.relative_to(path).as_posix()
            text = read_text(file)
            if text.strip():
                yield fingerprint(file), relative, text
            else:
                corpus.skipped.append((EMPTY_FILES, relative))
        return
    if path.suffix.lower() in TEXT_SUFFIXES:
        text = read_text(path)
        if not text.strip():
            raise DataFormatError(f"{path}: the file is empty")
        yield fingerprint(path), path.name, text
        return
    # The readers give a record's paragraphs as items of one origin (PubMedQA: the abstract's sections and
    # its conclusion); they are joined into the record's text.
    reading = read_source(path, max_size=_WHOLE, overlap=0)
    for origin, items in groupby(reading, key=lambda item: item.origin or Origin(fingerprint(path), item.id)):
        yield origin.file, origin.record, "\n\n".join(item.text for item in items)
    corpus.skipped += [(reason, str(w)) for reason, where in reading.report.skipped.items() for w in where]


class Journal:
    """Model replies to extraction requests, one JSON line each, appended as they arrive. A line cut short
    by a crash is ignored (and the next reply starts on a line of its own)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.replies: dict[str, str] = {}
        data = path.read_bytes() if path.is_file() else b""
        self._torn = bool(data) and not data.endswith(b"\n")
        for line in data.decode("utf-8", errors="replace").splitlines():
            try:
                entry = json.loads(line)
                self.replies[entry["key"]] = entry["reply"]
            except (ValueError, KeyError, TypeError):
                continue

    def add(self, key: str, passage: Passage, reply: str) -> None:
        entry = {"key": key, "passage": passage.id, "text": passage.text, "reply": reply}
        line = ("\n" if self._torn else "") + json.dumps(entry, ensure_ascii=False) + "\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(line)
        self._torn = False
        self.replies[key] = reply


@dataclass(frozen=True)
class MeshNames:
    """The MeSH names a name may be known by (see `mesh_names`), and the fingerprint of their index."""

    synonyms: Synonyms
    version: str


def mesh_names(path: Path) -> MeshNames | None:
    """A name's MeSH descriptor's name and entry terms, for an exact and unambiguous mapping (a name or an
    entry term after normalisation; never fuzzy); None when there is no MeSH index at `path`."""
    if not path.is_file():
        return None
    index = MeshIndex(path)
    mapper = MeshMapper(index)

    def synonyms(name: str) -> Sequence[str]:
        try:
            mapping = mapper.map(name)
        except InvalidInputError:  # nothing MeSH could name (no letters, too long)
            return []
        if mapping.descriptor is None or mapping.match == "fuzzy" or mapping.ambiguous:
            return []
        return [mapping.descriptor.name, *index.entry_terms(mapping.descriptor.ui)]

    return MeshNames(synonyms, index.fingerprint)


def extract_source(
    corpus: TextCorpus,
    extractor: TripleExtractor,
    journal: Journal,
    *,
    mesh: MeshNames | None = None,
    progress: bool = True,
) -> SourceRecords:
    """The triples the model reads out of the corpus's passages, as the loader's records (see the module
    docstring); replies already in `journal` are not asked again."""
    model = extractor.model
    identity = f"{model.backend}:{model.model}"
    result = TripleExtraction(chunks=len(corpus.passages))
    asked = 0
    started = time.perf_counter()
    bar = tqdm(corpus.passages, desc=f"{NAME}:{corpus.path.name}", unit="chunk", disable=not progress)
    for index, passage in enumerate(bar):
        request = extractor.request(passage.text)
        key = hashlib.sha256(f"{identity}\n{request.content_key('complete')}".encode()).hexdigest()
        reply = journal.replies.get(key)
        if reply is None:
            completion = model.complete(request)
            journal.add(key, passage, completion.text)
            result.add_reply(index, passage.text, completion.text, completion.usage)
            asked += 1
        else:
            result.add_reply(index, passage.text, reply)
    seconds = time.perf_counter() - started
    ids = [p.id for p in corpus.passages]
    name = f"{NAME}:{corpus.path.resolve().name}"
    source = result.to_source(name, spec=f"{NAME}:{corpus.path}", passages=ids)
    source.read = corpus.records
    for reason, where in corpus.skipped:
        source.skips.add(reason, where)
    for rejected in result.rejected:
        source.skips.add(skip_reason(rejected.reason), ids[rejected.chunk])
    for failure in result.failures:
        source.skips.add(skip_reason(failure.reason), ids[failure.chunk])
    proposed = len(result.accepted) + len(result.rejected)
    cost = (
        f" ({result.usage.completion_tokens} tokens generated, {seconds / asked:.1f} s each)" if asked else ""
    )
    source.notes.append(
        f"{proposed} triples proposed by {identity} in {len(ids)} chunks of {corpus.records} records, "
        f"{len(result.accepted)} accepted; {asked} chunks asked{cost}, {len(ids) - asked} replied from "
        f"{journal.path}"
    )
    if mesh is not None:
        source.synonyms = mesh.synonyms
        source.fingerprint += f":mesh={mesh.version}"
        source.notes.append(f"names also join existing nodes through MeSH (index {mesh.version})")
    return source


def read_text_source(path: str, limit: int | None, context: SourceContext) -> SourceRecords:
    corpus = read_passages(path, limit=limit)  # bad input fails before the model is loaded
    return extract_source(
        corpus,
        TripleExtractor(context.model(), max_chars=MAX_CHARS),
        Journal(context.work_dir / JOURNAL),
        mesh=mesh_names(context.settings.mesh_index_path),
        progress=context.progress,
    )


# triples a model read from text: named as the text names them, with no frequencies
register(
    GraphSource(
        f"{NAME}:{PATH}",
        read_text_source,
        SourceTraits(lay=True, askable=True, title="triples the chat model extracted from your texts"),
        needs_context=True,
    )
)
