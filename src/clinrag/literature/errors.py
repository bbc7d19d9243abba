"""Typed failures of a literature source. The search facade records them in its result; it never raises them.

Each class names its `kind`, the short label a result carries so callers can tell a slow service from a
broken one without parsing messages."""

from __future__ import annotations

from typing import ClassVar, Literal

from clinrag.core.errors import ClinragError

FailureKind = Literal[
    "timeout",  # one HTTP call ran past its per-call timeout (after the retries)
    "deadline",  # the source had not finished when the search's total deadline passed
    "http_status",  # the service answered with an error status (after the retries)
    "connection",  # the service could not be reached
    "malformed",  # the reply was not the XML / JSON the service documents
    "service_error",  # the service answered with an error of its own (e.g. an E-utilities <ERROR>)
    "unexpected",  # anything else: a bug, recorded rather than raised
]


class LiteratureError(ClinragError):
    kind: ClassVar[FailureKind] = "unexpected"
    status_code: int | None = None


class SourceTimeoutError(LiteratureError):
    kind = "timeout"


class SourceConnectionError(LiteratureError):
    kind = "connection"


class SourceHTTPError(LiteratureError):
    kind = "http_status"

    def __init__(self, message: str, status_code: int) -> None:
        super().__init__(message)
        self.status_code = status_code


class MalformedResponseError(LiteratureError):
    kind = "malformed"


class ServiceError(LiteratureError):
    kind = "service_error"
