"""Task prompts and reply parsers, on cases built from the real data files (MedQA, iCraft-MD, DDXPlus,
DialMed) and on hand-written replies in the three languages."""

from __future__ import annotations

import ast
import csv
import json
from pathlib import Path

import pytest

from clinrag.core.errors import AnswerParseError, InvalidInputError
from clinrag.core.models import DDX_SIZE, Case, PatientProfile
from clinrag.llm.base import ChatRequest
from clinrag.tasks.citations import cited_ids
from clinrag.tasks.parsing import parse_ddx, parse_selection
from clinrag.tasks.templates import _PROMPTS, get_task_prompt, task_prompt

TASKS = ("diagnosis", "ddx", "multiple_choice", "multi_select", "treatment", "free_text")
LANGUAGES = ("en", "zh", "fr")


# --- real cases ---------------------------------------------------------------------------------------------


def _jsonl(path: Path, limit: int | None = None) -> list[dict]:
    rows = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                rows.append(json.loads(line))
            if limit and len(rows) >= limit:
                break
    return rows


class Data:
    """What the tests need from the real files, read once."""

    def __init__(self, root: Path) -> None:
        self.medqa = _jsonl(root / "medqa" / "us_4options_test.jsonl")
        self.icraft = _jsonl(root / "icraft_md" / "craft_md.jsonl", 1)[0]
        conditions = json.loads((root / "ddxplus" / "release_conditions.json").read_text(encoding="utf-8"))
        self.conditions_en = [c["cond-name-eng"] for c in conditions.values()]
        self.conditions_fr = [c["cond-name-fr"] for c in conditions.values()]
        self.fr_by_en = {c["cond-name-eng"]: c["cond-name-fr"] for c in conditions.values()}
        self.evidences = json.loads((root / "ddxplus" / "release_evidences.json").read_text(encoding="utf-8"))
        with (root / "ddxplus" / "test_patients_mini.csv").open(encoding="utf-8") as handle:
            self.ddx_patient = next(csv.DictReader(handle))
        self.dialmed = _jsonl(root / "dialmed" / "test.txt", 5)[0]
        diseases: set[str] = set()
        for split in ("test", "dev"):
            for row in _jsonl(root / "dialmed" / f"{split}.txt"):
                diseases.update(row["disease"])
        self.diseases = sorted(diseases)
        labels = json.loads((root / "dialmed" / "label.json").read_text(encoding="utf-8"))
        self.drugs = sorted(labels, key=labels.__getitem__)

    def ddx_presentation(self, language: str) -> str:
        """The DDXPlus patient's yes/no evidences, as the questions the patient answered yes to."""
        row = self.ddx_patient
        codes = [c for c in ast.literal_eval(row["features"]) if "_@_" not in c]
        asked = [self.evidences[c][f"question_{language}"] for c in codes if c in self.evidences]
        intro = (
            f"{row['age']} ans, sexe {row['sex']}."
            if language == "fr"
            else f"Age {row['age']}, {row['sex']}."
        )
        yes = "Oui." if language == "fr" else "Yes."
        return " ".join([intro, *(f"{q} {yes}" for q in asked)])

    @property
    def pharmacotherapy(self) -> dict:
        return next(r for r in self.medqa if "most appropriate pharmacotherapy" in r["question"])


@pytest.fixture(scope="module")
def data(data_dir) -> Data:
    return Data(data_dir)


def _lettered(names: list[str]) -> dict[str, str]:
    return dict(zip("ABCD", names, strict=False))


