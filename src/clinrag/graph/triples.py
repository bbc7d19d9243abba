"""Knowledge triples from free text by an LLM, kept only where they fit the graph schema.

The model is asked for JSON under a JSON schema (typed head, relation, typed tail). Its reply is parsed (and
repaired once); each proposed triple is then checked on its own and either accepted — names normalised, types
and direction as the schema has them — or rejected with a reason: `malformed`, `empty_name`,
`unknown_relation`, `unknown_type`, `wrong_direction` (e.g. Symptom HAS_SYMPTOM Disease), `wrong_type_pair`
(e.g. Disease RECOMMEND_DRUG Symptom), `self_relation`, `not_in_text` (a name the chunk does not contain, once
normalised: small models copy the prompt's example), `duplicate` (a repeat still adds its chunk to the
triple's `cited_by`). A reply that is not JSON even after repair is a failure of its chunk (`invalid_json`),
recorded with the raw text; nothing is guessed.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import unicodedata
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from clinrag.core.errors import InvalidInputError, StructuredOutputError
from clinrag.core.usage import Usage
from clinrag.graph.importers.records import DiseaseRecord, SourceRecords
from clinrag.graph.matching import normalize
from clinrag.graph.schema import (
    MAX_NAME_CHARS,
    SYMMETRIC,
    TRIPLE_TYPE,
    Label,
    Relation,
    describe_schema,
    valid_triple,
)
from clinrag.llm.base import ChatModel, ChatRequest
from clinrag.llm.structured import parse_structured

MALFORMED = "malformed"
EMPTY_NAME = "empty_name"
UNKNOWN_RELATION = "unknown_relation"
UNKNOWN_TYPE = "unknown_type"
WRONG_DIRECTION = "wrong_direction"
WRONG_TYPE_PAIR = "wrong_type_pair"
SELF_RELATION = "self_relation"
NOT_IN_TEXT = "not_in_text"
DUPLICATE = "duplicate"
INVALID_JSON = "invalid_json"
REASONS = (
    MALFORMED,
    EMPTY_NAME,
    UNKNOWN_RELATION,
    UNKNOWN_TYPE,
    WRONG_DIRECTION,
    WRONG_TYPE_PAIR,
    SELF_RELATION,
    NOT_IN_TEXT,
    DUPLICATE,
    INVALID_JSON,
)
MAX_ENTITY_CHARS = 200
_EDGE_PUNCTUATION = " \t\"'`“”‘’.,;:!?"
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+")

EXTRACT_PROMPT = """Extract medical knowledge from the text below as triples of this graph schema.

Entity types and relations (a relation goes from the first type to the second, never the other way):
{schema}

Rules: use only facts the text states; head and tail are short entity names as written in the text; \
head_type and tail_type are entity types above; relation is one of the relations above. Reply with JSON: \
{{"triples": [{{"head": ..., "head_type": ..., "relation": ..., "tail": ..., "tail_type": ...}}]}}.
For example, "Asthma causes wheezing" gives {{"head": "Asthma", "head_type": "Disease", "relation": \
"HAS_SYMPTOM", "tail": "wheezing", "tail_type": "Symptom"}}.

Text:
{text}"""


def extraction_schema(max_triples: int) -> dict[str, Any]:
    name = {"type": "string", "minLength": 1, "maxLength": MAX_ENTITY_CHARS}
    label = {"type": "string", "enum": [str(label) for label in Label]}
    item = {
        "type": "object",
        "properties": {
            "head": name,
            "head_type": label,
            "relation": {"type": "string", "enum": [str(relation) for relation in Relation]},
            "tail": name,
            "tail_type": label,
        },
        "required": ["head", "head_type", "relation", "tail", "tail_type"],
    }
    return {
        "type": "object",
        "properties": {"triples": {"type": "array", "items": item, "maxItems": max_triples}},
        "required": ["triples"],
    }


class _Reply(BaseModel):
    """The reply's envelope; each triple is checked on its own, so one bad triple spoils nothing else."""

    model_config = ConfigDict(extra="ignore")
    triples: list[Any]


