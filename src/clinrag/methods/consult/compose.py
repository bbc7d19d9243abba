"""The answer composed from the consultation's structure by templates (English, French, Chinese): every
sentence says only what the structure holds and carries the ids of the evidence it rests on; the one sentence
of advice ("see a doctor") rests on no evidence and says so by its kind. No model writes any of it."""

from __future__ import annotations

from clinrag.core.models import Language
from clinrag.methods.consult.report import ConsultationReport, DiagnosisOut, FindingOut, NextStep, Sentence
from clinrag.methods.consult.statements import quote

SHOWN_DIAGNOSES = 3
SHOWN_STEPS = 4  # per kind and diagnosis

TEMPLATES: dict[str, dict[str, str]] = {
    "en": {
        "present": "You report {items}.",
        "present_for": "You report {items}, {duration}.",
        "for": "for {duration}",
        "absent": "You do not report {items}.",
        "uncertain": "You are not sure about {items}.",
        "contradiction": "You both report and deny {items} ({quotes}); this is counted as uncertain.",
        "quote": "“{text}”",
        "differential": "From the disease knowledge, these findings fit best with {ranked}.",
        "statement": "The knowledge base says about {name}: “{text}”",
        "support": "{name} is suggested by {supporting}.",
        "support_missing": "{name} is suggested by {supporting}; {missing} would also be typical of it but "
        "{verb} not mentioned.",
        "against": "{against} would be expected with {name} but {verb} denied.",
        "questions": "To tell these apart, it would help to know: {questions}",
        "question": "Do you have {finding}?",
        "tests": "Tests used for {name}: {items}.",
        "drugs": "Medicines used for {name} include {items}; only a doctor can decide whether any suits you "
        "and at what dose.",
        "care": "Care used for {name}: {items}.",
        "no_experience": "Similar past patients were not used: no patient base is configured.",
        "experience": "The probabilities also reflect {n} past patients with these diagnoses.",
        "ask_back": "Nothing you describe points to a diagnosis yet; please answer: {questions}",
        "nothing_understood": "I could not recognise a finding in your description{unmatched}. Please "
        "describe your main symptoms, how long you have had them, and your age and sex.",
        "uncertain_top": "The information so far does not point clearly to one diagnosis (the most likely, "
        "{name}, has {p}); the answers to the questions below would help most.",
        "advice": "This is not a diagnosis: please see a doctor, and seek urgent care if your symptoms are "
        "severe or getting worse.",
        "and": " and ",
        "was": "was",
        "were": "were",
    },
    "fr": {
        "present": "Vous signalez : {items}.",
        "present_for": "Vous signalez : {items}, {duration}.",
        "for": "depuis {duration}",
        "absent": "Vous ne signalez pas : {items}.",
        "uncertain": "Vous n'êtes pas sûr(e) de : {items}.",
        "contradiction": "Vous signalez et niez à la fois : {items} ({quotes}) ; c'est donc considéré "
        "comme incertain.",
        "quote": "« {text} »",
        "differential": "D'après les connaissances sur les maladies, ces signes correspondent le mieux à "
        "{ranked}.",
        "statement": "La base de connaissances dit de {name} : « {text} »",
        "support": "{name} est évoqué(e) par : {supporting}.",
        "support_missing": "{name} est évoqué(e) par : {supporting} ; {missing} serai(en)t aussi "
        "typique(s), mais n'{verb} pas mentionné(s).",
        "against": "{against} serai(en)t attendu(s) avec {name}, mais {verb} absent(s).",
        "questions": "Pour les départager, il serait utile de savoir : {questions}",
        "question": "Avez-vous : {finding} ?",
        "tests": "Examens utilisés pour {name} : {items}.",
        "drugs": "Médicaments utilisés pour {name} : {items} ; seul un médecin peut décider si l'un d'eux "
        "vous convient et à quelle dose.",
        "care": "Soins utilisés pour {name} : {items}.",
        "no_experience": "Les patients similaires n'ont pas été utilisés : aucune base de patients n'est "
        "configurée.",
        "experience": "Les probabilités tiennent aussi compte de {n} patients antérieurs ayant ces "
        "diagnostics.",
        "ask_back": "Rien de ce que vous décrivez n'oriente encore vers un diagnostic ; merci de répondre : "
        "{questions}",
        "nothing_understood": "Je n'ai reconnu aucun signe dans votre description{unmatched}. Décrivez vos "
        "principaux symptômes, depuis quand vous les avez, votre âge et votre sexe.",
        "uncertain_top": "Les informations actuelles n'orientent pas clairement vers un diagnostic (le plus "
        "probable, {name}, a {p}) ; les réponses aux questions ci-dessous aideraient le plus.",
        "advice": "Ceci n'est pas un diagnostic : consultez un médecin, et allez aux urgences si vos "
        "symptômes sont sévères ou s'aggravent.",
        "and": " et ",
        "was": "a été",
        "were": "ont été",
    },
    "zh": {
        "present": "您提到：{items}。",
        "present_for": "您提到：{items}，{duration}。",
        "for": "持续{duration}",
        "absent": "您没有：{items}。",
        "uncertain": "您不确定是否有：{items}。",
        "contradiction": "您既提到又否认{items}（{quotes}），因此视为不确定。",
        "quote": "“{text}”",
        "differential": "根据疾病知识，这些表现最符合{ranked}。",
        "statement": "知识库关于{name}：“{text}”",
        "support": "支持{name}的表现：{supporting}。",
        "support_missing": "支持{name}的表现：{supporting}；{missing}也是其典型表现，但您未提及。",
        "against": "{name}通常会有{against}，但您否认。",
        "questions": "为了进一步鉴别，最好了解：{questions}",
        "question": "您是否有{finding}？",
        "tests": "{name}常用的检查：{items}。",
        "drugs": "{name}常用的药物包括{items}；是否适合您以及剂量，只能由医生决定。",
        "care": "{name}的其他处理：{items}。",
        "no_experience": "未使用相似患者的经验：没有配置患者库。",
        "experience": "这些概率也参考了{n}位有这些诊断的既往患者。",
        "ask_back": "您描述的内容尚不足以指向某个诊断；请回答：{questions}",
        "nothing_understood": "我没能在您的描述中识别出任何症状{unmatched}。"
        "请描述您的主要症状、持续时间，以及年龄和性别。",
        "uncertain_top": "目前的信息还不能明确指向某一诊断（最可能的{name}为{p}）；回答下面的问题最有帮助。",
        "advice": "这不是诊断：请去看医生；如果症状严重或加重，请尽快就医。",
        "and": "和",
        "was": "",
        "were": "",
    },
}


def compose(
    report: ConsultationReport, language: Language, texts: dict[str, str] | None = None
) -> list[Sentence]:
    """The answer's sentences from the report; `texts` gives the evidence's texts by id (the statements
    quoted)."""
    t = TEMPLATES[language]
    sentences = _findings(report, t)
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


def render(sentences: list[Sentence]) -> str:
    """The answer text: each sentence followed by its evidence ids in brackets."""
    parts = []
    for sentence in sentences:
        cited = f" [{', '.join(sentence.evidence)}]" if sentence.evidence else ""
        parts.append(sentence.text + cited)
    return " ".join(parts)


def experience_sentence(patients: int | None, language: Language) -> str:
    t = TEMPLATES[language]
    return t["experience"].format(n=patients) if patients else t["no_experience"]


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
    separator = "、" if t is TEMPLATES["zh"] else ", "
    return separator.join(items[:-1]) + t["and"] + items[-1]