def build_case(data: Data, task: str, language: str) -> Case:
    """A case of `task` in `language`, from the real files (questions for fr/zh cases are ours)."""
    named = lambda names: {n: n for n in names}  # noqa: E731
    if language == "en":
        icraft, medqa = data.icraft, data.medqa[0]
        by_task = {
            "diagnosis": (icraft["context"][0], icraft["question"], named(icraft["options"].values())),
            "ddx": (
                data.ddx_presentation("en"),
                "Give the differential diagnosis.",
                named(data.conditions_en),
            ),
            "multiple_choice": (None, medqa["question"], medqa["options"]),
            "multi_select": (None, medqa["question"], medqa["options"]),
            "treatment": (None, data.pharmacotherapy["question"], data.pharmacotherapy["options"]),
            "free_text": (" ".join(icraft["context"]), "What should the parents be told?", {}),
        }
    elif language == "zh":
        dialog = "\n".join(data.dialmed["dialog"])
        gold = data.dialmed["disease"][0]
        four = [gold, *[d for d in data.diseases if d != gold][:3]]
        by_task = {
            "diagnosis": (dialog, "患者最可能的诊断是什么？", named(data.diseases)),
            "ddx": (dialog, "请给出鉴别诊断。", named(data.diseases)),
            "multiple_choice": (dialog, "患者最可能的诊断是什么？", _lettered(four)),
            "multi_select": (dialog, "以下哪些药物适合该患者？", named(data.drugs)),
            "treatment": (dialog, "医生应当推荐哪些药物？", named(data.drugs)),
            "free_text": (dialog, "患者接下来应该怎么做？", {}),
        }
    else:
        presentation = data.ddx_presentation("fr")
        gold = data.fr_by_en[data.ddx_patient["diagnosis"]]
        four = [gold, *[c for c in data.conditions_fr if c != gold][:3]]
        by_task = {
            "diagnosis": (
                presentation,
                "Quel est le diagnostic le plus probable ?",
                named(data.conditions_fr),
            ),
            "ddx": (presentation, "Établissez le diagnostic différentiel.", named(data.conditions_fr)),
            "multiple_choice": (presentation, "Quel est le diagnostic le plus probable ?", _lettered(four)),
            "multi_select": (
                presentation,
                "Quelles pathologies faut-il envisager ?",
                named(data.conditions_fr),
            ),
            "treatment": (None, "Quel traitement faut-il prescrire ?", data.pharmacotherapy["options"]),
            "free_text": (presentation, "Que faut-il conseiller au patient ?", {}),
        }
    presentation, question, options = by_task[task]
    patient = PatientProfile(initial_presentation=presentation) if presentation else None
    return Case(
        id=f"{language}-{task}",
        language=language,
        task=task,
        question=question,
        patient=patient,
        options=options,
    )


# --- rendering ----------------------------------------------------------------------------------------------


def test_there_is_a_prompt_for_every_task_and_language():
    assert set(_PROMPTS) == {(t, lang) for t in TASKS for lang in LANGUAGES}
    # Each language has its own wording: no template is shared between languages.
    for task in TASKS:
        intros = {get_task_prompt(task, lang).intro for lang in LANGUAGES}
        assert len(intros) == 3


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("task", TASKS)
def test_prompt_shows_the_case_its_options_and_the_reply_format(data, task, language):
    case = build_case(data, task, language)
    prompt = task_prompt(case)
    assert (prompt.task, prompt.language) == (task, language)
    assert prompt.system.strip()
    context = "[kb:J-17] Statement one.\n[ddxplus:3] A similar patient."
    text = prompt.render(case, context)

    assert case.question in text
    assert context in text
    if case.patient is not None:
        assert case.patient.initial_presentation.strip() in text
    named = all(k == v for k, v in case.options.items())
    for key, option in case.options.items():
        assert (f"- {option}" if named else f"{key}. {option}") in text
    assert (prompt.reply_by_name if named else prompt.reply_by_key) in text
    assert text.startswith(prompt.intro)
    if task == "free_text":
        assert "[kb:12]" in text  # asked to cite the context's ids
        assert "[kb:12]" not in prompt.render(case, None)


def test_no_context_section_when_there_is_no_context(data):
    case = build_case(data, "diagnosis", "zh")
    text = task_prompt(case).render(case, None)
    assert "参考信息" not in text
    assert "你的预测必须从以下预定义的疾病列表中选择" in text  # the paper's DialMed wording
    assert "疾病：疾病名称" in text


def test_english_diagnosis_prompt_uses_the_doctorrag_wording(data):
    case = build_case(data, "diagnosis", "en")
    text = task_prompt(case).render(case, None)
    assert "predict the most likely disease for this patient" in text
    assert "determine the most likely disease from the following options only:" in text
    assert text.endswith("Return only the name of the disease without any additional text.")


@pytest.mark.parametrize("task", ["diagnosis", "ddx", "multiple_choice", "multi_select", "treatment"])
def test_option_tasks_refuse_a_case_without_options(task):
    case = Case(id="x", task=task, question="Which one?")
    with pytest.raises(InvalidInputError):
        task_prompt(case).render(case, None)


# --- single choice ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("language", "task", "reply", "expected"),
    [
        ("en", "diagnosis", "Molluscum contagiosum", "Molluscum contagiosum"),
        ("en", "diagnosis", "The most likely diagnosis is molluscum contagiosum.", "Molluscum contagiosum"),
        ("en", "diagnosis", '{"answer": "Molluscum contagiosum"}', "Molluscum contagiosum"),
        ("en", "multiple_choice", "Answer: C", "C"),
        ("en", "multiple_choice", "B. ", "B"),
        ("zh", "diagnosis", "疾病：急性胃肠炎", "急性胃肠炎"),
        ("zh", "diagnosis", "疾病: 过敏性鼻炎", "过敏性鼻炎"),  # not 鼻炎, which it contains
        ("zh", "diagnosis", "根据对话，患者最可能患有过敏性皮炎。", "过敏性皮炎"),
        ("zh", "diagnosis", "急性胃肠炎", "急性胃肠炎"),
        ("zh", "multiple_choice", "答案：Ａ", "A"),
        ("zh", "multiple_choice", "选项B", "B"),
        ("zh", "multiple_choice", "我选择C。", "C"),
        ("zh", "multiple_choice", "Ｄ", "D"),
        ("fr", "multiple_choice", "Réponse : B", "B"),
        ("fr", "multiple_choice", "La réponse est C, car le tableau clinique est typique.", "C"),
        ("fr", "diagnosis", "Pneumonie", "Pneumonie"),
        ("fr", "diagnosis", "Le diagnostic est : angine instable.", "Angine instable"),
    ],
)
def test_single_choice_replies(data, language, task, reply, expected):
    case = build_case(data, task, language)
    assert task_prompt(case).parse(reply, case).choice == expected


