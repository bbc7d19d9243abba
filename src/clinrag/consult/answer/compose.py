"""The answer composed from the consultation's structure by templates (English, French, Chinese, under
`resources/<language>/templates.json`): the only place a report is put into words. Every sentence says only
what the structure holds and carries the ids of the evidence it rests on; the one sentence
of advice ("see a doctor") rests on no evidence and says so by its kind. No model writes any of it."""

from __future__ import annotations

from collections.abc import Mapping

from clinrag.conditions.catalogue import packaged_catalogue
from clinrag.consult.answer.report import ConsultationReport, DiagnosisOut, FindingOut, NextStep, Sentence
from clinrag.consult.answer.statements import quote
from clinrag.consult.diseases import KNOWLEDGE_LANGUAGE
from clinrag.consult.reason.triage import CrisisOut
from clinrag.consult.understand.rules import load_rules
from clinrag.core.models import Evidence, Language

SHOWN_DIAGNOSES = 3
SHOWN_STEPS = 4  # per kind and diagnosis


def templates(language: str) -> dict[str, str]:
    """The answer's templates in `language` (`resources/<language>/templates.json`, read with its rules)."""
    return load_rules(language).templates


def rendered(
    report: ConsultationReport,
    language: Language,
    texts: dict[str, str],
    names: Mapping[str, str] | None = None,
) -> ConsultationReport:
    """The report with what it says in words filled in, in `language`: the findings' names (`names`: the
    report's name → the name in `language`), the duration, how past patients were used, each question, and
    the answer's sentences (`texts`: the evidence's texts by id)."""
    t = templates(language)
    report = report.model_copy(deep=True)
    if names:
        _name_findings(report, names)
    report.duration = duration_text(report.duration_days, report.duration_written, t)
    report.experience = t["experience"].format(n=report.patients) if report.patients else t["no_experience"]
    # a question is put to whom the account is about: "Do you have …", "Does your child have …"
    ask = t[{"child": "question_child", "other": "question_other"}.get(report.subject or "", "question")]
    for question in report.questions:
        # the knowledge's own wording, in its language, asks "you"
        own = language == KNOWLEDGE_LANGUAGE and report.subject is None
        asked = question.asked if question.asked is not None and own else None
        question.text = asked or ask.format(finding=question.finding)
    report.sentences = compose(report, language, texts)
    return report


def _name_findings(report: ConsultationReport, names: Mapping[str, str]) -> None:
    """Each finding the report names, by its name in the consultation's language where it has one."""
    for finding in report.findings:
        finding.name = names.get(finding.name, finding.name)
    for question in report.questions:
        question.finding = names.get(question.finding, question.finding)
    for flag in report.red_flags:
        flag.finding = names.get(flag.finding, flag.finding)
    for diagnosis in report.differential:
        for listed in (diagnosis.supporting, diagnosis.against, diagnosis.not_reported):
            listed[:] = [names.get(name, name) for name in listed]


def duration_text(days: float | None, written: str | None, t: dict[str, str]) -> str | None:
    """How long: "for 3 days", "for 2 weeks", "for 6 hours" when it was measured, else the phrase as written
    ("since yesterday")."""
    if days is None:
        return written
    if days < 1:
        value, one, many = round(days * 24), t["unit_hour"], t["unit_hours"]
    elif days >= 14 and days % 7 == 0:
        value, one, many = round(days / 7), t["unit_week"], t["unit_weeks"]
    else:
        value, one, many = round(days), t["unit_day"], t["unit_days"]
    return t["for"].format(duration=f"{value}{t['unit_separator']}{one if value == 1 else many}")


