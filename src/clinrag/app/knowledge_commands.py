"""`clinrag knowledge …`: a condition's card, and the audit of clinrag's clinical knowledge base."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

from clinrag.app.common import err, out, require_text
from clinrag.core.errors import InvalidInputError

knowledge_app = typer.Typer(
    help="clinrag's clinical knowledge base: show a condition's card, audit every fact's source.",
    no_args_is_help=True,
)


@knowledge_app.command("show")
def show(
    name: Annotated[
        str, typer.Argument(help="A condition's name, lay name, id or ICD-10-CM code (EN, FR, ZH).")
    ],
    as_json: Annotated[bool, typer.Option("--json", help="The condition records as JSON.")] = False,
) -> None:
    """Print a condition's card: names, how common, onset and course, urgency, features with how often, the
    findings against it, tests, management, and every document cited."""
    from clinrag.app.knowledge_card import card
    from clinrag.conditions.catalogue import packaged_catalogue

    catalogue = packaged_catalogue()
    found = catalogue.find(require_text(name, "the condition's name"))
    if not found:
        raise InvalidInputError(f"no condition of the knowledge base is named {name!r}")
    if as_json:
        out.print_json(json.dumps([c.model_dump(mode="json") for c in found], ensure_ascii=False))
        return
    for condition in found:
        out.print(card(condition, catalogue), highlight=False)


@knowledge_app.command("audit")
def audit(
    as_json: Annotated[bool, typer.Option("--json", help="The report as one JSON object.")] = False,
) -> None:
    """Check the packaged knowledge base: every HPO term, ICD-10-CM code and DDXPlus code resolves, every
    fact cites a registered source with a URL, every source is cited. Exit 1 on any problem."""
    from clinrag.conditions.audit import KnowledgeAudit
    from clinrag.conditions.catalogue import packaged_catalogue
    from clinrag.graph.importers.ddxplus import CONDITIONS, EVIDENCES, PACKAGED

    evidences = json.loads((PACKAGED / EVIDENCES).read_text(encoding="utf-8"))
    conditions = json.loads((PACKAGED / CONDITIONS).read_text(encoding="utf-8"))
    findings = {code for code, evidence in evidences.items() if evidence.get("data_type") == "B"}
    report = KnowledgeAudit(findings, set(conditions)).run(packaged_catalogue())
    if as_json:
        out.print_json(json.dumps({**report.__dict__, "passed": report.passed}))
    else:
        out.print(
            f"{report.conditions} conditions, {report.facts} cited facts, {report.sources} sources; "
            f"{report.cant_miss} can't-miss, {report.ddxplus} joined to DDXPlus; feature frequencies: "
            + ", ".join(f"{n} {basis}" for basis, n in sorted(report.basis.items())),
            highlight=False,
        )
        for title, counts in (("system", report.per_system), ("issuer", report.per_issuer)):
            table = Table(title=f"facts per {title}" if title == "issuer" else "conditions per system")
            table.add_column(title)
            table.add_column("count", justify="right")
            for key, n in counts.items():
                table.add_row(key, str(n))
            out.print(table)
    for problem in report.problems:
        err.print(f"[red]problem:[/] {problem}", highlight=False)
    if not report.passed:
        err.print(f"[bold red]audit failed:[/] {len(report.problems)} problems", highlight=False)
        raise typer.Exit(1)
    err.print("[green]audit passed[/]", highlight=False)