def test_a_name_inside_a_longer_name_is_not_a_second_answer(data):
    case = build_case(data, "diagnosis", "en")
    case = case.model_copy(update={"options": {n: n for n in data.conditions_en}})
    assert task_prompt(case).parse("This looks like unstable angina.", case).choice == "Unstable angina"
    assert task_prompt(case).parse("Stable angina", case).choice == "Stable angina"


@pytest.mark.parametrize(
    ("language", "task", "reply"),
    [
        ("en", "diagnosis", "I cannot tell without a biopsy."),
        ("en", "multiple_choice", "Either A. or B. could be right."),
        ("en", "multiple_choice", "The answer is a difficult one."),  # "a" is not option A
        ("en", "diagnosis", '{"answer": "Scabies"}'),
        ("zh", "diagnosis", "无法确定，建议到医院就诊。"),
        ("zh", "diagnosis", "可能是肺炎，也可能是胃炎。"),
        ("fr", "diagnosis", "Je ne sais pas."),
        ("fr", "multiple_choice", ""),
    ],
)
def test_unparseable_single_choice_is_a_typed_failure_with_the_raw_reply(data, language, task, reply):
    case = build_case(data, task, language)
    with pytest.raises(AnswerParseError) as caught:
        task_prompt(case).parse(reply, case)
    assert caught.value.raw == reply


# --- differential -------------------------------------------------------------------------------------------


def test_ddx_numbered_list_keeps_order_and_drops_unknown_names(data):
    case = build_case(data, "ddx", "en")
    reply = (
        "Differential diagnosis:\n1. Pneumonia (45%)\n2. Lupus nephritis\n3. bronchitis\n"
        "4. HIV (initial infection)\n5. Pneumonia"
    )
    parsed = task_prompt(case).parse_reply(reply, case)
    assert [d.name for d in parsed.result.ddx] == ["Pneumonia", "Bronchitis", "HIV (initial infection)"]
    assert parsed.result.ddx[0].probability == pytest.approx(0.45)
    assert parsed.result.choice == "Pneumonia"
    assert parsed.dropped == ["Differential diagnosis:", "Lupus nephritis"]


def test_ddx_comma_separated_and_json(data):
    case = build_case(data, "ddx", "en")
    ddx, dropped = parse_ddx("URTI, Influenza; common cold, Viral pharyngitis", case.options)
    assert [d.name for d in ddx] == ["URTI", "Influenza", "Viral pharyngitis"]
    assert dropped == ["common cold"]

    names = [d for d, _ in ast.literal_eval(data.ddx_patient["top5_diagnoses"])]
    reply = json.dumps({"diagnoses": names})
    assert [d.name for d in task_prompt(case).parse(reply, case).ddx] == names[:DDX_SIZE]


def test_ddx_in_french_and_chinese(data):
    fr = build_case(data, "ddx", "fr")
    result = task_prompt(fr).parse("1. Angine instable\n2. angine stable\n3. Péricardite", fr)
    assert [d.name for d in result.ddx] == ["Angine instable", "Angine stable", "Péricardite"]
    zh = build_case(data, "ddx", "zh")
    result = task_prompt(zh).parse("急性胃肠炎、胃炎、肠炎、感冒", zh)
    assert [d.name for d in result.ddx] == ["急性胃肠炎", "胃炎", "肠炎"]


def test_ddx_is_capped_at_ten(data):
    case = build_case(data, "ddx", "en")
    ddx, _ = parse_ddx("\n".join(data.conditions_en[:15]), case.options)
    assert [d.name for d in ddx] == data.conditions_en[:DDX_SIZE]


def test_ddx_without_a_valid_name_fails(data):
    case = build_case(data, "ddx", "en")
    reply = "1. Lupus\n2. Common cold"
    with pytest.raises(AnswerParseError) as caught:
        task_prompt(case).parse(reply, case)
    assert caught.value.raw == reply


