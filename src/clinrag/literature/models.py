"""What a literature search returns: the citations that arrived, and a typed record of every source."""

from __future__ import annotations

from pydantic import BaseModel, Field

from clinrag.core.models import Evidence
from clinrag.literature.errors import FailureKind


class SourceFailure(BaseModel):
    """A source that produced nothing: why (`kind`, the exception's class and message) and after how long."""

    source: str
    kind: FailureKind
    error_type: str
    message: str
    elapsed_s: float
    status_code: int | None = None


class SourceRun(BaseModel):
    """How one source went: `ok` with its number of hits (`cached` when served without a request)."""

    source: str
    ok: bool
    hits: int = 0
    cached: bool = False
    elapsed_s: float


class LiteratureResult(BaseModel):
    """Citations from every source that finished before the deadline (deduplicated by evidence id, in the
    order the sources are configured), and the failures of the others."""

    query: str
    limit: int
    evidence: list[Evidence] = Field(default_factory=list)
    failures: list[SourceFailure] = Field(default_factory=list)
    runs: list[SourceRun] = Field(default_factory=list)
    elapsed_s: float = 0.0
    deadline_s: float
