"""`ddxplus-text`: the DDXPlus patients told in the first person, for methods that read only free text.

`FirstPersonRenderer` turns a patient's evidence codes into sentences derived from each evidence's English
question ("Do you have a cough?" → "I have a cough.") and its `value_meaning` texts (pain and rash
locations, characters and 0–10 ratings, swelling sites, travel). The text opens with age and sex and the
chief complaint (the initial evidence), then the other symptoms, then the history and risk factors. It is
deterministic. A sentence that names the patient's pathology (e.g. "I have had pneumonia in the past." for
a pneumonia patient) is left out and counted in the report.

Cases, gold, records and labels are those of the `ddxplus` dataset: the same case ids, so `knn-vote` over
coded experience compares with text methods case by case. The cases carry no codes and no meta."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from clinrag.core.files import data_file, read_json
from clinrag.core.models import Case, PatientProfile
from clinrag.eval.datasets.base import Dataset, DatasetSpec, finish, register
from clinrag.eval.datasets.patients import ddxplus_loader
from clinrag.patients.loaders import NOWHERE, VALUE_SEPARATOR, site_and_side

PAIN, PAIN_CHARACTER, PAIN_LOCATION, PAIN_RADIATION = "E_53", "E_54", "E_55", "E_57"
PAIN_ONSET, PAIN_INTENSITY, PAIN_PRECISION = "E_59", "E_56", "E_58"
SKIN, RASH_LOCATION, RASH_COLOUR, RASH_PAIN = "E_129", "E_133", "E_130", "E_134"
RASH_SWELLING, RASH_ITCH, RASH_SIZE, RASH_PEELING = "E_132", "E_136", "E_135", "E_131"
SWELLING, SWELLING_LOCATION, TRAVEL = "E_151", "E_152", "E_204"
# An evidence that details another one is told in the head's block.
BLOCKS = {
    PAIN: (PAIN_LOCATION, PAIN_CHARACTER, PAIN_RADIATION, PAIN_INTENSITY, PAIN_ONSET, PAIN_PRECISION),
    SKIN: (RASH_LOCATION, RASH_COLOUR, RASH_SIZE, RASH_PEELING, RASH_PAIN, RASH_SWELLING, RASH_ITCH),
    SWELLING: (SWELLING_LOCATION,),
}
HEAD_OF = {detail: head for head, details in BLOCKS.items() for detail in details}
NOT_APPLICABLE, NO, YES = "V_11", "V_10", "V_12"

# Questions whose mechanical rewording reads badly (double questions, past tense, third person, typos).
STATEMENTS = {
    PAIN: "I have pain.",
    SKIN: "I have a rash or skin lesions.",
    SWELLING: "I have swelling.",
    "E_3": "I have had pericarditis in the past.",
    "E_4": "I, or someone in my family, have had croup.",
    "E_13": "My symptoms have got worse over the last 2 weeks, and it takes less and less effort to bring "
    "them on.",
    "E_25": "Someone in my family has been diagnosed with cluster headaches.",
    "E_28": "Someone in my family has been diagnosed with myasthenia gravis.",
    "E_29": "Someone in my immediate family has a psychiatric illness.",
    "E_40": "I have been in contact with someone who had whooping cough (pertussis).",
    "E_42": "I have been in contact with, or eaten, something I am allergic to.",
    "E_52": "I have double vision: I see two images of a single object, overlapping or side by side.",
    "E_71": "I have high cholesterol (or take medication for it).",
    "E_75": "I feel like I am (or was) choking or suffocating.",
    "E_88": "I am so tired that I cannot do my usual activities, or I am stuck in bed all day long.",
    "E_90": "My muscle weakness gets worse with fatigue or stress.",
    "E_92": "My cheeks suddenly turned red.",
    "E_99": "I have had migraines, or someone in my family has migraines.",
    "E_102": "I am here because of high blood pressure.",
    "E_104": "I have high blood pressure (or take medication for it).",
    "E_105": "I have had a heart attack, or I have angina (chest pain).",
    "E_111": "I feel like I am dying, or I was afraid I was about to die.",
    "E_112": "I wheeze when I breathe in, or my breathing is noisy after coughing spells.",
    "E_114": "I am more irritable, or my mood has been very unstable recently.",
    "E_124": "I have asthma, or I have had to use a bronchodilator in the past.",
    "E_128": "I have had moments when I felt like I was suffocating, unable to breathe or speak, for a very "
    "short time.",
    "E_141": "I had my first menstrual period before the age of 12.",
    "E_142": "My mother has asthma.",
    "E_146": "I am taking one of the new oral anticoagulants (NOACs).",
    "E_149": "I take a calcium channel blocker.",
    "E_154": "My skin is much paler than usual.",
    "E_159": "I lost consciousness.",
    "E_160": "I was born prematurely or had complications at birth.",
    "E_161": "I have recently lost my appetite, or I get full more quickly than usual.",
    "E_165": "Someone in my family has had a pneumothorax.",
    "E_166": "I vomited after coughing.",
    "E_167": "I am pregnant, or I think I might be.",
    "E_169": "My nose or the back of my throat is itchy.",
    "E_176": "I have, or have had, weakness or paralysis in one or more of my limbs or in my face.",
    "E_177": "I have, or have had, numbness, loss of sensation or tingling somewhere on my body.",
    "E_187": "I ate dark-fleshed fish (such as tuna) or Swiss cheese before the reaction.",
    "E_202": "My coughing fits end with a whooping sound when I breathe in.",
    "E_8": "I am on dialysis.",
    "E_73": "In the last month, I have been in contact with someone infected with the Ebola virus.",
    "E_93": "I have numbness, loss of sensation or tingling in my feet.",
    "E_123": "I have chronic obstructive pulmonary disease (COPD).",
    "E_158": "I have been diagnosed with an endocrine disease or a hormone problem.",
    "E_207": "I live in a big city.",
    "E_208": "I am underweight (my BMI is under 18.5).",
    "E_209": "My vaccinations are up to date.",
    "E_217": "My symptoms are worse when I lie down and better when I sit up.",
    "E_218": "My symptoms get worse with physical effort and ease with rest.",
    "E_219": "My symptoms are worse at night.",
    "E_221": "My symptoms or pain get worse when I cough, lift something heavy or strain on the toilet.",
    "E_223": "Someone in my family has been diagnosed with pancreatic cancer.",
    "E_1": "I am being treated, or was recently treated, with an oral antibiotic for an ear infection.",
    "E_10": "I am taking, or have recently taken, anti-inflammatory drugs (NSAIDs).",
    "E_23": "I sometimes stop breathing for a while when I am asleep.",
}

# Body sites of `value_meaning` in a patient's words (several are literal translations from French);
# "{side}" is where "right ", "left " or "right and left " goes.
SITES = {
    "above the tongue": "the top of my tongue",
    "under the tongue": "the underside of my tongue",
    "under the jaw": "the area under my jaw",
    "back of the neck": "the back of my neck",
    "back of head": "the back of my head",
    "occiput": "the back of my head",
    "top of the head": "the top of my head",
    "dorsal aspect of the foot": "the top of my {side}foot",
    "dorsal aspect of the hand": "the back of my {side}hand",
    "dorsal aspect of the wrist": "the back of my {side}wrist",
    "palmar face of the wrist": "the inside of my {side}wrist",
    "palmar side of the forearm": "the inside of my {side}forearm",
    "lateral side of the foot": "the outer side of my {side}foot",
    "posterior aspect of the ankle": "the back of my {side}ankle",
    "posterior chest wall": "my {side}upper back",
    "side of the chest": "the {side}side of my chest",
    "side of the neck": "the {side}side of my neck",
    "popliteal fossa": "the back of my {side}knee",
    "renal fossa": "the {side}kidney area of my back",
    "iliac fossa": "my {side}lower belly",
    "hypochondrium": "my {side}upper belly (under the ribs)",
    "epigastric": "the pit of my stomach",
    "iliac wing": "my {side}hip bone",
    "iliac crest": "my {side}hip bone",
    "ischio jambier": "my {side}hamstring",
    "commissure": "the {side}corner of my mouth",
    "vermilion": "my {side}lip",
    "internal cheek": "the inside of my {side}cheek",
    "thyroid cartilage": "the front of my neck",
    "pharynx": "my throat",
    "palace": "my palate",
    "trachea": "my windpipe",
    "pubis": "my pubic area",
    "toe (1)": "my {side}big toe",
    "toe (2)": "my {side}second toe",
    "toe (3)": "my {side}third toe",
    "little toe (4)": "my {side}fourth toe",
    "finger (index)": "my {side}index finger",
    "finger (middle)": "my {side}middle finger",
    "finger (ring finger)": "my {side}ring finger",
    "finger (little finger)": "my {side}little finger",
}
# Pain characters: literal translations put into the words a patient would use.
CHARACTERS = {
    "heartbreaking": "tearing",
    "haunting": "shooting",
    "tedious": "nagging",
    "sensitive": "tender",
    "a knife stroke": "like a stab from a knife",
    "tugging": "pulling",
    "a cramp": "like a cramp",
    "a pulse": "throbbing",
}
REGIONS = {"Caraibes": "the Caribbean"}

# Object pronouns: "wake you up" → "wake me up"; every other "you" is the subject ("when you exhale").
_OBJECT_YOU = re.compile(r"\b(keeping|wake|as|than|for|with|to) you\b")


class FirstPersonRenderer:
    """First-person sentences for DDXPlus evidence codes, from `release_evidences.json`."""

    def __init__(self, evidences: dict[str, Any]) -> None:
        self.evidences = evidences

    @classmethod
    def from_file(cls, path: Path) -> FirstPersonRenderer:
        return cls(read_json(path))

    # --- one evidence ----------------------------------------------------------------------------------

    def statement(self, name: str) -> str:
        """The first-person statement of a present binary evidence."""
        if name in STATEMENTS:
            return STATEMENTS[name]
        return _first_person(str(self.evidences[name]["question_en"]))

    def is_antecedent(self, name: str) -> bool:
        return bool(self.evidences[name].get("is_antecedent"))

    def meaning(self, name: str, value: str) -> str:
        meaning = (self.evidences[name].get("value_meaning") or {}).get(value)
        return str(meaning["en"]).strip() if isinstance(meaning, dict) else value

    # --- a patient -------------------------------------------------------------------------------------

    def sentences(self, codes: Iterable[str], initial: str) -> tuple[list[str], list[str], list[str]]:
        """(chief complaint, other symptoms, history) sentences for a patient's codes and initial code."""
        values: dict[str, list[str]] = {}
        for code in codes:
            name, _, value = code.partition(VALUE_SEPARATOR)
            if name not in self.evidences:
                continue  # an unknown code: the coded load has reported it
            bucket = values.setdefault(name, [])
            if value and value not in bucket:
                bucket.append(value)
        first = initial.partition(VALUE_SEPARATOR)[0]
        first = HEAD_OF.get(first, first)
        heads = list(dict.fromkeys(HEAD_OF.get(name, name) for name in values))
        chief, symptoms, history = [], [], []
        for head in ([first] if first in heads else []) + [h for h in heads if h != first]:
            told = self._block(head, values)
            if head == first:
                chief = [_chief(told[0]), *told[1:]]
            elif self.is_antecedent(head):
                history += told
            else:
                symptoms += told
        return chief, symptoms, history

    def _block(self, head: str, values: dict[str, list[str]]) -> list[str]:
        if head == PAIN:
            return self._pain(values)
        if head == SKIN:
            return self._skin(values)
        if head == SWELLING:
            sites = [v for v in values.get(SWELLING_LOCATION, []) if v != NOWHERE]
            where = f" in {self._sites(SWELLING_LOCATION, sites)}" if sites else ""
            return [f"I have swelling{where}."]
        if head == TRAVEL:
            regions = [REGIONS.get(m, m) for m in (self.meaning(TRAVEL, v) for v in values[head] if v != NO)]
            if not regions:
                return ["I have not travelled out of the country in the last 4 weeks."]
            return [f"In the last 4 weeks I travelled to {_join(regions)}."]
        return [self.statement(head)]

    def _pain(self, values: dict[str, list[str]]) -> list[str]:
        sites = [v for v in values.get(PAIN_LOCATION, []) if v != NOWHERE]
        told = [f"I have pain in {self._sites(PAIN_LOCATION, sites)}." if sites else "I have pain."]
        characters = [
            CHARACTERS.get(m, m)
            for m in (
                self.meaning(PAIN_CHARACTER, v) for v in values.get(PAIN_CHARACTER, []) if v != NOT_APPLICABLE
            )
        ]
        if characters:
            told.append(f"It feels {_join(characters)}.")
        if PAIN_RADIATION in values:
            spread = [v for v in values[PAIN_RADIATION] if v != NOWHERE]
            told.append(
                f"It spreads to {self._sites(PAIN_RADIATION, spread)}."
                if spread
                else "It does not spread anywhere else."
            )
        ratings = [
            f"{label} {values[name][0]}"
            for name, label in (
                (PAIN_INTENSITY, "its intensity"),
                (PAIN_ONSET, "how fast it came on"),
                (PAIN_PRECISION, "how precisely I can point to it"),
            )
            if values.get(name)
        ]
        if ratings:
            told.append(f"On a scale of 0 to 10, I rate {_join(ratings)}.")
        return told

    def _skin(self, values: dict[str, list[str]]) -> list[str]:
        told = [STATEMENTS[SKIN]]
        sites = [v for v in values.get(RASH_LOCATION, []) if v != NOWHERE]
        if sites:
            told.append(f"It is on {self._sites(RASH_LOCATION, sites)}.")
        colours = [self.meaning(RASH_COLOUR, v) for v in values.get(RASH_COLOUR, []) if v != NOT_APPLICABLE]
        if colours:
            told.append(f"It is {_join(colours)}.")
        if values.get(RASH_SIZE):
            bigger = values[RASH_SIZE][0] == YES
            told.append(
                "The lesions are larger than 1 cm." if bigger else "The lesions are smaller than 1 cm."
            )
        if values.get(RASH_PEELING):
            told.append("They peel off." if values[RASH_PEELING][0] == YES else "They do not peel off.")
        for name, what, none in (
            (RASH_PAIN, "The pain it causes is", "It does not hurt."),
            (RASH_SWELLING, "Its swelling is", "It is not swollen."),
            (RASH_ITCH, "The itching is", "It does not itch."),
        ):
            if values.get(name):
                rating = values[name][0]
                told.append(none if rating == "0" else f"{what} {rating} out of 10.")
        return told

    def _sites(self, name: str, values: list[str]) -> str:
        """Sites joined as a patient says them: "my right cheek, my left and right ear and my nose"."""
        sides: dict[str, list[str]] = {}
        for value in values:
            site, side = site_and_side(self.meaning(name, value))
            sides.setdefault(site, []).append(side)
        phrases = []
        for site, found in sides.items():
            words = [{"R": "right", "L": "left"}[side] for side in found if side]
            side = f"{_join(words)} " if words else ""
            phrases.append(SITES.get(site, "my {side}" + site).format(side=side))
        return _join(phrases)