def compose(
    report: ConsultationReport, language: Language, texts: dict[str, str] | None = None
) -> list[Sentence]:
    """The answer's sentences from the report; `texts` gives the evidence's texts by id (the statements
    quoted)."""
    t = templates(language)
    sentences = _triage(report, language, t) + _findings(report, t)
    if report.abstained and not report.differential:
        if report.questions:  # what the text both states and denies, asked back
            asked = {q.concept for q in report.questions}
            sentences.append(
                Sentence(
                    text=t["ask_back"].format(questions=" ".join(q.text for q in report.questions)),
                    evidence=[f.evidence for f in report.findings if f.concept in asked],
                    kind="question",
                )
            )
        else:
            unmatched = f" ({'; '.join(report.not_understood)})" if report.not_understood else ""
            sentences.append(
                Sentence(text=t["nothing_understood"].format(unmatched=unmatched), kind="abstention")
            )
        sentences.append(Sentence(text=t["advice"], kind="advice"))
        return sentences
    shown = report.differential[:SHOWN_DIAGNOSES]
    ranked = _join([f"{d.name} ({d.probability:.0%})" for d in shown], t)
    sentences.append(
        Sentence(
            text=t["differential"].format(ranked=ranked),
            evidence=list(dict.fromkeys(e for d in shown for e in d.evidence)),
            kind="differential",
        )
    )
    if report.abstained:
        top = shown[0]
        sentences.append(
            Sentence(
                text=t["uncertain_top"].format(name=top.name, p=f"{top.probability:.0%}"),
                evidence=top.evidence,
                kind="abstention",
            )
        )
    for diagnosis in shown[:1]:
        sentences += _support(diagnosis, t)
    for diagnosis in shown:
        sentences += _statements(diagnosis, texts or {}, t)
    if report.questions:
        sentences.append(
            Sentence(
                text=t["questions"].format(questions=" ".join(q.text for q in report.questions)),
                evidence=list(dict.fromkeys(e for q in report.questions for e in q.evidence)),
                kind="question",
            )
        )
    for diagnosis in shown:
        sentences += _steps(
            diagnosis.name, [s for s in report.next_steps if s.diagnosis == diagnosis.name], t
        )
    sentences.append(Sentence(text=report.experience, kind="experience"))
    sentences.append(Sentence(text=t["advice"], kind="advice"))
    return sentences


def _triage(report: ConsultationReport, language: Language, t: dict[str, str]) -> list[Sentence]:
    """First, where to go and how soon: a crisis's first words, else the disposition; why (the red flags
    reported, the dangerous diagnoses not to miss with what rules each in or out); when too little was
    understood, that it could not be assessed; then the safety net (what change means seeking help at
    once)."""
    triage = report.triage
    red = [e for flag in report.red_flags for e in flag.evidence]
    raised = list(dict.fromkeys([*red, *(e for danger in report.dangers for e in danger.evidence)]))
    sentences = [
        Sentence(text=t[f"crisis_{advice}"], evidence=[e for c in crises for e in c.evidence], kind="urgency")
        for advice, crises in _by_advice(triage.crises).items()
    ]
    if not triage.crises:
        sentences.append(
            Sentence(text=t[f"disposition_{triage.disposition}"], evidence=raised, kind="urgency")
        )
    sentences += [
        Sentence(
            text=t["red_flag"].format(finding=_capital(flag.finding), why=flag.why),
            evidence=flag.evidence,
            kind="urgency",
        )
        for flag in report.red_flags
    ]
    sentences += [
        Sentence(
            text=t["cant_miss"].format(
                name=danger.name, p=f"{danger.probability:.0%}", rule_out=_join(danger.rule_out, t)
            ),
            evidence=danger.evidence,
            kind="urgency",
        )
        for danger in report.dangers
        if danger.rule_out
    ]
    if not triage.assessed:
        sentences.append(Sentence(text=t["not_assessed"], kind="urgency"))
    named = packaged_catalogue().names_in(language)
    watch = [named[item.label][0] if item.label in named else item.name for item in triage.watch_for]
    if watch:
        cited = list(dict.fromkeys(e for item in triage.watch_for for e in item.evidence))
        sentences.append(
            Sentence(text=t["watch_for"].format(items=_join(watch, t)), evidence=cited, kind="safety_net")
        )
    elif triage.disposition != "emergency":
        sentences.append(Sentence(text=t["watch_for_general"], kind="safety_net"))
    if triage.disposition != "emergency":
        sentences.append(Sentence(text=t[f"safety_net_{triage.disposition}"], kind="safety_net"))
    return sentences


def _by_advice(crises: list[CrisisOut]) -> dict[str, list[CrisisOut]]:
    """The crises by the first words they call for, each said once."""
    grouped: dict[str, list[CrisisOut]] = {}
    for crisis in crises:
        grouped.setdefault(crisis.advice, []).append(crisis)
    return grouped


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _statements(diagnosis: DiagnosisOut, texts: dict[str, str], t: dict[str, str]) -> list[Sentence]:
    """One sentence quoting each statement of the knowledge base about the diagnosis."""
    return [
        Sentence(
            text=t["statement"].format(name=diagnosis.name, text=quote(texts[item])),
            evidence=[item],
            kind="differential",
        )
        for item in diagnosis.statements
    ]