# --- several choices ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "expected", "dropped"),
    [
        ("蒙脱石、益生菌，黄连素", ["蒙脱石", "益生菌", "黄连素"], []),
        ("推荐药物：蒙脱石；益生菌", ["蒙脱石", "益生菌"], []),
        ("1. 蒙脱石\n2. 维生素C\n3. 益生菌", ["蒙脱石", "益生菌"], ["维生素C"]),
        ("建议加用蒙脱石和益生菌。", ["蒙脱石", "益生菌"], []),
        ('{"answers": ["黄连素", "蒙脱石"]}', ["黄连素", "蒙脱石"], []),
        ('```json\n{"answers": ["黄连素"]}\n```', ["黄连素"], []),
    ],
)
def test_chinese_treatment_replies(data, reply, expected, dropped):
    case = build_case(data, "treatment", "zh")
    parsed = task_prompt(case).parse_reply(reply, case)
    assert parsed.result.choices == expected
    assert parsed.dropped == dropped


@pytest.mark.parametrize(
    ("reply", "expected"),
    [("A; C", ["A", "C"]), ("a, c", ["A", "C"]), ("A and D", ["A", "D"]), ('{"answers": ["B"]}', ["B"])],
)
def test_lettered_multi_select_replies(data, reply, expected):
    case = build_case(data, "multi_select", "en")
    assert task_prompt(case).parse(reply, case).choices == expected


def test_french_multi_select_by_name(data):
    case = build_case(data, "multi_select", "fr")
    choices, dropped = parse_selection("Pneumonie, Bronchite et Coqueluche, Grippe", case.options)
    assert choices == ["Pneumonie", "Bronchite", "Coqueluche"]
    assert dropped == ["Grippe"]


@pytest.mark.parametrize("reply", ["不需要用药，多喝水。", '{"answers": []}', '{"answers": ["维生素C"]}', ""])
def test_selection_naming_no_option_fails(data, reply):
    case = build_case(data, "treatment", "zh")
    with pytest.raises(AnswerParseError) as caught:
        task_prompt(case).parse(reply, case)
    assert caught.value.raw == reply


# --- schemas ------------------------------------------------------------------------------------------------


def test_json_schemas(data):
    treatment = build_case(data, "treatment", "zh")
    schema = task_prompt(treatment).json_schema(treatment)
    answers = schema["properties"]["answers"]
    assert answers["items"]["enum"] == data.drugs and answers["minItems"] == 1
    assert schema["required"] == ["answers"]

    ddx = build_case(data, "ddx", "fr")
    schema = task_prompt(ddx).json_schema(ddx)
    assert schema["properties"]["diagnoses"]["items"]["enum"] == data.conditions_fr
    assert schema["properties"]["diagnoses"]["maxItems"] == DDX_SIZE

    for task in ("diagnosis", "multiple_choice", "free_text"):
        case = build_case(data, task, "en")
        assert task_prompt(case).json_schema(case) is None


# --- free text and citations --------------------------------------------------------------------------------


def test_free_text_is_cleaned_and_empty_fails(data):
    case = build_case(data, "free_text", "zh")
    prompt = task_prompt(case)
    parsed = prompt.parse_reply("<think>先分析对话</think>\n\n  建议继续服用蒙脱石 [kb:12]。  ", case)
    assert parsed.text == "建议继续服用蒙脱石 [kb:12]。"
    for reply in ("", "   ", "<think>…</think>"):
        with pytest.raises(AnswerParseError):
            prompt.parse(reply, case)


def test_cited_ids():
    text = (
        "Molluscum contagiosum [kb:derm-3]; similar to [ddxplus:12, icraft:135]. Again [kb:derm-3]. "
        "Not ids: [MASK], [1], [see above]. Also [pubmed:31234567]."
    )
    assert cited_ids(text) == ["kb:derm-3", "ddxplus:12", "icraft:135", "pubmed:31234567"]
    assert cited_ids("no citations") == []


# --- the real model -----------------------------------------------------------------------------------------


def test_embedded_model_answers_a_multi_select_case_under_the_schema(data, embedded):
    case = build_case(data, "multi_select", "en")
    prompt = task_prompt(case)
    request = ChatRequest.of(
        prompt.render(case, None),
        system=prompt.system,
        max_tokens=40,
        temperature=0.0,
        json_schema=prompt.json_schema(case),
    )
    completion = embedded.complete(request)
    choices = prompt.parse(completion.text, case).choices
    assert choices and set(choices) <= set(case.options)


def test_an_option_containing_commas_is_not_split(data):
    row = next(r for r in data.medqa if any("," in text for text in r["options"].values()))
    options = {text: text for text in row["options"].values()}
    with_comma = next(text for text in options if "," in text)
    other = next(text for text in options if "," not in text)
    choices, dropped = parse_selection(f"{with_comma}\n{other}", options)
    assert choices == [with_comma, other] and dropped == []
    ddx, _ = parse_ddx(with_comma, options)
    assert [d.name for d in ddx] == [with_comma]