def _first_person(question: str) -> str:
    """A yes/no question as the patient's statement: "Do you have a cough?" → "I have a cough."."""
    text = question.strip().rstrip("?:").strip()
    text = re.sub(
        r"\bor (do|have|are) you\b",
        lambda m: {"do": "or I", "have": "or I have", "are": "or I am"}[m[1]],
        text,
    )
    rules = (
        (r"^Have you ever had (.*)$", r"I have had \1 in the past"),
        (r"^Have you ever been (.*)$", r"I have been \1"),
        (r"^Have you (.*)$", r"I have \1"),
        (r"^Are you (.*)$", r"I am \1"),
        (r"^Do you (.*)$", r"I \1"),
    )
    for pattern, replacement in rules:
        if re.match(pattern, text):
            text = re.sub(pattern, replacement, text)
            break
    text = re.sub(r"\b(have|had|taken|noticed) any\b", r"\1", text)
    text = re.sub(r"\byou are\b", "I am", text)
    text = re.sub(r"\byou were\b", "I was", text)
    text = _OBJECT_YOU.sub(r"\1 me", text)
    text = re.sub(r"\byou\b", "I", text)
    text = re.sub(r"\byour\b", "my", text)
    return _sentence(text)


def _chief(sentence: str) -> str:
    body = sentence if sentence.startswith("I ") else sentence[0].lower() + sentence[1:]
    return f"I came in mainly because {body}"


