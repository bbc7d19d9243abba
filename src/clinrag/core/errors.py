"""Typed errors. Every expected failure is a `ClinragError`; the CLI prints it without a traceback."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

SHOWN_PROBLEMS = 10  # a message names this many problems of a validation, then counts the rest


class ClinragError(Exception):
    """Base class of every error clinrag raises on purpose."""


class ConfigError(ClinragError):
    """Settings or a config file are invalid."""


class InvalidInputError(ClinragError):
    """A caller passed input that cannot be processed (empty, too large, malformed)."""


class ModelUnavailableError(ClinragError):
    """A model backend cannot be reached or loaded (server down, timeout, package missing)."""


class ModelAuthError(ClinragError):
    """The model server refused the credentials."""


class ModelRequestError(ClinragError):
    """The model server rejected the request itself (bad parameters, context too long)."""


class StructuredOutputError(ClinragError):
    """Model output could not be parsed or validated against the expected schema, even after one repair."""

    def __init__(self, message: str, raw: str) -> None:
        super().__init__(message)
        self.raw = raw


def validation_problems(errors: Sequence[Mapping[str, Any]], root: str, shown: int = SHOWN_PROBLEMS) -> str:
    """Pydantic's validation errors as one line, "where: what; …" (`root` where the location is empty): the
    first `shown`, then how many more there are: a request with thousands of problems gets a short reply."""
    listed = "; ".join(f"{'.'.join(map(str, e['loc'])) or root}: {e['msg']}" for e in errors[:shown])
    return listed + (f"; and {len(errors) - shown} more" if len(errors) > shown else "")


class ReplayMissError(ClinragError):
    """A replay backend was asked a request that is not in its recording."""


class AnswerParseError(ClinragError):
    """A generated answer names none (or more than one) of the valid choices; never resolved by a default."""

    def __init__(self, message: str, raw: str) -> None:
        super().__init__(message)
        self.raw = raw


class IndexMismatchError(ClinragError):
    """A persisted index does not match what is asked of it (embedder, dimension, format version)."""


class DataFormatError(ClinragError):
    """An input data file cannot be read at all (missing, not UTF-8, no valid records)."""


class GraphUnavailableError(ClinragError):
    """The graph server cannot be started or reached (not running, died, timed out)."""


class ModelReplyError(ModelUnavailableError):
    """The model server answered HTTP 200 with something that is not a valid reply (`{}`, HTML, no choices):
    the server or a proxy in front of it is broken, so it counts as an outage, not as the method's answer."""


class RunStoppedError(ClinragError):
    """An evaluation run stopped because its backends kept failing (an outage); rerun to resume."""


class RunLockedError(ClinragError):
    """Another process is running an evaluation in the same run directory."""


class BuildsBusyError(ClinragError):
    """More builds (of methods for new parameters) are under way than the server takes at once."""
