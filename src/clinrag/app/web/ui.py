"""The web UI: Jinja2 pages that talk to the server with HTMX (a local file, no CDN).

`/` is the consultation (the patient's words → findings, the differential with what supports each diagnosis,
the next questions answered yes / no / don't know through a session, next steps, the answer with every cited
evidence id expandable); `/advanced` answers with any method (every evidence item expandable, the method's
trace as a timeline); `/ddx` the interactive DDXPlus differential. The UI posts forms to /ui/…, which answer
with HTML fragments; an error is shown in the page, not as an HTTP failure."""

from __future__ import annotations

import asyncio
import html
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from fastapi import Depends, FastAPI, Request
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from pydantic import ValidationError

from clinrag.app.web.handlers import answer_request, consult_view, error_status, session_view
from clinrag.app.web.schemas import (
    ConsultReply,
    ConsultRequest,
    ConsultSessionOut,
    ConsultStart,
    parse_params,
)
from clinrag.app.web.security import TOKEN_COOKIE, Unauthorized, token_matches
from clinrag.consult.answer.compose import numbered, reference
from clinrag.consult.answer.report import NextStep
from clinrag.core.errors import ClinragError, validation_problems

HERE = Path(__file__).parent
HTMX_FILE = "htmx.min.js"
LANGUAGES = (("en", "English"), ("fr", "Français"), ("zh", "中文"))
STEP_TITLES = (("test", "Tests"), ("drug", "Medicines"), ("care", "Care"))


def htmx_folder(configured: Path | None) -> Path:
    """Where install.sh puts htmx (npm package htmx.org) unless CLINRAG_UI_ASSETS_PATH says otherwise."""
    return configured or Path(sys.prefix) / "share" / "clinrag-ui" / "node_modules" / "htmx.org" / "dist"