def _sentence(text: str) -> str:
    text = text.strip()
    return text[0].upper() + text[1:] + ("" if text.endswith(".") else ".")


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def introduction(age: int | None, sex: str | None) -> str:
    adult = age is None or age >= 18
    noun = {"female": "woman" if adult else "girl", "male": "man" if adult else "boy"}.get(
        sex or "", "patient"
    )
    if age is None:
        return f"I am a {noun}."
    if age == 0:
        return f"I am a baby {noun if sex else ''}, under one year old.".replace(" ,", ",")
    article = "an" if str(age).startswith("8") or age in (11, 18) else "a"
    return f"I am {article} {age}-year-old {noun}."


def names_pathology(sentence: str, pathology: str) -> bool:
    """Whether the sentence names the pathology, or a part of a compound name ("HIV (initial infection)"
    → "HIV"; "Possible NSTEMI / STEMI" → "Possible NSTEMI", "STEMI")."""
    bare = re.sub(r"\([^)]*\)", "", pathology)
    parts = [part.strip() for part in [pathology, *bare.split("/")] if len(part.strip()) >= 3]
    return any(re.search(rf"\b{re.escape(part)}(e?s)?\b", sentence, re.IGNORECASE) for part in parts)


def render(renderer: FirstPersonRenderer, case: Case, pathology: str) -> tuple[str, list[str], int]:
    """(text, its sentences, sentences left out for naming the pathology) for a `ddxplus-interactive` case,
    whose meta holds the initial and hidden evidence codes."""
    assert case.patient is not None
    demographics = case.patient.demographics
    chief, symptoms, history = renderer.sentences(case.meta["hidden_evidence"], case.meta["initial_evidence"])
    kept = [[s for s in part if not names_pathology(s, pathology)] for part in (chief, symptoms, history)]
    dropped = sum(len(part) for part in (chief, symptoms, history)) - sum(len(part) for part in kept)
    chief, symptoms, history = kept
    sentences = [introduction(demographics.age, demographics.sex), *chief, *symptoms]
    if history:
        sentences += ["About my health and history:", *history]
    return " ".join(sentences), sentences, dropped


