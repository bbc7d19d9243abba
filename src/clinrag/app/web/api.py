"""The FastAPI application: the JSON API under /v1, the web UI, /healthz and the OpenAPI docs (served from
local files, no CDN).

Errors are JSON `{"error": ..., "detail": ...}`: 400 for a Host the server does not answer to, 401 without
the token, 403 for a change posted from another site's page, 413 for a body over the limit, 422 for invalid
input (a malformed body, an unknown method, a method that cannot be built as asked, a file or graph the
operator did not allow), 404 for an unknown session, answer or evidence id, 503 when a model or the graph is
unavailable, 504 past the per-request timeout. Evidence resolves only under the answer or session that gave
it. Logs name the method, sizes, status and time; patient text only with `api_log_text`."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import JSONResponse, StreamingResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from clinrag.app.web.handlers import (
    ERRORS,
    answer_request,
    consult_view,
    error_body,
    error_status,
    find_session,
    session_view,
)
from clinrag.app.web.schemas import (
    ConsultReply,
    ConsultRequest,
    ConsultSessionOut,
    ConsultStart,
    DdxAnswer,
    DdxSessionOut,
    DdxStart,
    ErrorOut,
    Health,
)
from clinrag.app.web.security import (
    BodyLimit,
    HostGuard,
    RequestDeadline,
    SecurityHeaders,
    check_token,
    configured_token,
)
from clinrag.app.web.services import ConsultService, ConsultSessions, DdxService
from clinrag.app.web.ui import mount_ui, token_page
from clinrag.core.errors import (
    SHOWN_PROBLEMS,
    ClinragError,
    ConfigError,
    validation_problems,
)
from clinrag.core.models import STEP_LISTENER, Answer, Evidence, TraceStep


def create_app(consult: ConsultService, ddx: DdxService | None = None) -> FastAPI:
    settings = consult.settings
    token = configured_token(settings.api_token)
    app = FastAPI(
        title="clinrag",
        description="Doctor-like medical reasoning with evidence: consultations, interactive differentials.",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    # The last added runs first: the Host and Origin are checked before anything is read or timed.
    app.add_middleware(RequestDeadline, seconds=settings.api_timeout_s)
    app.add_middleware(
        BodyLimit, max_bytes=settings.api_max_body_bytes, timeout_s=settings.api_body_timeout_s
    )
    app.add_middleware(HostGuard, allowed_hosts=settings.api_allowed_hosts)
    app.add_middleware(SecurityHeaders)  # outermost: refusals carry the headers too
    sessions = ConsultSessions(consult)
    app.state.consult, app.state.sessions, app.state.ddx = consult, sessions, ddx

    def authorized(request: Request) -> None:
        check_token(request, token)

    @app.exception_handler(ClinragError)
    async def _clinrag_error(request: Request, exc: ClinragError) -> JSONResponse:
        status = error_status(exc)
        headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
        return JSONResponse(error_body(exc), status_code=status, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        problems = [
            {"where": ".".join(map(str, e.get("loc", ()))), "problem": e.get("msg", "")}
            for e in errors[:SHOWN_PROBLEMS]
        ]
        summary = validation_problems(errors, root="body", shown=5)
        return JSONResponse({"error": f"invalid request: {summary}", "detail": problems}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400:  # FastAPI could not read the body at all (e.g. not UTF-8)
            message = f"invalid request: {exc.detail}: send a UTF-8 JSON body"
            return JSONResponse({"error": message, "detail": "InvalidInputError"}, status_code=422)
        return JSONResponse({"error": str(exc.detail), "detail": None}, status_code=exc.status_code)

    @app.get("/healthz", response_model=Health)
    async def healthz() -> Health:
        from clinrag.methods.registry import method_names

        return Health(methods=method_names(), ddx=ddx is not None)

    @app.post("/v1/consult", response_model=Answer, responses=ERRORS, dependencies=[Depends(authorized)])
    async def consult_answer(body: ConsultRequest) -> Answer:
        """Answer a case with a method; the answer carries its evidence and trace."""
        return await answer_request(consult, body)

    @app.post(
        "/v1/consult/stream",
        responses={**ERRORS, 200: {"content": {"text/event-stream": {}}}},
        dependencies=[Depends(authorized)],
    )
    async def consult_stream(body: ConsultRequest) -> StreamingResponse:
        """The same as /v1/consult as server-sent events: a `step` event as each step of the method ends,
        then one `answer` (or `error`) event."""
        await consult.amethod(body.method, body.params)  # invalid → 422 before streaming
        return StreamingResponse(_events(body), media_type="text/event-stream")

    @app.post(
        "/v1/consult/sessions",
        response_model=ConsultSessionOut,
        status_code=201,
        responses=ERRORS,
        dependencies=[Depends(authorized)],
    )
    async def consult_session_start(body: ConsultStart) -> ConsultSessionOut:
        """Start an interactive consultation from the patient's words (the `consult` method, no model): the
        reply holds the findings, the differential, the next questions (with their concept ids), the next
        steps and the composed answer."""
        session_id, session = await sessions.start(body.text, body.language, body.params)
        return await consult_view(sessions, session_id, session)

    @app.get("/v1/consult/sessions/{session_id}", response_model=ConsultSessionOut, responses=ERRORS)
    async def consult_session_get(session_id: str, _: None = Depends(authorized)) -> ConsultSessionOut:
        session = find_session(sessions, session_id)
        return await consult_view(sessions, session_id, session)

    @app.post(
        "/v1/consult/sessions/{session_id}/answer",
        response_model=ConsultSessionOut,
        responses=ERRORS,
        dependencies=[Depends(authorized)],
    )
    async def consult_session_answer(session_id: str, body: ConsultReply) -> ConsultSessionOut:
        """Answer a question about a finding (yes / no / unknown); the reply is the updated consultation, in
        which that finding is no longer asked about."""
        session = find_session(sessions, session_id)
        await sessions.answer(session_id, session, body.concept, body.answer)
        return await consult_view(sessions, session_id, session)

    @app.get(
        "/v1/consult/sessions/{session_id}/evidence/{evidence_id:path}",
        response_model=Evidence,
        responses=ERRORS,
        dependencies=[Depends(authorized)],
    )
    async def consult_session_evidence(session_id: str, evidence_id: str) -> Evidence:
        """An evidence item the session's consultation cites, as it last stood."""
        return _resolve(find_session(sessions, session_id).evidence, evidence_id, "this consultation")

    @app.post(
        "/v1/ddx/sessions",
        response_model=DdxSessionOut,
        status_code=201,
        responses={**ERRORS, 503: {"model": ErrorOut}},
        dependencies=[Depends(authorized)],
    )
    async def ddx_start(body: DdxStart) -> DdxSessionOut:
        """Start an interactive differential from the main complaint; the reply holds the first question."""
        service = _ddx()
        session_id, session = await asyncio.to_thread(service.start, body.sex, body.complaint)
        return session_view(service, session_id, session)

    @app.get("/v1/ddx/sessions/{session_id}", response_model=DdxSessionOut, responses=ERRORS)
    async def ddx_get(session_id: str, _: None = Depends(authorized)) -> DdxSessionOut:
        service = _ddx()
        return session_view(service, session_id, find_session(service, session_id))

    @app.post(
        "/v1/ddx/sessions/{session_id}/answer",
        response_model=DdxSessionOut,
        responses=ERRORS,
        dependencies=[Depends(authorized)],
    )
    async def ddx_answer(session_id: str, body: DdxAnswer) -> DdxSessionOut:
        """Answer the pending question; the reply holds the updated differential and the next question."""
        service = _ddx()
        session = find_session(service, session_id)
        service.answer(session_id, session, body.answer, body.values)
        return session_view(service, session_id, session)

    @app.get(
        "/v1/answers/{answer_id}/evidence/{evidence_id:path}",
        response_model=Evidence,
        responses=ERRORS,
        dependencies=[Depends(authorized)],
    )
    async def answer_evidence(answer_id: str, evidence_id: str) -> Evidence:
        """An evidence item of an answer this server gave (`answer_id` is the answer's `case_id`)."""
        items = consult.answers.get(answer_id)
        if items is None:
            raise HTTPException(404, f"no answer {answer_id!r} (answers are kept in memory for a while)")
        return _resolve(items, evidence_id, "this answer")

    @app.get("/openapi.json", include_in_schema=False, dependencies=[Depends(authorized)])
    async def openapi() -> dict[str, Any]:
        return app.openapi()

    @app.get("/docs", include_in_schema=False)
    async def docs(request: Request) -> Any:
        return token_page(request, authorized) or get_swagger_ui_html(
            openapi_url="/openapi.json",
            title="clinrag API",
            swagger_js_url="/docs-assets/swagger-ui-bundle.js",
            swagger_css_url="/docs-assets/swagger-ui.css",
            swagger_favicon_url="/docs-assets/favicon-32x32.png",
        )

    import swagger_ui_bundle

    app.mount("/docs-assets", StaticFiles(directory=swagger_ui_bundle.swagger_ui_path), name="docs-assets")

    mount_ui(app, authorized)

    async def _events(body: ConsultRequest) -> AsyncIterator[str]:
        queue: asyncio.Queue[tuple[str, Any] | None] = asyncio.Queue()
        loop = asyncio.get_running_loop()

        def on_step(step: TraceStep) -> None:
            event = {"name": step.name, "duration_s": round(step.duration_s, 3), "error": step.error}
            loop.call_soon_threadsafe(queue.put_nowait, ("step", event))

        async def run() -> None:
            STEP_LISTENER.set(on_step)  # this task's own context: the method's threads inherit it
            # Queued as callbacks too, so they come after the steps whose callbacks are already scheduled.
            try:
                answer = await answer_request(consult, body)
                loop.call_soon(queue.put_nowait, ("answer", answer.model_dump(mode="json")))
            except Exception as exc:
                loop.call_soon(queue.put_nowait, ("error", {**error_body(exc), "status": error_status(exc)}))
            finally:
                loop.call_soon(queue.put_nowait, None)

        task = asyncio.create_task(run())
        try:
            while (item := await queue.get()) is not None:
                kind, data = item
                yield f"event: {kind}\ndata: {json.dumps(jsonable_encoder(data))}\n\n"
        finally:
            task.cancel()

    def _resolve(items: dict[str, Evidence], evidence_id: str, where: str) -> Evidence:
        item = items.get(evidence_id)
        if item is None:
            raise HTTPException(404, f"no evidence {evidence_id!r} in {where}")
        return item

    def _ddx() -> DdxService:
        if ddx is None:
            raise ConfigError(
                "interactive differentials need a DDXPlus folder: start the server with --ddx-data PATH "
                "(release_conditions.json, release_evidences.json and a patients CSV)"
            )
        return ddx

    return app