# Shown instead of a page when a token is configured and the browser has not given it yet.
TOKEN_FORM = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>clinrag: token</title>
</head><body><form method="post" action="/ui/token"><input type="hidden" name="next" value="{next}">
<label>API token <input type="password" name="token" autocomplete="off" autofocus></label>
<button>Open</button></form></body></html>"""


def token_page(request: Request, authorized: Callable[[Request], None]) -> HTMLResponse | None:
    """None when the request carries the token, else the token form (401)."""
    try:
        authorized(request)
    except Unauthorized:
        return HTMLResponse(TOKEN_FORM.format(next=html.escape(request.url.path)), status_code=401)
    return None


def mount_ui(app: FastAPI, authorized: Callable[[Request], None]) -> None:
    templates = Jinja2Templates(directory=HERE / "templates")
    templates.env.filters["pretty"] = lambda value: json.dumps(
        value, indent=2, ensure_ascii=False, default=str
    )
    consult = app.state.consult
    settings = consult.settings
    token_required = settings.api_token is not None
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")

    def page(request: Request, name: str, **values: Any) -> HTMLResponse:
        return templates.TemplateResponse(request, name, {"token_required": token_required, **values})

    @app.get("/ui/htmx.min.js", include_in_schema=False, response_model=None)
    async def htmx() -> FileResponse | JSONResponse:
        path = htmx_folder(settings.ui_assets_path) / HTMX_FILE
        if not path.is_file():
            message = (
                f"{path} is missing: run scripts/install.sh (it installs htmx) or set CLINRAG_UI_ASSETS_PATH"
            )
            return JSONResponse({"error": message}, status_code=404)
        return FileResponse(path, media_type="text/javascript")

    def consultation(request: Request, view: ConsultSessionOut) -> HTMLResponse:
        evidence = {item.id: item for item in view.evidence}
        steps = step_groups(view.report.next_steps)
        references = numbered_references(view)

        def numbers_of(ids: list[str]) -> list[int]:
            return sorted({references[item][0] for item in ids if item in references})

        return page(
            request,
            "consultation.html",
            view=view,
            evidence=evidence,
            steps=steps,
            references=references,
            numbers_of=numbers_of,
        )

    @app.post("/ui/token", include_in_schema=False, response_model=None)
    async def enter_token(request: Request) -> Response:
        """The token form's target: a right token is kept in an HttpOnly cookie for this browser."""
        form = await _form(request)
        given, target = form.get("token", ""), form.get("next", "/")
        if settings.api_token is None or not token_matches(given, settings.api_token.get_secret_value()):
            return HTMLResponse(TOKEN_FORM.format(next=html.escape(target)), status_code=401)
        local = target if target.startswith("/") and not target.startswith("//") else "/"
        response = RedirectResponse(local, status_code=303)
        response.set_cookie(TOKEN_COOKIE, given.strip(), httponly=True, samesite="strict")
        return response

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def consult_page(request: Request) -> HTMLResponse:
        return token_page(request, authorized) or page(request, "consult.html", languages=LANGUAGES)

    @app.get("/advanced", response_class=HTMLResponse, include_in_schema=False)
    async def advanced_page(request: Request) -> HTMLResponse:
        from clinrag.methods.registry import method_names

        default = ConsultRequest.model_fields["method"].default
        return token_page(request, authorized) or page(
            request, "advanced.html", methods=method_names(), default_method=default
        )

    @app.get("/ddx", response_class=HTMLResponse, include_in_schema=False)
    async def ddx_page(request: Request) -> HTMLResponse:
        return token_page(request, authorized) or page(
            request, "ddx.html", available=app.state.ddx is not None
        )

    @app.post("/ui/consult", response_class=HTMLResponse, include_in_schema=False)
    async def consult_form(request: Request, _: None = Depends(authorized)) -> HTMLResponse:
        form = await _form(request)
        try:
            params = parse_params(form.get("params") or "{}")
            body = ConsultRequest(
                text=form.get("text", ""),
                task=form.get("task") or "free_text",
                params=params,
                **({"method": form["method"]} if form.get("method") else {}),
            )
            answer = await answer_request(consult, body)
        except (ClinragError, ValidationError) as exc:
            return page(request, "error.html", message=_message(exc), status=_status(exc))
        return page(request, "answer.html", answer=answer)

    @app.post("/ui/consult/sessions", response_class=HTMLResponse, include_in_schema=False)
    async def consult_session_start(request: Request, _: None = Depends(authorized)) -> HTMLResponse:
        form = await _form(request)
        sessions = app.state.sessions
        try:
            body = ConsultStart(text=form.get("text", ""), language=form.get("language") or "en")
            session_id, session = await sessions.start(body.text, body.language, {})
            view = await consult_view(sessions, session_id, session)
        except (ClinragError, ValidationError) as exc:
            return page(request, "error.html", message=_message(exc), status=_status(exc))
        return consultation(request, view)

    @app.post("/ui/consult/sessions/{session_id}/answer", include_in_schema=False)
    async def consult_session_answer(
        session_id: str, request: Request, _: None = Depends(authorized)
    ) -> HTMLResponse:
        form = await _form(request)
        sessions = app.state.sessions
        try:
            session = sessions.get(session_id)
            reply = ConsultReply(concept=form.get("concept", ""), answer=form.get("answer") or "unknown")
            await sessions.answer(session_id, session, reply.concept, reply.answer)
            view = await consult_view(sessions, session_id, session)
        except KeyError:
            message = f"no session {session_id} (it may have expired): start the consultation again"
            return page(request, "error.html", message=message, status=404)
        except (ClinragError, ValidationError) as exc:
            return page(request, "error.html", message=_message(exc), status=_status(exc))
        return consultation(request, view)

    @app.post("/ui/ddx", response_class=HTMLResponse, include_in_schema=False)
    async def ddx_start(request: Request, _: None = Depends(authorized)) -> HTMLResponse:
        form = await _form(request)
        service = app.state.ddx
        try:
            if service is None:
                raise ClinragError("interactive differentials need the server started with --ddx-data PATH")
            sex = form.get("sex") or None
            session_id, session = await asyncio.to_thread(service.start, sex, form.get("complaint", ""))
        except ClinragError as exc:
            return page(request, "error.html", message=_message(exc), status=_status(exc))
        return page(request, "ddx_session.html", view=session_view(service, session_id, session))

    @app.post("/ui/ddx/{session_id}/answer", response_class=HTMLResponse, include_in_schema=False)
    async def ddx_answer(session_id: str, request: Request, _: None = Depends(authorized)) -> HTMLResponse:
        raw = parse_qs((await request.body()).decode("utf-8", "replace"))
        service = app.state.ddx
        try:
            session = service.get(session_id) if service else None
            if session is None:
                raise ClinragError("interactive differentials are not available on this server")
            service.answer(session_id, session, (raw.get("answer") or ["unknown"])[0], raw.get("values", []))
        except KeyError:
            return page(
                request, "error.html", message=f"no session {session_id} (it may have expired)", status=404
            )
        except ClinragError as exc:
            return page(request, "error.html", message=_message(exc), status=_status(exc))
        return page(request, "ddx_session.html", view=session_view(service, session_id, session))


def numbered_references(view: ConsultSessionOut) -> dict[str, tuple[int, str]]:
    """Evidence id → (its number, the reference in words): numbered where the answer's sentences first cite
    it, then the questions' citations; the page shows [n] and the list, the ids stay in the API."""
    _, cited = numbered(view.report.sentences)
    for question in view.report.questions:
        cited += [item for item in question.evidence if item not in cited]
    by_id = {item.id: item for item in view.evidence}
    return {
        item: (number, reference(by_id[item], view.language) if item in by_id else item)
        for number, item in enumerate(cited, 1)
    }


def step_groups(steps: list[NextStep]) -> list[tuple[str, str, list[tuple[str, list[str]]]]]:
    """The next steps by kind (tests, medicines, care), each named once with the diagnoses it is for."""
    groups = []
    for kind, title in STEP_TITLES:
        named: dict[str, list[str]] = {}
        for step in steps:
            if step.kind == kind:
                named.setdefault(step.name, []).append(step.diagnosis)
        if named:
            groups.append((kind, title, list(named.items())))
    return groups


async def _form(request: Request) -> dict[str, str]:
    """A urlencoded form's first value per field (HTMX posts forms urlencoded)."""
    fields = parse_qs((await request.body()).decode("utf-8", "replace"), keep_blank_values=True)
    return {name: values[0] for name, values in fields.items()}


def _message(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return validation_problems(exc.errors(), root="input")
    return str(exc)


def _status(exc: Exception) -> int:
    return error_status(exc) if isinstance(exc, ClinragError) else 422
