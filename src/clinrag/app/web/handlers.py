"""What the JSON API and the web pages share: answering a consultation request, the views of interactive
consultations and differentials, and the HTTP status of each kind of error."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Any, Protocol, TypeVar

from fastapi import HTTPException
from pydantic import ValidationError

from clinrag.app.coded import coded_patient
from clinrag.app.web.schemas import (
    ConsultExchange,
    ConsultRequest,
    ConsultSessionOut,
    DdxChoice,
    DdxExchangeOut,
    DdxQuestionOut,
    DdxSessionOut,
    ErrorOut,
)
from clinrag.app.web.security import Unauthorized
from clinrag.app.web.services import (
    ANSWER_STATUS,
    ConsultService,
    ConsultSession,
    ConsultSessions,
    DdxService,
)
from clinrag.consult.answer.report import ConsultationReport
from clinrag.core.errors import (
    BuildsBusyError,
    ClinragError,
    ConfigError,
    DataFormatError,
    GraphUnavailableError,
    InvalidInputError,
    ModelRequestError,
    ModelUnavailableError,
)
from clinrag.core.models import Answer, Case
from clinrag.eval.datasets.phenopackets import phenopacket_case
from clinrag.methods.meddx.interactive import DdxSession

log = logging.getLogger("clinrag.api")
ERRORS = {
    404: {"model": ErrorOut},
    401: {"model": ErrorOut},
    413: {"model": ErrorOut},
    422: {"model": ErrorOut},
}
STATUS = {
    Unauthorized: 401,
    InvalidInputError: 422,
    DataFormatError: 422,  # data a request named (a knowledge or patients path) is not in the expected form
    ModelUnavailableError: 503,
    GraphUnavailableError: 503,
    ConfigError: 503,
    BuildsBusyError: 503,
    ModelRequestError: 502,
}


class RequestTimeout(ClinragError):
    """A request that ran past the per-request timeout."""


def error_status(exc: Exception) -> int:
    if isinstance(exc, RequestTimeout):
        return 504
    return next((status for kind, status in STATUS.items() if isinstance(exc, kind)), 500)


def error_body(exc: Exception) -> dict[str, Any]:
    return {"error": str(exc) or type(exc).__name__, "detail": type(exc).__name__}


def loggable(value: str) -> str:
    """A client's string as one log line: newlines and other control characters escaped."""
    return value.encode("unicode_escape").decode("ascii")


async def answer_request(consult: ConsultService, body: ConsultRequest) -> Answer:
    """Answer a consult request under the per-request timeout, logging it (text only with api_log_text)."""
    settings = consult.settings
    try:
        packet = phenopacket_case(body.phenopacket, "the request's phenopacket") if body.phenopacket else None
        patient = coded_patient(body.text, body.hpo, body.excluded_hpo, packet)
        if not body.text.strip() and patient is None:
            raise InvalidInputError("the case is empty: give its text, HPO terms or a phenopacket")
        case = Case(
            id=f"api-{uuid.uuid4().hex}",  # also the key its evidence is resolved by: not guessable
            language=body.language,
            task=body.task,
            question=body.text,
            options=body.options,
            patient=patient,
        )
    except ValidationError as exc:
        raise InvalidInputError(f"invalid case: {exc.errors()[0]['msg']}") from None
    started = time.perf_counter()
    status = 200
    try:
        async with asyncio.timeout(settings.api_timeout_s):
            return await consult.answer(case, body.method, body.params)
    except TimeoutError:
        status = 504
        raise RequestTimeout(f"the answer took longer than {settings.api_timeout_s:g} s") from None
    except asyncio.CancelledError:  # the request's deadline (RequestDeadline) ran out first
        status = 504
        raise
    except Exception as exc:
        status = error_status(exc)
        raise
    finally:
        text = f" text={body.text!r}" if settings.api_log_text else ""
        log.info(
            "consult method=%s task=%s chars=%d status=%d %.2fs%s",
            loggable(body.method), body.task, len(body.text), status, time.perf_counter() - started, text,
        )  # fmt: skip


S = TypeVar("S", covariant=True)
REPLIES = {status: reply for reply, status in ANSWER_STATUS.items()}


class Sessions(Protocol[S]):
    def get(self, session_id: str) -> S: ...


def find_session(service: Sessions[S], session_id: str) -> S:
    try:
        return service.get(session_id)
    except KeyError:
        raise HTTPException(404, f"no session {session_id!r} (sessions are kept in memory)") from None


async def consult_view(
    sessions: ConsultSessions, session_id: str, session: ConsultSession
) -> ConsultSessionOut:
    """The session's consultation as it stands (its evidence is what /v1/consult/sessions/{id}/evidence
    resolves)."""
    answer = await sessions.view(session_id, session)
    return ConsultSessionOut(
        session_id=session_id,
        report=ConsultationReport.model_validate(answer.details),
        text=answer.text,
        evidence=answer.evidence,
        answered=[ConsultExchange(concept=c, answer=REPLIES[status]) for c, status in session.state.answered],
        language=session.case.language,
    )


def session_view(service: DdxService, session_id: str, session: DdxSession) -> DdxSessionOut:
    question = session.question
    return DdxSessionOut(
        session_id=session_id,
        question=DdxQuestionOut(
            evidence=question.evidence,
            text=question.text,
            kind=question.kind,
            choices=[DdxChoice(value=v, text=t) for v, t in question.choices],
        )
        if question
        else None,
        differential=service.interactive.differential(session),
        dialogue=[DdxExchangeOut(question=e.question, answer=e.answer) for e in session.dialogue],
        questions_asked=len(session.dialogue) - 1,
        done=session.done,
        stop_reason=session.stop_reason,
    )