class _ProposedTriple(BaseModel):
    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)
    head: str
    head_type: str
    relation: str
    tail: str
    tail_type: str


@dataclass(frozen=True)
class KnowledgeTriple:
    head: str
    relation: Relation
    tail: str

    @property
    def head_label(self) -> Label:
        return TRIPLE_TYPE[self.relation].source

    @property
    def tail_label(self) -> Label:
        return TRIPLE_TYPE[self.relation].target


@dataclass(frozen=True)
class RejectedTriple:
    proposed: Any  # what the model wrote for this triple
    reason: str
    chunk: int


@dataclass(frozen=True)
class ChunkFailure:
    chunk: int
    reason: str
    error: str
    raw: str


@dataclass
class TripleExtraction:
    accepted: list[KnowledgeTriple] = field(default_factory=list)
    cited_by: list[list[int]] = field(default_factory=list)  # per accepted triple: the chunks that state it
    rejected: list[RejectedTriple] = field(default_factory=list)
    failures: list[ChunkFailure] = field(default_factory=list)
    chunks: int = 0
    usage: Usage = field(default_factory=Usage)
    _index: dict[tuple[str, Relation, str], int] = field(default_factory=dict, init=False, repr=False)

    def add_reply(self, chunk: int, text: str, reply: str, usage: Usage | None = None) -> None:
        """Check the model's `reply` to chunk number `chunk` (whose text is `text`) and keep what it gives."""
        if usage is not None:
            self.usage += usage
        try:
            parsed = parse_structured(reply, _Reply)
        except StructuredOutputError as exc:
            self.failures.append(ChunkFailure(chunk, INVALID_JSON, str(exc), reply))
            return
        haystack = normalize(text)
        for proposed in parsed.triples:
            checked = check_triple(proposed)
            if isinstance(checked, KnowledgeTriple) and not all(
                (name := normalize(n)) and name in haystack for n in (checked.head, checked.tail)
            ):
                checked = NOT_IN_TEXT
            if isinstance(checked, str):
                self.rejected.append(RejectedTriple(proposed, checked, chunk))
                continue
            key = (normalize(checked.head), checked.relation, normalize(checked.tail))
            if checked.relation in SYMMETRIC:
                key = (min(key[0], key[2]), checked.relation, max(key[0], key[2]))
            if key in self._index:
                self.rejected.append(RejectedTriple(proposed, DUPLICATE, chunk))
                chunks = self.cited_by[self._index[key]]
                if chunk not in chunks:
                    chunks.append(chunk)
                continue
            self._index[key] = len(self.accepted)
            self.accepted.append(checked)
            self.cited_by.append([chunk])

    def counts(self) -> dict[str, int]:
        """Accepted, then each rejection reason, then chunk failures by reason."""
        found: Counter[str] = Counter({"accepted": len(self.accepted)})
        found.update(r.reason for r in self.rejected)
        found.update(f.reason for f in self.failures)
        return dict(found)

    def entities(self) -> dict[Label, list[str]]:
        """The accepted entities by type, in first-seen order."""
        found: dict[Label, dict[str, None]] = {}
        for t in self.accepted:
            found.setdefault(t.head_label, {})[t.head] = None
            found.setdefault(t.tail_label, {})[t.tail] = None
        return {label: list(names) for label, names in found.items()}

    def to_source(
        self, name: str = "llm-triples", *, spec: str | None = None, passages: Sequence[str] | None = None
    ) -> SourceRecords:
        """The accepted triples as disease records, for the graph loader. With `passages` (the id of each
        chunk's passage), every edge lists the passages that state it."""
        cited = [[passages[c] for c in chunks] if passages else [] for chunks in self.cited_by]
        pairs = list(zip(self.accepted, cited, strict=True))
        text = "\n".join(f"{t.head}\t{t.relation}\t{t.tail}\t{' '.join(ids)}" for t, ids in pairs)
        source = SourceRecords(name, spec or name, hashlib.sha256(text.encode()).hexdigest()[:16])
        records: dict[str, DiseaseRecord] = {}
        for t, ids in pairs:
            record = records.setdefault(t.head, DiseaseRecord(t.head, t.head))
            record.add(t.relation, t.tail, source.skips, ids)
        source.read = len(records)
        source.records = list(records.values())
        return source


