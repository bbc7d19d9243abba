"""Task prompts in English, Chinese and French: one `TaskPrompt` per task kind and language renders a case
(with the retrieved context a method formatted, evidence ids included) and parses the reply with the same
object.

Every method renders its question through `task_prompt(case)`. The English diagnosis prompt follows
DoctorRAG (arXiv 2505.19538, appendix D.1: predict the most likely disease, choosing from the valid options
only); the French and Chinese diagnosis prompts follow the authors' own French (DDXPlus-FR) and Chinese
(DialMed) versions. The other templates are ours, written to the same pattern.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from clinrag.core.errors import AnswerParseError, InvalidInputError
from clinrag.core.models import DDX_SIZE, Case, Language, StructuredResult, TaskKind
from clinrag.tasks.parsing import (
    OptionMatcher,
    ParsedReply,
    clean_reply,
    parse_ddx,
    parse_selection,
    parse_single,
)
from clinrag.tasks.render import options_block

CHOICE_TASKS: tuple[TaskKind, ...] = ("diagnosis", "multiple_choice", "ddx")  # one option, or a ranking
SET_TASKS: tuple[TaskKind, ...] = ("multi_select", "treatment")  # several options
_WITH_OPTIONS: frozenset[str] = frozenset((*CHOICE_TASKS, *SET_TASKS))


@dataclass(frozen=True)
class _Labels:
    context: str
    patient: str
    question: str
    cite: str


_LABELS: dict[str, _Labels] = {
    "en": _Labels(
        context="Reference information (medical knowledge and similar patient cases):",
        patient="Patient information:",
        question="Question: ",
        cite="When a statement relies on the reference information, cite the id of that item in square "
        "brackets, e.g. [kb:12] or [ddxplus:12].",
    ),
    "zh": _Labels(
        context="参考信息（医学知识与相似患者案例）：",
        patient="患者信息：",
        question="问题：",
        cite="如果某一论述依据了参考信息，请在方括号中注明该条目的编号，例如 [kb:12] 或 [ddxplus:12]。",
    ),
    "fr": _Labels(
        context="Informations de référence (connaissances médicales et cas de patients similaires) :",
        patient="Informations sur le patient :",
        question="Question : ",
        cite="Lorsqu'une affirmation s'appuie sur les informations de référence, citez l'identifiant de "
        "l'élément entre crochets, par exemple [kb:12] ou [ddxplus:12].",
    ),
}


@dataclass(frozen=True)
class TaskPrompt:
    """The prompt and parser of one task kind in one language.

    `reply_by_name` is used when options are keyed by their own text (DDXPlus, iCraft-MD, DialMed),
    `reply_by_key` when they are keyed by letters (MedQA); `options_header` introduces the option list.
    """

    task: TaskKind
    language: Language
    system: str
    intro: str
    options_header: str
    reply_by_key: str
    reply_by_name: str

    # --- rendering ----------------------------------------------------------------------------------------

    def render(self, case: Case, context: str | None = None) -> str:
        """The user prompt: intro, retrieved context (if any), patient, question, options, reply format."""
        if self.task in _WITH_OPTIONS and not case.options:
            raise InvalidInputError(f"case {case.id}: a {self.task} prompt needs options")
        labels = _LABELS[self.language]
        parts = [self.intro]
        if context and context.strip():
            parts.append(f"{labels.context}\n{context.strip()}")
        if case.patient is not None and case.patient.initial_presentation.strip():
            parts.append(f"{labels.patient}\n{case.patient.initial_presentation.strip()}")
        parts.append(f"{labels.question}{case.question.strip()}")
        named = _named_options(case.options)
        if self.task in _WITH_OPTIONS:
            # Options keyed by their own text are listed once, not as "Pneumonia. Pneumonia".
            listing = (
                "\n".join(f"- {text}" for text in case.options.values())
                if named
                else options_block(case.options)
            )
            parts.append(f"{self.options_header}\n{listing}")
        reply = self.reply_by_name if named else self.reply_by_key
        if self.task == "free_text" and context and context.strip():
            # Citations only make sense when there is labelled context to cite.
            reply = f"{reply} {labels.cite}"
        parts.append(reply)
        return "\n\n".join(parts)

    def json_schema(self, case: Case) -> dict[str, Any] | None:
        """The JSON schema a method may send with the request (a server's response_format, the embedded
        model's grammar) for tasks best answered as constrained JSON; None for the others."""
        if self.task in ("multi_select", "treatment"):
            keys = _require_options(case, self.task)
            items = {"type": "string", "enum": keys}
            answers = {"type": "array", "items": items, "minItems": 1, "maxItems": len(keys)}
            return _object_schema("answers", answers)
        if self.task == "ddx":
            texts = list(dict.fromkeys(_require_options(case, self.task, texts=True)))
            items = {"type": "string", "enum": texts}
            size = min(DDX_SIZE, len(texts))
            return _object_schema(
                "diagnoses", {"type": "array", "items": items, "minItems": 1, "maxItems": size}
            )
        return None

    # --- parsing ------------------------------------------------------------------------------------------

    def parse(self, text: str, case: Case) -> StructuredResult:
        """The structured result of a reply (empty for free text: see `parse_reply().text`)."""
        return self.parse_reply(text, case).result

    def parse_reply(self, text: str, case: Case) -> ParsedReply:
        cleaned = clean_reply(text)
        if self.task == "free_text":
            if not cleaned:
                raise AnswerParseError("the reply is empty", text)
            return ParsedReply(StructuredResult(), cleaned)
        if self.task in _WITH_OPTIONS and not case.options:
            raise InvalidInputError(f"case {case.id}: a {self.task} reply cannot be parsed without options")
        if self.task == "ddx":
            ddx, dropped = parse_ddx(cleaned, case.options, raw=text)
            top = OptionMatcher(case.options).exact(ddx[0].name)
            return ParsedReply(StructuredResult(choice=top, ddx=ddx), cleaned, dropped)
        if self.task in ("multi_select", "treatment"):
            choices, dropped = parse_selection(cleaned, case.options, raw=text)
            return ParsedReply(StructuredResult(choices=choices), cleaned, dropped)
        return ParsedReply(StructuredResult(choice=parse_single(cleaned, case.options, raw=text)), cleaned)


# --- templates ----------------------------------------------------------------------------------------------

_ANSWERS_JSON_KEYS = '{"answers": [<option letters>]}'
_PROMPTS: dict[tuple[str, str], TaskPrompt] = {}


def _add(task: TaskKind, language: Language, **texts: str) -> None:
    _PROMPTS[(task, language)] = TaskPrompt(task=task, language=language, **texts)


# English. Diagnosis: DoctorRAG D.1 wording.
_add(
    "diagnosis",
    "en",
    system="You are a medical diagnostic expert. Answer with just the disease name.",
    intro="As a medical diagnostic expert, predict the most likely disease for this patient.",
    options_header="Based on the above information, determine the most likely disease from the following "
    "options only:",
    reply_by_key="Return only the letter of the chosen option without any additional text.",
    reply_by_name="Return only the name of the disease without any additional text.",
)
_add(
    "multiple_choice",
    "en",
    system="You are a medical expert answering examination questions.",
    intro="Answer the following multiple-choice medical question.",
    options_header="Options:",
    reply_by_key="Reply with the letter of the single best option.",
    reply_by_name="Reply with the single best option, copied exactly as written above.",
)
_add(
    "ddx",
    "en",
    system="You are a medical diagnostic expert. Answer in JSON.",
    intro="As a medical diagnostic expert, give the differential diagnosis for this patient: the most likely "
    "diseases, ranked from most to least likely.",
    options_header="Choose from the following options only:",
    reply_by_key='Reply in JSON as {"diagnoses": [<up to 10 disease names, most likely first>]}, copying '
    "each name exactly as written above.",
    reply_by_name='Reply in JSON as {"diagnoses": [<up to 10 disease names, most likely first>]}, copying '
    "each name exactly as written above.",
)
_add(
    "multi_select",
    "en",
    system="You are a medical expert answering examination questions. Answer in JSON.",
    intro="Answer the following medical question; more than one option may be correct.",
    options_header="Options:",
    reply_by_key=f"Select every option that applies. Reply in JSON as {_ANSWERS_JSON_KEYS}.",
    reply_by_name='Select every option that applies. Reply in JSON as {"answers": [<options>]}, copying '
    "each option exactly as written above.",
)
_add(
    "treatment",
    "en",
    system="You are a physician deciding on medication. Answer in JSON.",
    intro="As a physician, recommend the drugs this patient should receive, based on the information below.",
    options_header="Choose from the following drugs only:",
    reply_by_key=f"Select every drug you recommend. Reply in JSON as {_ANSWERS_JSON_KEYS}.",
    reply_by_name='Reply in JSON as {"answers": [<drug names>]}, copying each drug name exactly as written '
    "above.",
)
_add(
    "free_text",
    "en",
    system="You are a careful, experienced physician.",
    intro="As a physician, answer the patient's question.",
    options_header="",
    reply_by_key="Answer as a careful physician, briefly.",
    reply_by_name="Answer as a careful physician, briefly.",
)

# Chinese. Diagnosis: the DoctorRAG authors' DialMed prompt (list the disease name in a fixed format).
_add(
    "diagnosis",
    "zh",
    system="你是一名医疗诊断专家。只回答疾病名称。",
    intro="作为医疗助手，请根据以下患者对话和相关信息，预测可能的疾病。",
    options_header="你的预测必须从以下预定义的疾病列表中选择：",
    reply_by_key="注意：只需给出所选选项的字母，不需要解释理由。格式如下：\n答案：字母",
    reply_by_name="注意：只需列出疾病名称，不需要解释理由。格式如下：\n疾病：疾病名称",
)
_add(
    "multiple_choice",
    "zh",
    system="你是一名解答医学考试题的医学专家。",
    intro="请回答下面的医学单项选择题。",
    options_header="选项：",
    reply_by_key="请只回答最佳选项的字母，格式如下：\n答案：字母",
    reply_by_name="请只回答最佳选项，照上面原样抄写，格式如下：\n答案：选项内容",
)
_add(
    "ddx",
    "zh",
    system="你是一名医疗诊断专家。请用JSON回答。",
    intro="作为医疗诊断专家，请给出该患者的鉴别诊断：列出最可能的疾病，按可能性从高到低排序。",
    options_header="只能从以下疾病中选择：",
    reply_by_key='请以JSON格式回答：{"diagnoses": [<最多10个疾病名称，最可能的排在最前>]}，'
    "疾病名称须与上面列出的完全一致。",
    reply_by_name='请以JSON格式回答：{"diagnoses": [<最多10个疾病名称，最可能的排在最前>]}，'
    "疾病名称须与上面列出的完全一致。",
)
_add(
    "multi_select",
    "zh",
    system="你是一名解答医学考试题的医学专家。请用JSON回答。",
    intro="请回答下面的医学多项选择题，正确选项可能不止一个。",
    options_header="选项：",
    reply_by_key='请选出所有符合的选项，以JSON格式回答：{"answers": [<选项字母>]}',
    reply_by_name='请选出所有符合的选项，以JSON格式回答：{"answers": [<选项内容>]}，'
    "选项内容须与上面列出的完全一致。",
)
_add(
    "treatment",
    "zh",
    system="你是一名负责开具药物的临床医生。请用JSON回答。",
    intro="作为医生，请根据以下患者对话和相关信息，推荐该患者应使用的药物（可多选）。",
    options_header="只能从以下药物中选择：",
    reply_by_key='请选出所有推荐的药物，以JSON格式回答：{"answers": [<选项字母>]}',
    reply_by_name='请以JSON格式回答：{"answers": [<药物名称>]}，药物名称须与上面列出的完全一致。',
)
_add(
    "free_text",
    "zh",
    system="你是一名认真负责、经验丰富的医生。",
    intro="作为医生，请回答患者的问题。",
    options_header="",
    reply_by_key="请以医生的身份简明作答。",
    reply_by_name="请以医生的身份简明作答。",
)

# French. Diagnosis: the DoctorRAG authors' DDXPlus-FR prompt.
_add(
    "diagnosis",
    "fr",
    system="Vous êtes un expert en diagnostic médical. Répondez uniquement avec le nom de la maladie.",
    intro="En tant qu'expert en diagnostic médical, prédisez la maladie la plus probable pour ce patient.",
    options_header="Sur la base des informations ci-dessus, déterminez la maladie la plus probable parmi les "
    "options suivantes uniquement :",
    reply_by_key="Retournez uniquement la lettre de l'option choisie sans aucun texte supplémentaire.",
    reply_by_name="Retournez uniquement le nom de la maladie sans aucun texte supplémentaire.",
)
_add(
    "multiple_choice",
    "fr",
    system="Vous êtes un expert médical qui répond à des questions d'examen.",
    intro="Répondez à la question médicale à choix multiple suivante.",
    options_header="Options :",
    reply_by_key="Répondez par la lettre de la meilleure option.",
    reply_by_name="Répondez par la meilleure option, recopiée exactement telle qu'elle est écrite ci-dessus.",
)
_add(
    "ddx",
    "fr",
    system="Vous êtes un expert en diagnostic médical. Répondez en JSON.",
    intro="En tant qu'expert en diagnostic médical, établissez le diagnostic différentiel de ce patient : "
    "les maladies les plus probables, classées de la plus probable à la moins probable.",
    options_header="Choisissez uniquement parmi les options suivantes :",
    reply_by_key='Répondez en JSON sous la forme {"diagnoses": [<jusqu\'à 10 noms de maladies, la plus '
    "probable en premier>]}, en recopiant chaque nom exactement tel qu'il est écrit ci-dessus.",
    reply_by_name='Répondez en JSON sous la forme {"diagnoses": [<jusqu\'à 10 noms de maladies, la plus '
    "probable en premier>]}, en recopiant chaque nom exactement tel qu'il est écrit ci-dessus.",
)
_add(
    "multi_select",
    "fr",
    system="Vous êtes un expert médical qui répond à des questions d'examen. Répondez en JSON.",
    intro="Répondez à la question médicale suivante ; plusieurs options peuvent être correctes.",
    options_header="Options :",
    reply_by_key="Sélectionnez toutes les options qui s'appliquent. Répondez en JSON sous la forme "
    '{"answers": [<lettres des options>]}.',
    reply_by_name="Sélectionnez toutes les options qui s'appliquent. Répondez en JSON sous la forme "
    '{"answers": [<options>]}, en recopiant chaque option exactement telle qu\'elle est écrite ci-dessus.',
)
_add(
    "treatment",
    "fr",
    system="Vous êtes un médecin qui décide d'un traitement médicamenteux. Répondez en JSON.",
    intro="En tant que médecin, recommandez les médicaments que ce patient devrait recevoir, d'après les "
    "informations ci-dessous.",
    options_header="Choisissez uniquement parmi les médicaments suivants :",
    reply_by_key="Sélectionnez tous les médicaments recommandés. Répondez en JSON sous la forme "
    '{"answers": [<lettres des options>]}.',
    reply_by_name='Répondez en JSON sous la forme {"answers": [<noms des médicaments>]}, en recopiant chaque '
    "nom exactement tel qu'il est écrit ci-dessus.",
)
_add(
    "free_text",
    "fr",
    system="Vous êtes un médecin attentif et expérimenté.",
    intro="En tant que médecin, répondez à la question du patient.",
    options_header="",
    reply_by_key="Répondez en médecin attentif, brièvement.",
    reply_by_name="Répondez en médecin attentif, brièvement.",
)


def task_prompt(case: Case) -> TaskPrompt:
    """The prompt for the case's task kind in the case's language."""
    return get_task_prompt(case.task, case.language)


def get_task_prompt(task: TaskKind, language: Language) -> TaskPrompt:
    try:
        return _PROMPTS[(task, language)]
    except KeyError:
        raise InvalidInputError(f"no prompt for task {task!r} in language {language!r}") from None


def _named_options(options: dict[str, str]) -> bool:
    return bool(options) and all(key == text for key, text in options.items())


def _require_options(case: Case, task: str, *, texts: bool = False) -> list[str]:
    if not case.options:
        raise InvalidInputError(f"case {case.id}: a {task} schema needs options")
    return list(case.options.values()) if texts else list(case.options)


def _object_schema(name: str, prop: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": {name: prop}, "required": [name], "additionalProperties": False}
