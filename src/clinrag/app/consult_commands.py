"""`clinrag consult`: the main job — a grounded consultation built from structure (findings, a
differential from the disease knowledge and similar patients, next questions and steps), every sentence
citing its evidence; `-i` asks the next questions at the terminal and redraws the differential after each
answer."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.table import Table

from clinrag.app.coded import coded_patient
from clinrag.app.common import out, settings_from
from clinrag.core.errors import InvalidInputError
from clinrag.core.models import Answer, Case

ANSWERS = {"y": "present", "yes": "present", "n": "absent", "no": "absent", "?": "uncertain", "": "uncertain"}
ANSWERS |= {"d": "uncertain", "dk": "uncertain", "don't know": "uncertain", "unknown": "uncertain"}


def read_text(text: str) -> str:
    """The consultation text from the argument or, for '-', standard input — strict UTF-8, checked first."""
    if text != "-":
        return text
    try:
        return sys.stdin.buffer.read().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInputError(
            f"the text on standard input is not UTF-8 (byte offset {exc.start})"
        ) from None


def consult(
    ctx: typer.Context,
    text: Annotated[
        str,
        typer.Argument(help="The patient's description and question; '-' reads stdin (optional with --hpo)."),
    ] = "",
    sources: Annotated[
        list[str] | None,
        typer.Option(
            "--sources",
            "-s",
            help="Disease knowledge, as `graph build -s` names it (default: packaged:faker-diseases and "
            "packaged:hpo-diseases); e.g. -s ddxplus:DIR.",
        ),
    ] = None,
    patients: Annotated[
        str | None,
        typer.Option(help="Similar past patients: DATASET:PATH (e.g. ddxplus:../shared/data/ddxplus)."),
    ] = None,
    kb: Annotated[
        Path | None,
        typer.Option(
            help="A statement knowledge base (`clinrag kb build`) quoted and cited beside the leading "
            "diagnoses."
        ),
    ] = None,
    interactive: Annotated[
        bool, typer.Option("--interactive", "-i", help="Ask the next questions here, one at a time.")
    ] = False,
    max_questions: Annotated[int, typer.Option(min=1, max=50, help="Questions asked with -i at most.")] = 10,
    confidence: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="With -i, stop once the leading diagnosis reaches this.")
    ] = 0.9,
    language: Annotated[Literal["en", "zh", "fr"], typer.Option(help="Language of the answer.")] = "en",
    prose: Annotated[
        Literal["template", "llm"] | None,
        typer.Option(
            help="Who writes the answer's sentences: the templates, or the chat model (a capable one), "
            "refined by Med-TextGrad and checked sentence by sentence against the evidence "
            "(default: the consult_prose setting, else template)."
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the whole answer as JSON.")] = False,
    hpo: Annotated[
        list[str] | None,
        typer.Option(help="HPO terms the patient shows, comma-separated or repeated: HP:0001166,HP:0001083."),
    ] = None,
    not_: Annotated[
        list[str] | None, typer.Option("--not", help="HPO terms the patient is known not to show.")
    ] = None,
    phenopacket: Annotated[
        Path | None,
        typer.Option(help="A GA4GH phenopacket (v2 JSON): its observed and excluded terms, age and sex."),
    ] = None,
) -> None:
    """A grounded consultation: findings understood from the text, a differential with probabilities from
    the disease knowledge (and similar patients with --patients), the next questions, tests and treatments
    for the leading diagnoses, and an answer whose every sentence cites its evidence. No model writes it
    unless --prose llm asks one to; its sentences are then kept only where the evidence supports them."""
    question = read_text(text)
    packet = None
    if phenopacket is not None:
        from clinrag.eval.datasets.phenopackets import read_phenopacket  # loads the GA4GH schema's classes

        packet = read_phenopacket(phenopacket)
    patient = coded_patient(question, hpo or [], not_ or [], packet)
    if not question.strip() and patient is None:
        raise InvalidInputError("the consultation text is empty (give a text, --hpo or --phenopacket)")
    params = {"sources": ",".join(sources)} if sources else {}
    if patients:
        params["patients"] = patients
    if prose:
        params["prose"] = prose
    if kb:
        params["kb"] = str(kb)
    case = Case(id="consult", language=language, question=question, patient=patient)
    settings = settings_from(ctx)
    warm = None if interactive else _warm_answer(settings, params, case)
    if warm is not None:
        _print(warm, language, as_json)
        return
    from clinrag.methods.base import MethodContext
    from clinrag.methods.consult import ConsultConfig, build

    method = build(MethodContext(settings=settings), ConsultConfig.from_params(params))
    # With -i the answer comes after the interview (a model writing the prose is asked once, at the end).
    consultant, state = method.start(case)
    if interactive and consultant.report(state)[0].differential:
        answer = _interview(method, case, consultant, state, max_questions, confidence)
    else:
        answer = method.answer_state(case, state, consultant)
    _print(answer, language, as_json)


def _warm_answer(settings, params: dict, case: Case) -> Answer | None:
    """The warm consultation process's answer (`app/warm.py`); where none listens yet, one is started for
    the next consultation and this one is answered here."""
    from clinrag.app import warm

    path = warm.warm_socket(settings)
    if path is None or not warm.servable(params):
        return None
    answer = warm.ask(path, params, case, settings.api_timeout_s)
    if answer is None:
        warm.spawn(path, settings)
    return answer


def _print(answer: Answer, language: str, as_json: bool) -> None:
    if as_json:
        out.print_json(answer.model_dump_json())
    else:
        _print_answer(answer, language)


def _interview(method, case: Case, consultant, state, max_questions: int, confidence: float) -> Answer:
    """Ask the best question, take the answer, redraw the differential; stop at the question budget, at
    `confidence`, when no question is left, on end of input, or at once when an answer is a red flag (the
    urgency sentence is printed then, before anything else). `state` is what `method.start` read of the
    case (its words and any codes given with --hpo or --phenopacket)."""
    from clinrag.consult.answer.compose import rendered

    asked = 0
    flags_before: set[str] = set()  # the red flags before the last answer: one it raises ends the interview
    while True:
        data, evidence = consultant.report(state)
        texts = {item.id: item.text for item in evidence}
        report = rendered(data, case.language, texts, consultant.names_in(case.language))
        _print_differential(report.differential[:5])
        top = report.differential[0].probability if report.differential else 0.0
        # the red flags the last answer raised (none before the first answer: the text's are in the answer)
        flags = [flag.finding for flag in report.red_flags]
        raised = [flag for flag in flags if flag not in flags_before] if asked else []
        flags_before = set(flags)
        for sentence in report.sentences if raised else ():
            if sentence.kind == "urgency":
                out.print(sentence.text, markup=False, highlight=False, style="bold red")
        stop = (
            f"red flag: {', '.join(raised)}" if raised
            else "the question budget is spent" if asked >= max_questions
            else "confident" if top >= confidence
            else "no question left" if not report.questions
            else None
        )  # fmt: skip
        if stop:
            out.print(f"stopping after {asked} questions: {stop}", highlight=False)
            break
        question = report.questions[0]
        out.print(f"Q{asked + 1}. {question.text} (yes / no / don't know)", markup=False, highlight=False)
        line = sys.stdin.readline()
        if not line:
            out.print("end of input: stopping", highlight=False)
            break
        reply = line.strip().lower()
        if reply not in ANSWERS:
            out.print("please answer yes, no or don't know", highlight=False)
            continue
        consultant.answer(state, question.concept, ANSWERS[reply])  # type: ignore[arg-type]
        asked += 1
    return method.answer_state(case, state, consultant)


def _print_differential(differential) -> None:
    table = Table("diagnosis", "probability", title="differential", title_justify="left")
    for diagnosis in differential:
        table.add_row(diagnosis.name, f"{diagnosis.probability:.0%}")
    out.print(table)


def _print_answer(answer: Answer, language: str = "en") -> None:
    from clinrag.consult.answer.compose import numbered, reference, templates
    from clinrag.consult.answer.report import Sentence

    details = answer.details
    if answer.error:
        out.print(f"[bold yellow]{answer.error}[/]", soft_wrap=True)
    findings = Table("finding", "status", "as written", title="findings", title_justify="left")
    for finding in details.get("findings", []):
        findings.add_row(finding["name"], finding["status"], finding["text"])
    out.print(findings)
    if details.get("not_understood"):
        out.print("not understood: " + "; ".join(details["not_understood"]), markup=False, highlight=False)
    differential = Table(
        "diagnosis", "probability", "ICD-10", "supported by", title="differential", title_justify="left"
    )
    for diagnosis in details.get("differential", [])[:5]:
        differential.add_row(
            diagnosis["name"],
            f"{diagnosis['probability']:.0%}",
            diagnosis["icd10"] or "",
            ", ".join(diagnosis["supporting"]),
        )
    out.print(differential)
    for question in details.get("questions", []):
        out.print(f"- {question['text']}", markup=False, highlight=False)
    out.print("[bold]Answer[/]")
    # numbered references for a reader; the evidence ids stay in --json and the API
    text, cited = numbered([Sentence.model_validate(sentence) for sentence in details.get("sentences", [])])
    out.print(text, soft_wrap=True, highlight=False, markup=False)
    if cited:
        by_id = {item.id: item for item in answer.evidence}
        out.print(f"[bold]{templates(language)['references']}[/]")
        for number, item_id in enumerate(cited, 1):
            line = reference(by_id[item_id], language) if item_id in by_id else item_id  # type: ignore[arg-type]
            out.print(f"[{number}] {line}", soft_wrap=True, highlight=False, markup=False)
    for sentence in details.get("sentences", []):
        if sentence.get("unsupported"):
            reasons = "; ".join(sentence["unsupported"])
            out.print(f"flagged: {sentence['text']} ({reasons})", markup=False, highlight=False)
    if details.get("dropped"):
        out.print(
            f"{len(details['dropped'])} sentence(s) of the model dropped: the evidence does not support them",
            highlight=False,
        )