def normalise_name(text: str) -> str:
    """NFKC, whitespace collapsed, quotes and trailing punctuation stripped; case kept."""
    collapsed = " ".join(unicodedata.normalize("NFKC", text).split())
    return collapsed.strip(_EDGE_PUNCTUATION)


def _label(text: str) -> Label | None:
    wanted = text.strip().casefold()
    return next((label for label in Label if label.value.casefold() == wanted), None)


def _relation(text: str) -> Relation | None:
    wanted = re.sub(r"[\s\-]+", "_", text.strip()).upper()
    return next((relation for relation in Relation if relation.value == wanted), None)


def check_triple(proposed: Any) -> KnowledgeTriple | str:
    """The accepted triple, or the reason it is rejected (duplicates are the caller's to find)."""
    if not isinstance(proposed, Mapping):
        return MALFORMED
    try:
        triple = _ProposedTriple.model_validate(proposed)
    except ValidationError:
        return MALFORMED
    head, tail = normalise_name(triple.head), normalise_name(triple.tail)
    if not head or not tail or max(len(head), len(tail)) > min(MAX_ENTITY_CHARS, MAX_NAME_CHARS):
        return EMPTY_NAME
    relation = _relation(triple.relation)
    if relation is None:
        return UNKNOWN_RELATION
    head_label, tail_label = _label(triple.head_type), _label(triple.tail_type)
    if head_label is None or tail_label is None:
        return UNKNOWN_TYPE
    if not valid_triple(head_label, relation, tail_label):
        return WRONG_DIRECTION if valid_triple(tail_label, relation, head_label) else WRONG_TYPE_PAIR
    if relation in SYMMETRIC and normalize(head) == normalize(tail):
        return SELF_RELATION
    return KnowledgeTriple(head, relation, tail)


def split_text(text: str, max_chars: int) -> list[str]:
    """Paragraphs packed into chunks of at most `max_chars` (a longer paragraph split by sentences)."""
    pieces: list[str] = []
    for paragraph in re.split(r"\n\s*\n", text):
        paragraph = " ".join(paragraph.split())
        if len(paragraph) <= max_chars:
            pieces.append(paragraph)
        else:
            pieces += [
                s[i : i + max_chars]
                for s in _SENTENCE_END.split(paragraph)
                for i in range(0, len(s), max_chars)
            ]
    chunks: list[str] = []
    for piece in filter(None, pieces):
        if chunks and len(chunks[-1]) + 1 + len(piece) <= max_chars:
            chunks[-1] += " " + piece
        else:
            chunks.append(piece)
    return chunks


class TripleExtractor:
    """Free text → schema-valid knowledge triples, one model request per chunk of text."""

    def __init__(
        self, model: ChatModel, *, max_tokens: int = 512, max_chars: int = 2000, max_triples: int = 20
    ) -> None:
        if max_chars < 100 or max_triples < 1:
            raise ValueError("max_chars must be at least 100 and max_triples at least 1")
        self.model = model
        self.max_tokens = max_tokens
        self.max_chars = max_chars
        self.max_triples = max_triples

    def request(self, chunk: str) -> ChatRequest:
        return ChatRequest.of(
            EXTRACT_PROMPT.format(schema=describe_schema(), text=chunk),
            max_tokens=self.max_tokens,
            temperature=0.0,
            json_schema=extraction_schema(self.max_triples),
        )

    def extract(self, text: str) -> TripleExtraction:
        return asyncio.run(self.aextract(text))

    async def aextract(self, text: str) -> TripleExtraction:
        if not isinstance(text, str) or not text.strip():
            raise InvalidInputError("the text to extract triples from is empty")
        chunks = split_text(text, self.max_chars)
        completions = await asyncio.gather(*(self.model.acomplete(self.request(c)) for c in chunks))
        result = TripleExtraction(chunks=len(chunks))
        for index, (chunk, completion) in enumerate(zip(chunks, completions, strict=True)):
            result.add_reply(index, chunk, completion.text, completion.usage)
        return result