def ddxplus_text_loader() -> Callable[[Path], Dataset]:
    coded = ddxplus_loader(interactive=True)

    def load(path: Path) -> Dataset:
        dataset = coded(path)
        folder = path if path.is_dir() else path.parent
        renderer = FirstPersonRenderer.from_file(data_file(folder / "release_evidences.json"))
        cases, dropped = [], 0
        for case in dataset.cases:
            assert case.gold is not None and case.gold.answer is not None and case.patient is not None
            text, sentences, left_out = render(renderer, case, case.gold.answer)
            dropped += left_out
            profile = PatientProfile(
                initial_presentation=text, findings=sentences[1:], demographics=case.patient.demographics
            )
            cases.append(
                Case(
                    id=case.id,
                    task="ddx",
                    question=text,
                    patient=profile,
                    options=case.options,
                    gold=case.gold,
                )
            )
        notes = [
            "DDXPlus patients are synthetic; their evidence is told in the first person by a fixed renderer",
            f"{dropped} sentences left out because they name the patient's pathology",
        ]
        readings = dataset.report.splitlines()[1:]  # the coded load's own lines, without its head
        return finish(
            "ddxplus-text", cases, readings, records=dataset.records, labels=dataset.labels, notes=notes
        )

    return load


register(
    DatasetSpec(
        "ddxplus-text",
        "DDXPlus mini test told in the first person (free text only); differential over 49 pathologies",
        "ddxplus",
        ddxplus_text_loader(),
    )
)
