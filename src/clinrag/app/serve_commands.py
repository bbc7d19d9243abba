"""`clinrag serve`: the HTTP API and web UI on uvicorn."""

from __future__ import annotations

import ipaddress
import logging
from pathlib import Path
from typing import Annotated

import typer

from clinrag.app.common import PatientsDatasetOption, PatientsOption, PatientsPathOption, out, settings_from
from clinrag.core.errors import ConfigError


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


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
    log_level: Annotated[str, typer.Option(help="Log level of clinrag and uvicorn.")] = "info",
) -> None:
    """Serve the HTTP API (/v1, OpenAPI docs at /docs) and the web UI: the interactive consultation at /, any
    method at /advanced, the DDXPlus differential at /ddx. Settings come from CLINRAG_* (CLINRAG_API_TOKEN,
    CLINRAG_API_MAX_BODY_BYTES, CLINRAG_API_TIMEOUT_S, CLINRAG_API_LOG_TEXT)."""
    import uvicorn

    from clinrag.app.web.api import create_app
    from clinrag.app.web.services import ConsultService, DdxService
    from clinrag.embed.factory import build_embedder
    from clinrag.patients.defaults import open_patient_base

    settings = settings_from(ctx)
    if kb is not None:
        settings = settings.model_copy(update={"kb_path": kb})
    if not is_loopback(host) and settings.api_token is None:
        raise ConfigError(f"binding to {host} (beyond loopback) needs a bearer token: set CLINRAG_API_TOKEN")
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s")
    embedder = build_embedder(settings)
    base = open_patient_base(settings, embedder, patients, dataset=patients_dataset, data_path=patients_path)
    consult = ConsultService(settings, patient_base=base, embedder=lambda _: embedder)
    folder = ddx_data or (settings.data_dir / "ddxplus" if settings.data_dir else None)
    ddx = DdxService.from_ddxplus(folder, embedder) if folder is not None and folder.is_dir() else None
    if ddx_data is not None and ddx is None:
        raise ConfigError(f"--ddx-data {ddx_data} is not a folder")
    app = create_app(consult, ddx)
    out.print(f"clinrag serving on http://{host}:{port} (UI at /, API docs at /docs)")
    uvicorn.run(app, host=host, port=port, log_level=log_level.lower(), access_log=False)
