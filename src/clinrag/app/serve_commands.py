"""`clinrag serve`: the HTTP API and web UI on uvicorn."""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import logging
import signal
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Annotated, Literal

import typer

from clinrag.app.common import PatientsDatasetOption, PatientsOption, PatientsPathOption, out, settings_from
from clinrag.core.errors import ConfigError
from clinrag.core.settings import Settings

WILDCARDS = ("0.0.0.0", "::", "")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def served_settings(
    settings: Settings, host: str, kb: Path | None, paths: list[Path], graphs: list[str]
) -> Settings:
    """The settings `serve` runs with, refused when they would leave the server open: beyond loopback a
    bearer token is required (an empty one is no token), and so are the Host names clients will use."""
    from clinrag.app.web.security import configured_token
    from clinrag.graph.factory import graph_scheme

    token = configured_token(settings.api_token)
    if not settings.api_allowed_hosts:
        raise ConfigError(
            "CLINRAG_API_ALLOWED_HOSTS is empty: every request would be refused; unset it for the loopback "
            "names, or give the names clients reach this server by ('*' for any)"
        )
    update: dict[str, object] = {
        "api_data_roots": [*settings.api_data_roots, *paths],
        "api_graph_uris": [*settings.api_graph_uris, *graphs],
    }
    for uri in update["api_graph_uris"]:  # a graph no store speaks would be refused to every request
        try:
            graph_scheme(uri)
        except ValueError as exc:
            raise ConfigError(f"--allow-graph / CLINRAG_API_GRAPH_URIS: {exc}") from None
    if kb is not None:
        if not kb.is_dir():
            raise ConfigError(f"--kb {kb}: no knowledge base there (build one with `clinrag kb build`)")
        update["kb_path"] = kb
    if not is_loopback(host):
        if token is None:
            raise ConfigError(
                f"binding to {host} (beyond loopback) needs a bearer token: set CLINRAG_API_TOKEN"
            )
        if settings.api_allowed_hosts == Settings.model_fields["api_allowed_hosts"].default:
            if host in WILDCARDS:
                raise ConfigError(
                    f"binding to {host or 'every address'}: set CLINRAG_API_ALLOWED_HOSTS to the names "
                    "clients reach this server by (or '*' for any)"
                )
            update["api_allowed_hosts"] = [*settings.api_allowed_hosts, host]
    return settings.model_copy(update=update)


def serve(
    ctx: typer.Context,
    host: Annotated[
        str, typer.Option(help="Address to bind; beyond loopback CLINRAG_API_TOKEN is required.")
    ] = ("127.0.0.1"),
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port (0: any free port).")] = 8000,
    kb: Annotated[Path | None, typer.Option(help="A built knowledge base (else CLINRAG_KB_PATH).")] = None,
    patients: PatientsOption = None,
    patients_dataset: PatientsDatasetOption = None,
    patients_path: PatientsPathOption = None,
    ddx_data: Annotated[
        Path | None,
        typer.Option(
            help="A DDXPlus folder: enables interactive differentials (default: <data dir>/ddxplus)."
        ),
    ] = None,
    allow_path: Annotated[
        list[Path] | None,
        typer.Option(
            help="A folder whose files requests' parameters may name (repeatable; CLINRAG_API_DATA_ROOTS). "
            "None: requests use only the server's own data."
        ),
    ] = None,
    allow_graph: Annotated[
        list[str] | None,
        typer.Option(help="A graph URI requests' parameters may name (repeatable; CLINRAG_API_GRAPH_URIS)."),
    ] = None,
    log_level: Annotated[
        Literal["critical", "error", "warning", "info", "debug"],
        typer.Option(help="Log level of clinrag and uvicorn."),
    ] = "info",
) -> None:
    """Serve the HTTP API (/v1, OpenAPI docs at /docs) and the web UI: the interactive consultation at /, any
    method at /advanced, the DDXPlus differential at /ddx. Settings come from CLINRAG_API_* (the token, the
    allowed Host names, data roots and graph URIs, body and time limits, what is kept for clients)."""
    import uvicorn

    from clinrag.app.web.api import create_app
    from clinrag.app.web.server import server_config
    from clinrag.app.web.services import ConsultService, DdxService
    from clinrag.embed.factory import build_embedder
    from clinrag.patients.defaults import open_patient_base

    settings = served_settings(settings_from(ctx), host, kb, allow_path or [], allow_graph or [])
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s")
    # httpx logs each request's URL at INFO: a model server's ?api_key= would reach the log
    logging.getLogger("httpx").setLevel(max(logging.WARNING, logging.getLogger().level))
    embedder = build_embedder(settings)
    # a base the user names is opened now (a wrong path fails at start); the default one when a method that
    # draws on patients is first asked for
    named = patients is not None or patients_dataset is not None
    base = functools.partial(
        open_patient_base, settings, embedder, patients, dataset=patients_dataset, data_path=patients_path
    )
    consult = ConsultService(settings, patient_base=base() if named else base, embedder=lambda _: embedder)
    folder = ddx_data or (settings.data_dir / "ddxplus" if settings.data_dir else None)
    ddx = (
        DdxService.from_ddxplus(folder, embedder, settings)
        if folder is not None and folder.is_dir()
        else None
    )
    if ddx_data is not None and ddx is None:
        raise ConfigError(f"--ddx-data {ddx_data} is not a folder")
    app = create_app(consult, ddx)
    out.print(f"clinrag serving on http://{host}:{port} (UI at /, API docs at /docs)")
    with _stopped_by_signals():
        uvicorn.Server(server_config(app, settings, host, port, log_level)).run()


class _Stopped(BaseException):
    """A SIGTERM or SIGINT has stopped the server (a BaseException, like KeyboardInterrupt)."""


@contextlib.contextmanager
def _stopped_by_signals() -> Iterator[None]:
    """Make SIGTERM and SIGINT end `serve` normally, exit code 0. uvicorn answers either by shutting down
    gracefully and then raising it again under the handler it found: the default one would kill the process
    (exit 143 on SIGTERM) before its atexit handlers release the FalkorDB servers it started."""

    def stop(signum: int, frame: FrameType | None) -> None:
        raise _Stopped(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    except _Stopped as stopped:
        out.print(f"clinrag stopped on {stopped}")
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
