"""Task prompts in English, Chinese and French, and the parsers that read a structured result out of a reply.

Every knowledge-and-experience method renders its final question through `task_prompt(case)`: the retrieved
context (already formatted by the method, with evidence ids), the patient, the question, the options and the
reply format, then parses the reply with the same object. The English diagnosis prompt follows DoctorRAG
(arXiv 2505.19538, appendix D.1: predict the most likely disease, choosing from the valid options only); the
French and Chinese diagnosis prompts follow the authors' own French (DDXPlus-FR) and Chinese (DialMed)
versions. The other templates are ours, written to the same pattern.

Parsers never fall back to a default: a reply that names no valid option raises `AnswerParseError` carrying
the raw reply.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

import json_repair

from clinrag.core.errors import AnswerParseError, InvalidInputError
from clinrag.core.models import Case, Language, RankedDiagnosis, StructuredResult, TaskKind
from clinrag.tasks.multiple_choice import parse_choice
from clinrag.tasks.render import options_block

DDX_SIZE = 10
_WITH_OPTIONS: frozenset[str] = frozenset(
    {"diagnosis", "ddx", "multiple_choice", "multi_select", "treatment"}
)


@dataclass(frozen=True)
class ParsedReply:
    """A parsed reply: the structured result, the cleaned reply text, and the reply items that named no
    option (dropped, kept so a method can record how much of the reply was unusable)."""

    result: StructuredResult
    text: str
    dropped: list[str] = field(default_factory=list)


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
            top = _Matcher(case.options).exact(ddx[0].name)
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


# --- reply parsing ------------------------------------------------------------------------------------------

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"^```[\w-]*\s*\n?(.*?)\n?```$", re.DOTALL)


def clean_reply(text: str) -> str:
    """The reply without reasoning blocks, code fences around it, or surrounding whitespace."""
    cleaned = _THINK.sub("", text).strip()
    fenced = _FENCE.match(cleaned)
    if fenced:
        cleaned = fenced.group(1).strip()
    return re.sub(r"\n{3,}", "\n\n", cleaned)


def _norm(text: str) -> str:
    # NFKC folds full-width forms ("Ａ", "：", "，") to ASCII, so Chinese replies match ASCII keys.
    return " ".join(unicodedata.normalize("NFKC", text).split()).casefold()


def _named_options(options: dict[str, str]) -> bool:
    return bool(options) and all(key == text for key, text in options.items())


def _require_options(case: Case, task: str, *, texts: bool = False) -> list[str]:
    if not case.options:
        raise InvalidInputError(f"case {case.id}: a {task} schema needs options")
    return list(case.options.values()) if texts else list(case.options)


def _object_schema(name: str, prop: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": {name: prop}, "required": [name], "additionalProperties": False}


class _Matcher:
    """Maps reply fragments to option keys: by key or option text, exactly or after normalisation."""

    def __init__(self, options: dict[str, str]) -> None:
        self.options = options
        self.by_norm: dict[str, str] = {}
        for key, text in options.items():
            self.by_norm.setdefault(_norm(text), key)
        for key in options:
            self.by_norm.setdefault(_norm(key), key)
        # Surfaces tried at a position, longest first so "Unstable angina" wins over "Stable angina".
        surfaces = {(key, key) for key in options} | {(text, key) for key, text in options.items()}
        self.surfaces = sorted(surfaces, key=lambda pair: -len(pair[0]))

    def exact(self, item: str) -> str | None:
        item = item.strip()
        if item in self.options:
            return item
        return self.by_norm.get(_norm(item))

    def at(self, text: str, pos: int) -> str | None:
        """The option named at `pos` in `text` (after opening brackets or quotes), or None."""
        pos += len(re.match(r"[\s\"'“”‘’「」『』(\[（【*]*", text[pos:]).group(0))
        for surface, key in self.surfaces:
            candidate = text[pos : pos + len(surface)]
            # Single-letter keys are case-sensitive: in "the answer is a beta-lactam" "a" is not option A.
            same = candidate == surface if len(surface) == 1 else candidate.casefold() == surface.casefold()
            if same and not _continues_word(surface, text, pos + len(surface)):
                return key
        return None

    def mentions(self, text: str) -> list[str]:
        """Keys of option texts mentioned in `text`, in order; a mention inside a longer mention is not
        counted, and single letters are never read as mentions."""
        lowered = unicodedata.normalize("NFKC", text).casefold()
        spans: list[tuple[int, int, str]] = []
        for key, option in self.options.items():
            needle = unicodedata.normalize("NFKC", option).casefold()
            if len(needle) < 2:
                continue
            for found in re.finditer(re.escape(needle), lowered):
                start, end = found.span()
                before = lowered[start - 1] if start else " "
                inside_word = needle[0].isascii() and before.isascii() and before.isalnum()
                if not inside_word and not _continues_word(needle, lowered, end):
                    spans.append((start, end, key))
        kept = [s for s in spans if not any(o[0] <= s[0] and s[1] <= o[1] and o != s for o in spans)]
        return list(dict.fromkeys(key for _, _, key in sorted(kept)))


def _continues_word(surface: str, text: str, end: int) -> bool:
    # Only ASCII words have boundaries worth checking; Chinese text has no spaces between words.
    last, following = surface[-1], text[end] if end < len(text) else " "
    return last.isascii() and last.isalnum() and following.isascii() and following.isalnum()


def _load_json(text: str) -> Any:
    """The reply as JSON when it is meant as JSON (starts with { or [), repaired once; None otherwise."""
    stripped = text.strip()
    if not stripped.startswith(("{", "[")):
        return None
    try:
        return json.loads(stripped)
    except json.JSONDecodeError:
        repaired = json_repair.loads(stripped)
        return repaired if isinstance(repaired, dict | list) and repaired else None


# Phrases after which a reply names its answer, in the three prompt languages.
_MARKER = re.compile(
    r"(?:(?<![A-Za-z])(?:final\s+answer|answer|diagnosis|choice|réponse|diagnostic|choix)"
    r"\s*(?:is|est|:|=)?\s*(?:option\s+|l['’]option\s+)?"
    r"|(?:答案|选项|我选择|选择|应选|我选|最可能的诊断|诊断|预测的疾病|疾病)\s*(?:是|为)?\s*:?\s*(?:选项)?)",
    re.IGNORECASE,
)


def parse_single(text: str, options: dict[str, str], *, raw: str | None = None) -> str:
    """The one option key a reply commits to. Tries: JSON {"answer": …}; a key or option text right after
    an answer phrase ("Answer: B", "答案：Ａ", "选项A", "疾病：急性胃肠炎", "Réponse : C"); `parse_choice`;
    exactly one option text mentioned (a text inside a longer mentioned one does not count)."""
    raw = text if raw is None else raw
    matcher = _Matcher(options)
    loaded = _load_json(text)
    if isinstance(loaded, dict):
        value = next((loaded[k] for k in ("answer", "diagnosis", "disease") if k in loaded), None)
        key = matcher.exact(value) if isinstance(value, str) else None
        if key is None:
            raise AnswerParseError(
                f"the JSON answer {value!r} is not one of the options {list(options)}", raw
            )
        return key

    normalized = unicodedata.normalize("NFKC", text)
    marked = {key for m in _MARKER.finditer(normalized) if (key := matcher.at(normalized, m.end()))}
    if len(marked) == 1:
        return marked.pop()
    try:
        return parse_choice(normalized, options)
    except AnswerParseError:
        pass
    mentioned = matcher.mentions(normalized)
    if len(mentioned) == 1:
        return mentioned[0]
    raise AnswerParseError(f"the answer does not commit to exactly one of the options {list(options)}", raw)


_ENUMERATOR = re.compile(r"^\s*(?:\(?\d{1,2}\s*[.)、:：]|\(\d{1,2}\)|[-*•·])\s*")
_PROBABILITY = re.compile(r"[\s:：,，\-–—(（\[]*(\d{1,3}(?:\.\d+)?)\s*([%％])?\s*[)）\]]?\s*$")
_PAREN_TAIL = re.compile(r"\s*[(（][^()（）]*[)）]\s*$")
_ITEM_SPLIT = re.compile(r"[,;，；、]")


def _strip_item(item: str) -> str:
    item = _ENUMERATOR.sub("", item).strip()
    return item.strip("*_`\"'“”‘’「」 ").rstrip(".。").strip()


def _variants(item: str) -> list[str]:
    """The item, then the item without a trailing probability or parenthetical, then without a label
    ("Diagnosis: …"): names such as "HIV (initial infection)" match before their brackets are stripped."""
    variants = [item]
    bare = _PROBABILITY.sub("", item)
    bare = _PAREN_TAIL.sub("", bare).strip()
    variants.append(bare)
    for candidate in (item, bare):
        if re.search(r"[:：]", candidate):
            variants.append(re.split(r"[:：]", candidate)[-1].strip())
    return [_strip_item(v) for v in variants if v.strip()]


def _probability(item: str) -> float | None:
    found = _PROBABILITY.search(item)
    if not found:
        return None
    value = float(found.group(1))
    if found.group(2):
        return value / 100 if value <= 100 else None
    return value if "." in found.group(1) and value <= 1 else None


def _items(text: str, matcher: _Matcher) -> list[str]:
    """Reply items: one per line of a list, or the comma-/semicolon-/、-separated parts of a single line
    (unless the line is itself an option: some names contain commas)."""
    lines = [_strip_item(line) for line in text.splitlines()]
    lines = [line for line in lines if line]
    if len(lines) == 1 and matcher.exact(lines[0]) is None:
        return [part for part in (_strip_item(p) for p in _ITEM_SPLIT.split(lines[0])) if part]
    return lines


def _json_items(loaded: Any, names: tuple[str, ...]) -> list[Any] | None:
    if isinstance(loaded, list):
        return loaded
    if isinstance(loaded, dict):
        for name in names:
            value = loaded.get(name)
            if isinstance(value, list):
                return value
            if isinstance(value, str):
                return [value]
    return None


def parse_ddx(
    text: str, options: dict[str, str], *, raw: str | None = None
) -> tuple[list[RankedDiagnosis], list[str]]:
    """A ranked differential of up to 10 option texts from JSON ({"diagnoses": [...]} or a list, items
    strings or {"name", "probability"}) or from a numbered / comma-separated list. Each item must name an
    option exactly or case-insensitively (a trailing probability or parenthetical is allowed); other items
    are dropped and returned. Order is kept; repeats are ignored. No valid item raises `AnswerParseError`."""
    raw = text if raw is None else raw
    matcher = _Matcher(options)
    loaded = _json_items(_load_json(text), ("diagnoses", "ddx", "differential", "answers"))
    pairs: list[tuple[str, float | None]] = []
    if loaded is not None:
        for entry in loaded:
            if isinstance(entry, dict):
                name = entry.get("name") or entry.get("diagnosis") or entry.get("disease")
                prob = entry.get("probability")
                pairs.append((str(name or ""), float(prob) if isinstance(prob, int | float) else None))
            else:
                pairs.append((str(entry), None))
    else:
        pairs = [(item, _probability(item)) for item in _items(text, matcher)]

    ranked: dict[str, RankedDiagnosis] = {}
    dropped: list[str] = []
    for item, prob in pairs:
        key = next((k for v in _variants(item) if (k := matcher.exact(v))), None)
        if key is None:
            dropped.append(item)
        elif key not in ranked and len(ranked) < DDX_SIZE:
            valid = prob if prob is not None and 0.0 <= prob <= 1.0 else None
            ranked[key] = RankedDiagnosis(name=options[key], probability=valid)
    if not ranked:
        raise AnswerParseError(f"no item of the differential names one of the {len(options)} options", raw)
    return list(ranked.values()), dropped


_CONJUNCTION = re.compile(r"\s+(?:and|et|&)\s+|和|及|与|以及", re.IGNORECASE)


def parse_selection(
    text: str, options: dict[str, str], *, raw: str | None = None
) -> tuple[list[str], list[str]]:
    """The option keys a multi-select or treatment reply chooses, in order, and the items that named no
    option. Reads JSON ({"answers": [...]} or a list) or a list delimited by "、", "，", ",", ";" or
    newlines; an item that is not an option itself is split on "and" / "和", then searched for option texts
    it mentions ("建议加用蒙脱石" → 蒙脱石). No valid item raises `AnswerParseError`."""
    raw = text if raw is None else raw
    matcher = _Matcher(options)
    loaded = _json_items(_load_json(text), ("answers", "answer", "drugs", "choices"))
    if loaded is not None:
        items = [str(entry) for entry in loaded]
    else:
        # Every delimiter splits, whether the list is one line or many, except in a line that is an option.
        lines = [_strip_item(line) for line in text.splitlines()]
        items = [p for line in lines for p in ([line] if matcher.exact(line) else _ITEM_SPLIT.split(line))]
    chosen: list[str] = []
    dropped: list[str] = []
    for item in (i for i in (_strip_item(x) for x in items) if i):
        keys = _select_item(item, matcher)
        if keys:
            chosen.extend(k for k in keys if k not in chosen)
        else:
            dropped.append(item)
    if not chosen:
        raise AnswerParseError(f"the reply selects none of the {len(options)} options", raw)
    return chosen, dropped


def _select_item(item: str, matcher: _Matcher) -> list[str]:
    key = next((k for v in _variants(item) if (k := matcher.exact(v))), None)
    if key is not None:
        return [key]
    keys: list[str] = []
    for part in (p for p in (_strip_item(x) for x in _CONJUNCTION.split(item)) if p):
        exact = next((k for v in _variants(part) if (k := matcher.exact(v))), None)
        keys.extend([exact] if exact else matcher.mentions(part))
    return list(dict.fromkeys(keys))


# --- citations ----------------------------------------------------------------------------------------------

_BRACKETS = re.compile(r"\[([^\[\]\n]{1,300})\]")
_EVIDENCE_ID = re.compile(r"^[A-Za-z][\w.\-]*:\S+$")


def cited_ids(text: str) -> list[str]:
    """Evidence ids cited in square brackets ("[kb:12]", "[ddxplus:12, kb:3]"), in order of first citation,
    each once. Bracketed text that is not a `source:id` (e.g. "[MASK]", "[1]") is ignored."""
    found: list[str] = []
    for group in _BRACKETS.finditer(text):
        for part in re.split(r"[,;，；]", group.group(1)):
            candidate = part.strip()
            if _EVIDENCE_ID.match(candidate) and candidate not in found:
                found.append(candidate)
    return found