def numbered(sentences: list[Sentence]) -> tuple[str, list[str]]:
    """The answer for a reader: each sentence followed by the numbers of the references it cites ("[1–3, 8]"),
    and the evidence ids cited, in the order of their numbers (numbered where first cited)."""
    numbers: dict[str, int] = {}
    parts = []
    for sentence in sentences:
        cited = sorted({numbers.setdefault(item, len(numbers) + 1) for item in sentence.evidence})
        parts.append(f"{sentence.text} [{_spans(cited)}]" if cited else sentence.text)
    return " ".join(parts), list(numbers)


def _spans(numbers: list[int]) -> str:
    """Ascending numbers as runs: [1, 2, 3, 8] → "1–3, 8"."""
    runs: list[list[int]] = []
    for number in numbers:
        if runs and number == runs[-1][-1] + 1:
            runs[-1].append(number)
        else:
            runs.append([number])
    return ", ".join(f"{run[0]}–{run[-1]}" if len(run) > 1 else str(run[0]) for run in runs)


def reference(item: Evidence, language: Language = "en") -> str:
    """One reference, in words: what the evidence says, and where it comes from — the knowledge source's
    title (`SourceTraits.title`), the patient's own words, or else the evidence's source as recorded."""
    t = templates(language)
    if item.source == "patient":
        where = t["reference_patient"]
    else:
        where = t["reference_source"].format(source=item.provenance.get("title") or item.source)
    return f"{item.text} — {where}"


def render(sentences: list[Sentence]) -> str:
    """The answer text: each sentence followed by its evidence ids in brackets."""
    parts = []
    for sentence in sentences:
        cited = f" [{', '.join(sentence.evidence)}]" if sentence.evidence else ""
        parts.append(sentence.text + cited)
    return " ".join(parts)


def _findings(report: ConsultationReport, t: dict[str, str]) -> list[Sentence]:
    sentences = []
    for status, key in (("present", "present"), ("absent", "absent"), ("uncertain", "uncertain")):
        found = [f for f in report.findings if f.status == status and f.contradiction is None]
        if not found:
            continue
        template = t["present_for"] if status == "present" and report.duration else t[key]
        sentences.append(
            Sentence(
                text=template.format(items=_names(found, t), duration=report.duration),
                evidence=[f.evidence for f in found],
                kind="finding",
            )
        )
    # the findings the text says both ways, one sentence for each set of sentences quoted
    contradicted: dict[tuple[str, ...], list[FindingOut]] = {}
    for finding in report.findings:
        if finding.contradiction is not None:
            said = (*finding.contradiction.stated, *finding.contradiction.denied)
            contradicted.setdefault(tuple(dict.fromkeys(said)), []).append(finding)
    for said, found in contradicted.items():
        quotes = "; ".join(t["quote"].format(text=sentence) for sentence in said)
        sentences.append(
            Sentence(
                text=t["contradiction"].format(items=_names(found, t), quotes=quotes),
                evidence=[f.evidence for f in found],
                kind="finding",
            )
        )
    return sentences


def _names(findings: list[FindingOut], t: dict[str, str]) -> str:
    return _join(
        [f.name.lower() if f.name[:1].isupper() and f.name[1:2].islower() else f.name for f in findings], t
    )


def _support(diagnosis: DiagnosisOut, t: dict[str, str]) -> list[Sentence]:
    sentences = []
    if diagnosis.supporting:
        missing = diagnosis.not_reported[:3]
        template = t["support_missing"] if missing else t["support"]
        sentences.append(
            Sentence(
                text=template.format(
                    name=diagnosis.name,
                    supporting=_join(diagnosis.supporting, t),
                    missing=_join(missing, t),
                    verb=t["were"] if len(missing) > 1 else t["was"],
                ),
                evidence=diagnosis.evidence,
                kind="differential",
            )
        )
    if diagnosis.against:
        sentences.append(
            Sentence(
                text=t["against"].format(
                    against=_join(diagnosis.against, t),
                    name=diagnosis.name,
                    verb=t["were"] if len(diagnosis.against) > 1 else t["was"],
                ),
                evidence=diagnosis.evidence,
                kind="differential",
            )
        )
    return sentences


def _steps(name: str, steps: list[NextStep], t: dict[str, str]) -> list[Sentence]:
    sentences = []
    for kind, key in (("test", "tests"), ("drug", "drugs"), ("care", "care")):
        chosen = [s for s in steps if s.kind == kind][:SHOWN_STEPS]
        if chosen:
            sentences.append(
                Sentence(
                    text=t[key].format(name=name, items=_join([s.name for s in chosen], t)),
                    evidence=[s.evidence for s in chosen],
                    kind="step",
                )
            )
    return sentences


def _join(items: list[str], t: dict[str, str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return t["list_separator"].join(items[:-1]) + t["and"] + items[-1]
