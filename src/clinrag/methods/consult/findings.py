"""Findings understood from a patient's own words: concepts of a `Vocabulary` with a status (present, absent,
uncertain), the patient's age, sex, the duration and onset of the complaint, and what could not be mapped.

Concept mentions are found by phrase matching on a blank spaCy pipeline (longest match wins), plus a few
lay constructions ("pain on the right side of my chest when I breathe" → pleuritic chest pain). Given an
embedder, a clause left without a mention is matched by meaning to the concepts with a lay name ("it burns
when I pee" → painful urination): cosine of its embedding with their names and short synonyms. Negation,
hedging and findings of someone else ("my wife has a fever") are NegEx scopes (negspacy) with patient-language
cue lists; the measurement that chose this over medspaCy's ConText is in the module's test file. A finding the
text both states and denies is uncertain, and quotes the sentences that do."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

import numpy as np
import spacy
from negspacy.negation import Negex  # noqa: F401  (registers the "negex" factory)
from negspacy.termsets import termset
from pydantic import BaseModel, Field
from spacy.matcher import PhraseMatcher
from spacy.tokens import Doc, Span

from clinrag.core.errors import InvalidInputError
from clinrag.embed.base import Embedder
from clinrag.methods.consult.vocabulary import SITE_FINDINGS, Concept, Vocabulary, reachable
from clinrag.patients.loaders import VALUE_SEPARATOR

FindingStatus = Literal["present", "absent", "uncertain"]
Sex = Literal["female", "male"]
Onset = Literal["sudden", "gradual"]
MAX_TEXT_CHARS = 20_000
LABEL = "FINDING"
CONTEXT_PIPES = ("negation", "hedging", "someone_else", "exclusion")

# --- negation, hedging, someone else's finding: NegEx cue lists ------------------------------------------
_NEGATION = termset("en_clinical")
_NEGATION.add_patterns(
    {
        "pseudo_negations": ["not sure", "not certain", "no idea", "not only"],
        "preceding_negations": [
            "haven't",
            "hasn't",
            "havent",
            "hasnt",
            "nor",
            "neither",
            "no longer",
            "none",
        ],
        # A new clause of the patient's own ("…, my hands tingled", "… and I'm coughing") ends a cue's scope.
        "termination": ["and now", "instead", "just", ", i", "; i", ", my", "and i", "and my", "otherwise"],
    }
)
_HEDGING = {
    "pseudo_negations": ["no doubt", "definitely"],
    "preceding_negations": [
        "maybe",
        "possibly",
        "perhaps",
        "probably",
        "might have",
        "may have",
        "might be",
        "may be",
        "could be",
        "could have",
        "not sure",
        "unsure",
        "not certain",
        "i think",
        "i wonder",
        "wondering if",
        "kind of",
        "sort of",
        "possible",
        "questionable",
        "suspected",
        "i guess",
        "borderline",
    ],
    "following_negations": ["i think", "i'm not sure", "not sure", "?"],
    "termination": _NEGATION.get_patterns()["termination"],
}
_RELATIVES = [
    "wife",
    "husband",
    "partner",
    "mother",
    "mom",
    "mum",
    "father",
    "dad",
    "son",
    "daughter",
    "brother",
    "sister",
    "child",
    "kids",
    "children",
    "baby",
    "friend",
    "colleague",
    "grandmother",
    "grandfather",
    "aunt",
    "uncle",
    "cousin",
    "roommate",
    "family",
]
_SOMEONE_ELSE = {
    "pseudo_negations": [],
    "preceding_negations": [f"{owner} {who}" for owner in ("my", "our", "his", "her") for who in _RELATIVES]
    + ["family history of", "runs in my family", "runs in the family"],
    "following_negations": ["runs in my family", "runs in the family"],
    "termination": [
        *_NEGATION.get_patterns()["termination"],
        "and i",
        "i have",
        "i've",
        "i had",
        "i am",
        "i'm",
        # what a relative tells of the patient is the patient's ("my wife says I snore")
        *(
            f"{verb} {whose}"
            for verb in ("says", "said", "noticed", "thinks", "tells me")
            for whose in ("i", "my")
        ),
    ],
}

# "No other pain", "no pain elsewhere": a denial of what was not said already, which contradicts none of what
# was ("I have chest pain. No other pain.").
_EXCLUSION = {
    "pseudo_negations": [],
    "preceding_negations": ["other"],
    "following_negations": ["else", "elsewhere", "besides"],
    "termination": _NEGATION.get_patterns()["termination"],
}

# "My eyesight is normal", "I can swallow fine", "the runny nose went away": what the clause says after a
# finding denies it. Read within the finding's clause only (NegEx's following cues reach back over the whole
# sentence: "I have a cough and everything else is normal").
_RESOLVED = re.compile(r"\b(?:normal(?:ly)?|fine|ok(?:ay)?|gone|resolved|went away|cleared up)\b", re.I)

# --- lay constructions: "<pain word> … <body part>" → "<body part> pain", the same for swelling -----------
_PAIN = {
    "pain",
    "pains",
    "painful",
    "ache",
    "aches",
    "aching",
    "hurt",
    "hurts",
    "hurting",
    "sore",
    "soreness",
    "discomfort",
    "tightness",
    "pressure",
    "squeezing",
    "crushing",
    "heaviness",
    "throbbing",
    "stabbing",
    "killing",
    "pulling",  # a small child pulling at an ear
    "tugging",
    "achy",
    "tender",
    "agony",
    "fire",  # "my big toe is on fire"
}
_BODY = {
    "chest": ("chest pain",),
    "stomach": ("abdominal pain",),
    "belly": ("abdominal pain",),
    "tummy": ("abdominal pain",),
    "abdomen": ("abdominal pain",),
    "head": ("headache",),
    "throat": ("sore throat", "throat pain"),
    "back": ("back pain",),
    "side": ("flank pain",),
    "ear": ("ear pain", "otalgia"),
    "ears": ("ear pain", "otalgia"),
    "joint": ("arthralgia", "joint pain"),
    "joints": ("arthralgia", "joint pain"),
    "muscle": ("myalgia", "muscle pain"),
    "muscles": ("myalgia", "muscle pain"),
    "neck": ("neck pain",),
    "eye": ("eye pain",),
    "eyes": ("eye pain",),
    "face": ("facial pain",),
    "jaw": ("jaw pain",),
    "leg": ("leg pain",),
    "legs": ("leg pain",),
    "calf": ("leg pain",),
    "arm": ("arm pain",),
    "arms": ("arm pain",),
    "knee": ("knee pain",),
    "shoulder": ("shoulder pain",),
    "hip": ("hip pain",),
    "ankle": ("ankle pain",),
    "foot": ("foot pain",),
    "feet": ("foot pain",),
    "toe": ("toe pain",),
    "wrist": ("wrist pain",),
    "elbow": ("elbow pain",),
    "hand": ("hand pain",),
    "heel": ("heel pain", "foot pain"),
    "breastbone": ("chest pain",),
    "bottom": ("anal pain",),
    "anus": ("anal pain",),
    **dict.fromkeys(
        ("bowels", "poo", "stool", "stools"), ("pain during bowel movements", "painful defecation")
    ),
    "ribs": ("chest pain",),
}
_BELOW = {"under", "below", "beneath"}
_LOWER_BACK = ("low back pain", "back pain")
_SWELLING = {"swollen", "swelling", "swelled", "swell", "swells", "puffy"}
_LEG_SWELLING = ("swelling in legs", "pedal edema", "edema", "swelling")
_JOINT_SWELLING = ("joint swelling", "swelling")
_SWOLLEN = {
    **dict.fromkeys(("leg", "legs", "calf", "calves", "ankle", "ankles", "foot", "feet"), _LEG_SWELLING),
    **dict.fromkeys(
        ("joint", "joints", "knee", "knees", "toe", "toes", "finger", "fingers"), _JOINT_SWELLING
    ),
    **dict.fromkeys(("wrist", "elbow", "hip"), _JOINT_SWELLING),
    **dict.fromkeys(("face", "eyelids", "eyes"), ("facial edema", "swelling")),
    **dict.fromkeys(("glands", "neck"), ("swollen lymph nodes", "lymphadenopathy")),
}
# a heart beating fast is a rapid heart rate; one felt beating (pounding, fluttering, skipping) palpitations
_HEART_FAST = {"racing", "fast", "rapid"}
_HEART = {"pounding", "fluttering", "thumping", "skipping", "hammering", "irregular", "jumping"}
_HEART_PARTS = ("heart", "heartbeat", "pulse")
_BLOOD = {"blood", "bloody", "pink", "red"}
_URINE = dict.fromkeys(("urine", "pee", "wee"), ("blood in urine", "hematuria"))
_REDNESS = {"red", "bloodshot", "pink"}
_BURNING = {"burning", "burns", "burn", "stings", "stinging"}
_PEE = ("pee", "wee", "urinate", "urinating", "peeing", "weeing", "urine")
_WEAK = {"weak", "weakness"}
_CLOUDY = {"cloudy", "cloudier", "misty", "hazy"}
_SHAKY = {"shaky", "shakes", "shaking", "trembling", "trembly", "tremble"}
_BLOCKED = {"blocked", "full", "bunged", "plugged", "stuffed"}
_NOISE = {"ringing", "buzzing", "roaring", "whooshing", "hissing"}
_LOST = {"lost", "losing"}
_GAINED = {"gained", "put", "putting", "gaining"}
_WEIGHT = ("weight", "stone", "pounds", "kilos", "kg", "lbs", "pound", "kilo")
_LIMBS = ("arm", "arms", "leg", "legs", "hand", "hands", "limbs")
# (cue words, body part → the names the finding may have, the finding when no part is near, the word the
# knowledge's site findings end with: DDXPlus' "tonsil pain" adds "tonsil" to the pain parts)
_Parts = tuple[
    set[str], dict[str, tuple[str, ...]], tuple[str, ...]
]  # a construction as `_body_finding` uses it
_Construction = tuple[set[str], dict[str, tuple[str, ...]], tuple[str, ...], str | None]
_LAY_CONSTRUCTIONS: tuple[_Construction, ...] = (
    (_PAIN, _BODY, (), "pain"),
    (_SWELLING, _SWOLLEN, ("swelling",), "swelling"),
    (_HEART_FAST, dict.fromkeys(_HEART_PARTS, ("rapid heart rate", "tachycardia", "palpitations")), (), None),
    (_HEART, dict.fromkeys(_HEART_PARTS, ("palpitations",)), (), None),
    (_BLOOD, _URINE, (), None),
    (_REDNESS, dict.fromkeys(("eye", "eyes"), ("red eyes", "red eye")), (), None),
    (_BURNING, dict.fromkeys(("breastbone", "chest", "gullet"), ("heartburn",)), (), None),
    (_BURNING, dict.fromkeys(_PEE, ("painful urination", "dysuria")), (), None),
    (_WEAK, dict.fromkeys(_LIMBS, ("muscle weakness", "weakness")), (), None),
    (_SHAKY, dict.fromkeys(("hand", "hands", "fingers", "arm", "arms"), ("tremor",)), (), None),
    (_CLOUDY, dict.fromkeys(("vision", "eyesight", "eye", "eyes", "sight"), ("blurred vision",)), (), None),
    (_CLOUDY, dict.fromkeys(_PEE, ("cloudy urine",)), (), None),
    (
        _BLOCKED,
        {"ear": ("ear fullness",), "ears": ("ear fullness",), "nose": ("nasal congestion",)},
        (),
        None,
    ),
    (_NOISE, dict.fromkeys(("ear", "ears", "head"), ("tinnitus",)), (), None),
    (_LOST, dict.fromkeys(_WEIGHT, ("weight loss",)), (), None),
    (_GAINED, dict.fromkeys(_WEIGHT, ("weight gain", "increased body weight")), (), None),
)
_DETERMINERS = {"my", "the", "his", "her", "your", "our", "their"}
_CLAUSE_ENDS = {",", ";", ".", "and", "but", "or", "while", "though"}
_LIST_GLUE = {",", "and", "or", "both", "right", "left", *_DETERMINERS}
_BREATHING = {"breathe", "breathing", "breath", "inhale", "inhaling", "breaths"}
_PLEURITIC = ("pleuritic chest pain", "pain that is increased when you breathe in deeply")
_SPUTUM = {"phlegm", "mucus", "sputum", "productive", "green", "yellow", "spit"}
_BLOOD_COUGHED = {"blood", "bloody"}
_COUGH = {"cough", "coughing", "coughs", "coughed"}
# Everyday words and phrases → the names a vocabulary may use for them, first known wins.
_LAY_PHRASES = {
    "dizzy": ("dizziness",),
    "short of breath": ("shortness of breath", "dyspnea"),
    "out of breath": ("shortness of breath", "dyspnea"),
    "breathless": ("shortness of breath", "dyspnea"),
    "nauseous": ("nausea",),
    "nauseated": ("nausea",),
    "constipated": ("constipation",),
    "jaundiced": ("jaundice",),
    "feverish": ("fever",),
    "itchy": ("pruritus",),
    "throwing up": ("vomiting",),
    "blood in my stool": ("hematochezia", "blood in stool"),
    "blood in the stool": ("hematochezia", "blood in stool"),
    "wheezy": ("wheezing",),
    **dict.fromkeys(
        (
            "no appetite",
            "poor appetite",
            "lost my appetite",
            "off my food",
            "off his food",
            "off her food",
            "don't want to eat",
            "not eating",
            "not hungry",
        ),
        ("loss of appetite", "poor appetite"),
    ),
    **dict.fromkeys(("tingled", "tingly", "pins and needles"), ("tingling", "paresthesia")),
    **dict.fromkeys(
        (
            "can't sleep",
            "can't get to sleep",
            "can't get back to sleep",
            "trouble sleeping",
            "difficulty sleeping",
        ),
        ("insomnia",),
    ),
    **dict.fromkeys(
        ("felt low", "feel low", "feeling low", "felt down", "feeling down", "worthless"), ("depression",)
    ),
    **dict.fromkeys(("lost interest", "no interest"), ("anhedonia",)),
    **dict.fromkeys(
        (
            "catch my breath",
            "can't catch my breath",
            "couldn't catch my breath",
            "winded",
            "out of puff",
            "puffed out",
        ),
        ("dyspnea",),
    ),
    **dict.fromkeys(("lightheaded", "light-headed", "light headed"), ("lightheadedness", "dizziness")),
    **dict.fromkeys(("queasy", "felt sick", "feel sick", "feeling sick"), ("nausea",)),
    **dict.fromkeys(("room spins", "room spinning", "room is spinning", "everything spins"), ("vertigo",)),
    **dict.fromkeys(
        ("worst pain", "excruciating", "unbearable pain", "agonising", "agonizing"), ("severe pain",)
    ),
    **dict.fromkeys(("snore", "snores"), ("snoring",)),
    **dict.fromkeys(("stop breathing", "stops breathing"), ("apnea",)),
    **dict.fromkeys(
        ("nodded off", "nodding off", "dozing off", "fall asleep during the day"),
        ("daytime sleepiness", "excessive daytime somnolence"),
    ),
    **dict.fromkeys(
        ("cold feet", "cold foot", "cold hands", "feels colder", "colder than the other"),
        ("cold extremities",),
    ),
    **dict.fromkeys(("propped up", "sleep sitting up"), ("orthopnea",)),
    **dict.fromkeys(("dazzle", "dazzles", "glare"), ("glare sensitivity", "photophobia")),
    **dict.fromkeys(("can't stand the heat", "can't stand heat", "hate the heat"), ("heat intolerance",)),
    **dict.fromkeys(
        ("face is drooping", "face was drooping", "face drooping", "drooping face", "face has dropped"),
        ("facial palsy",),
    ),
    **dict.fromkeys(
        ("red and swollen", "red, hot", "red and hot", "hot and red", "red and sore"), ("redness",)
    ),
    **dict.fromkeys(
        (
            "warm to touch",
            "hot to touch",
            "warm to the touch",
            "hot to the touch",
            "warmer than the other",
            "feels warm",
            "feels hot",
        ),
        ("warmth",),
    ),
    **dict.fromkeys(("shivery", "shivering", "the shivers", "shivers"), ("chills",)),
    **dict.fromkeys(
        (
            "a temperature",
            "high temperature",
            "running a temperature",
            "slight temperature",
            "i feel hot",
            "feeling hot",
            "hot and shivery",
            "hot and cold",
        ),
        ("fever",),
    ),
    **dict.fromkeys(
        (
            "been sick once",
            "been sick twice",
            "being sick",
            "been sick a few times",
            "was sick once",
            "was sick twice",
            "was sick",
        ),
        ("vomiting",),
    ),
    **dict.fromkeys(("passed out", "fainted", "blacked out"), ("syncope", "loss of consciousness")),
    **dict.fromkeys(("blurry", "gone blurry", "went blurry"), ("blurred vision",)),
    **dict.fromkeys(("slurred", "slurring"), ("slurred speech", "dysarthria")),
    **dict.fromkeys(
        ("look yellow", "looks yellow", "turned yellow", "gone yellow", "yellow eyes"), ("jaundice",)
    ),
    **dict.fromkeys(("anxious", "on edge", "can't stop worrying", "worry about everything"), ("anxiety",)),
}
# Single words that some HPO synonyms use but that mean nothing clinical in a patient's sentence.
_EVERYDAY = frozenset(
    {
        "odd",
        "weird",
        "tall",
        "short",
        "small",
        "large",
        "thin",
        "cold",
        "hot",
        "slow",
        "fast",
        "high",
        "low",
        "big",
        "long",
        "normal",
        "absent",
        "present",
        "mild",
        "severe",
        "spinning",
    }
)
LAY_WINDOW = 8  # tokens between a pain word and its body part ("pain on the right side of my chest")

# --- unmapped complaints ----------------------------------------------------------------------------------
_CLAUSE_SPLIT = re.compile(r"[,;.!?]|\b(?:and|but|for|since|because|when|which|while|also|plus)\b", re.I)
_COMPLAINT_CUE = re.compile(
    r"\b(?:pains?|aches?|aching|hurts?|sore|swollen|swelling|itch(?:y|ing)?|burning|bleeding|lump|numb|"
    r"tingl\w*|weak|tired|dizzy|trouble|difficulty|problems?|feel(?:ing)?|noticed|have|had|having|got|"
    r"suffer\w*|experienc\w*|complain\w*|knee|foot|feet|toes?|hands?|fingers?|skin|hip|wrist|ankle|"
    r"chest|stomach|belly|head|throat|back|neck|legs?|arms?|eyes?|ears?)\b",
    re.I,
)
_FILLER = re.compile(
    r"^(?:(?:i|i've|i'm|ive|im|have|has|had|having|been|got|a|an|the|some|my|also|really|very|bad|"
    r"feel|feeling|am|is|was|noticed|and|with|he|she|they|patient)\s+)+",
    re.I,
)
_NOT_COMPLAINT = re.compile(r"^\d+$|\b(?:year|years|old|days?|weeks?|months?|hours?|yesterday|today|ago)\b")

# --- a clause's meaning (with an embedder) ----------------------------------------------------------------
# Chosen on tests/data/consult/findings_dev.jsonl (`python -m tests.methods.consult.test_findings` prints the
# precision and recall per threshold).
SEMANTIC_THRESHOLD = 0.7
NEGATION_MARGIN = 0.03  # how much closer the clause without its inability word must be for it to negate
MAX_FORMS = 3  # surfaces embedded per concept: its lay names, then its shortest names and synonyms
MAX_FORM_WORDS = 4
MIN_CLAUSE_WORDS = 2  # a lone word left by a cut ("arms and legs") says too little
_STATEMENT = "I have {}"  # a concept read as a patient says it, the way clauses are written
_CLAUSE_BREAKS = frozenset(
    {",", ";", ":", ".", "!", "?", "(", ")", "and", "but", "plus", "also", "though", "although", "yet"}
)
# "I can't sleep" is a complaint, "I don't cough" a denial: an inability word negates only when the clause
# without it is closer to the concept.
_INABILITY = re.compile(r"\b(?:cannot|unable to|(?:ca|can|could|wo)n[’']?t)\b", re.I)
# Childish or slang words the embedder reads poorly, as the words a symptom name uses.
_LAY_WORDS = {
    "pee": "urinate",
    "wee": "urinate",
    "peeing": "urinating",
    "weeing": "urinating",
    "poo": "stool",
    "poop": "stool",
    "pooing": "passing stool",
    "tummy": "stomach",
    "puke": "vomit",
    "puking": "vomiting",
}
_LAY_WORD = re.compile(rf"\b(?:{'|'.join(_LAY_WORDS)})\b", re.I)
_SENTINEL = "finding"  # stands for the clause's finding, so that every cue in the clause is in its scope

# --- age, sex, duration, onset ----------------------------------------------------------------------------
_AGE = [
    re.compile(r"\b(\d{1,3})\s*[- ]?\s*(?:years?|yrs?)[- ]?old\b", re.I),
    re.compile(r"\b(\d{1,3})\s*(?:yo|y/o|y\.o\.|yrs?)(?=\W|$)", re.I),
    re.compile(r"\b(?:aged?|age:)\s*(\d{1,3})\b", re.I),
    re.compile(
        r"\b(?:i am|i'm|im|i’m)\s+(\d{1,3})\b(?!\s*(?:%|kg|lbs?|cm|days?|weeks?|months?|hours?|times))", re.I
    ),
]
_PATIENT_NOUN = r"(woman|man|female|male|lady|gentleman|girl|boy|guy)"
_SEX = [
    re.compile(rf"\b(?:i am|i'm|im|i’m)\s+(?:a|an)\s+(?:[\w-]+\s+){{0,3}}?{_PATIENT_NOUN}\b", re.I),
    re.compile(rf"\b(?:years?|yrs?)[- ]old\s+{_PATIENT_NOUN}\b", re.I),
    re.compile(rf"\b(?:yo|y/o)\s+{_PATIENT_NOUN}\b", re.I),
    re.compile(rf"^\W*(?:a|an|the)\s+(?:[\w-]+\s+){{0,2}}?{_PATIENT_NOUN}\b", re.I),
    re.compile(rf"\b{_PATIENT_NOUN}\s+(?:patient|aged|of\s+\d)", re.I),
    re.compile(r"\b(?:sex|gender)\s*:\s*(female|male|f|m)\b", re.I),
]
_FEMALE = {"woman", "female", "lady", "girl", "f"}
_FIRST_PERSON = re.compile(r"\b(?:i|i'm|i've|me|my|im|ive)\b", re.I)
_HE = re.compile(r"\b(?:he|him|his)\b", re.I)
_SHE = re.compile(r"\b(?:she|her|hers)\b", re.I)
_NUMBER_WORDS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "couple of": 2,
    "a couple of": 2,
    "few": 3,
    "a few": 3,
    "several": 3,
}
_UNIT_DAYS = {"hour": 1 / 24, "day": 1, "night": 1, "week": 7, "month": 30, "year": 365}
_COUNT = (
    r"(\d+(?:\.\d+)?|a couple of|couple of|a few|few|several|an?|one|two|three|four|five|six|seven|eight|"
    r"nine|ten|eleven|twelve)"
)
_DURATION = re.compile(
    rf"\b(?:for|over|in|since|past|last)?\s*(?:the\s+)?(?:past|last)?\s*{_COUNT}\s+(hour|day|night|week|month|year)s?"
    r"(?![- ]old)(?:\s+(?:now|ago))?\b",
    re.I,
)
_SINCE = {
    "yesterday": 1.0,
    "last night": 1.0,
    "this morning": 0.5,
    "today": 0.5,
    "last week": 7.0,
    "last month": 30.0,
    "last year": 365.0,
}
_SINCE_PHRASE = re.compile(
    r"\b(?:since|from)\s+(yesterday|last night|this morning|today|last week|last month|"
    r"last year)\b",
    re.I,
)
_SUDDEN = re.compile(
    r"\b(?:suddenly|sudden|abrupt(?:ly)?|all of a sudden|out of nowhere|out of the blue|"
    r"came on (?:fast|quickly))\b",
    re.I,
)
_GRADUAL = re.compile(
    r"\b(?:gradual(?:ly)?|slowly|little by little|over (?:several|a few|the) (?:days|weeks)|"
    r"came on slowly)\b",
    re.I,
)


class Contradiction(BaseModel):
    """The patient's sentences that state a finding and those that deny it (or a broader finding it is a kind
    of): the finding is then uncertain, and asked about again."""

    stated: list[str]
    denied: list[str]


class Finding(BaseModel):
    concept_id: str
    concept: str  # the concept's preferred name
    ids: list[str]  # every id the concept carries (merged vocabularies)
    status: FindingStatus
    text: str  # the span as written (its first mention)
    start: int  # character offsets in the input
    end: int
    contradiction: Contradiction | None = None  # why it is uncertain, when the text says it both ways


class Duration(BaseModel):
    text: str
    days: float | None = None


class OnsetPhrase(BaseModel):
    kind: Onset
    text: str


class Findings(BaseModel):
    findings: list[Finding] = Field(default_factory=list)
    age: int | None = None
    sex: Sex | None = None
    duration: Duration | None = None
    onset: OnsetPhrase | None = None
    not_understood: list[str] = Field(default_factory=list)

    def with_status(self, status: FindingStatus) -> list[Finding]:
        return [finding for finding in self.findings if finding.status == status]


@dataclass(frozen=True)
class Mention:
    start: int  # token offsets
    end: int
    concept: Concept


class FindingExtractor:
    """Findings of one text against one vocabulary; build once (the matcher holds every surface form)."""

    def __init__(
        self,
        vocabulary: Vocabulary,
        embedder: Embedder | None = None,
        *,
        lay_names: Iterable[str] | None = None,
        threshold: float = SEMANTIC_THRESHOLD,
    ) -> None:
        """`embedder` turns the matching by meaning on, against the concepts of `lay_names` (the names
        patients use, such as a disease table's symptoms; default: every concept with a plain symptom name or
        a DDXPlus question)."""
        self.vocabulary = vocabulary
        self.threshold = threshold
        self.nlp = spacy.blank("en")
        self.nlp.add_pipe("sentencizer")
        self.nlp.add_pipe("negex", name="negation", config={"neg_termset": _NEGATION.get_patterns()})
        self.nlp.add_pipe(
            "negex", name="hedging", config={"neg_termset": _HEDGING, "extension_name": "hedged"}
        )
        self.nlp.add_pipe(
            "negex", name="someone_else", config={"neg_termset": _SOMEONE_ELSE, "extension_name": "other"}
        )
        self.nlp.add_pipe(
            "negex", name="exclusion", config={"neg_termset": _EXCLUSION, "extension_name": "excluding"}
        )
        self.matcher = PhraseMatcher(self.nlp.vocab, attr="LOWER")
        surfaces = {key: c for key, c in vocabulary.surfaces().items() if key not in _EVERYDAY}
        for phrase, names in _LAY_PHRASES.items():
            if phrase not in surfaces and (concept := self._first_known(names)) is not None:
                surfaces[phrase] = concept
        self._concepts = list(surfaces.values())
        for number, doc in enumerate(self.nlp.tokenizer.pipe(surfaces)):
            self.matcher.add(str(number), [doc])
        self.meanings = None if embedder is None else MeaningIndex(vocabulary, embedder, lay_names)
        self._constructions = _with_sites(vocabulary)
        self._parents = {concept.id: concept.parents for concept in vocabulary.concepts}

    def extract(self, text: str) -> Findings:
        if not text or not text.strip():
            raise InvalidInputError("the text is empty: describe the complaint in a few words")
        if len(text) > MAX_TEXT_CHARS:
            raise InvalidInputError(
                f"the text has {len(text):,} characters; at most {MAX_TEXT_CHARS:,} can be read at once"
            )
        doc = self.nlp.get_pipe("sentencizer")(self.nlp.make_doc(text))
        mentions = _resolve(self._phrase_mentions(doc) + self._lay_mentions(doc))
        doc.ents = [Span(doc, m.start, m.end, label=LABEL) for m in mentions]
        doc = self._context(doc)
        findings = [
            _finding(mention.concept, span, _status(span, _rest_of_clause(text, span.end_char)))
            for mention, span in zip(mentions, doc.ents, strict=True)
            if not span._.other
        ]
        if self.meanings is not None:
            found = {finding.concept_id for finding in findings}
            meant = [finding for finding in self._meant(doc) if finding.concept_id not in found]
            findings = sorted(findings + meant, key=lambda finding: finding.start)
        covered = [(f.start, f.end) for f in findings] + _offsets(doc.ents)
        findings = self._contradicted(findings, doc)
        # one finding said twice the same way ("fluttering and thumping") is listed once
        unique = {(finding.concept_id, finding.status): finding for finding in reversed(findings)}
        return Findings(
            findings=sorted(unique.values(), key=lambda finding: finding.start),
            age=_age(text),
            sex=_sex(text),
            duration=_duration(text),
            onset=_onset(text),
            not_understood=_not_understood(doc, covered),
        )

    def _contradicted(self, findings: list[Finding], doc: Doc) -> list[Finding]:
        """`findings` (in text order) with each finding the text both states and denies made one uncertain
        finding that quotes both: the text cannot tell which is true, and no statement wins by coming last. A
        denial of a broader finding denies its kinds too ("I have a mild fever. I do not have a fever.": both
        are uncertain); a denial of a narrower one does not ("a fever but no mild fever"), nor one of what was
        not said ("I have chest pain. No other pain.")."""
        excluding = {span.start_char for span in doc.ents if span._.excluding}
        denials = [f for f in findings if f.status == "absent" and f.start not in excluding]
        conflicts: dict[str, tuple[list[Finding], list[Finding]]] = {}
        for stated in (f for f in findings if f.status == "present"):
            broader = set(reachable(stated.concept_id, self._parents))  # it and what it is a kind of
            for denied in (f for f in denials if f.concept_id in broader):
                for concept in (stated.concept_id, denied.concept_id):
                    yes, no = conflicts.setdefault(concept, ([], []))
                    yes.append(stated)
                    no.append(denied)
        settled: list[Finding] = []
        for finding in findings:
            said = conflicts.get(finding.concept_id)
            if said is None:
                settled.append(finding)
            elif all(f.concept_id != finding.concept_id for f in settled):  # the first mention stands for all
                contradiction = Contradiction(
                    stated=_sentences(doc, said[0]), denied=_sentences(doc, said[1])
                )
                settled.append(
                    finding.model_copy(update={"status": "uncertain", "contradiction": contradiction})
                )
        return settled

    def _context(self, doc: Doc) -> Doc:
        for name in CONTEXT_PIPES:
            doc = self.nlp.get_pipe(name)(doc)
        return doc

    def _meant(self, doc: Doc) -> list[Finding]:
        """Findings, by meaning, of the clauses whose mentions are less than half of their words ("I am so
        tired that I cannot do my usual activities" says more than "tired")."""
        assert self.meanings is not None
        clauses = [clause for clause in _clauses(doc) if _mentioned_share(clause) < 0.5]
        if not clauses:
            return []
        plain = [_LAY_WORD.sub(lambda m: _LAY_WORDS[m.group(0).lower()], clause.text) for clause in clauses]
        affirmed = [_INABILITY.sub(" ", text) for text in plain]
        texts = list(dict.fromkeys([*plain, *affirmed]))
        scores = self.meanings.scores(texts)
        row = {text: k for k, text in enumerate(texts)}
        findings = []
        for clause, text, without in zip(clauses, plain, affirmed, strict=True):
            as_written, without_inability = scores[row[text]], scores[row[without]]
            best = np.maximum(as_written, without_inability)
            index = int(np.argmax(best))
            if best[index] < self.threshold:
                continue
            cues = self._context(self._framed(text))
            if any(span._.other for span in cues.ents):
                continue
            negated = text == without or without_inability[index] > as_written[index] + NEGATION_MARGIN
            status: FindingStatus = (
                "uncertain"
                if any(span._.hedged for span in cues.ents)
                else "absent"
                if (negated and any(span._.negex for span in cues.ents)) or _RESOLVED.search(text)
                else "present"
            )
            findings.append(_finding(self.meanings.concepts[index], clause, status))
        return findings

    def _framed(self, clause: str) -> Doc:
        """The clause between two stand-ins for its finding, as the context pipes' entities."""
        doc = self.nlp.make_doc(f"{_SENTINEL} {clause} {_SENTINEL}")
        for token in doc:
            token.is_sent_start = token.i == 0
        doc.ents = [Span(doc, 0, 1, label=LABEL), Span(doc, len(doc) - 1, len(doc), label=LABEL)]
        return doc

    def _phrase_mentions(self, doc: Doc) -> list[Mention]:
        mentions = [
            Mention(start, end, self._concepts[int(self.nlp.vocab.strings[match_id])])
            for match_id, start, end in self.matcher(doc)
        ]
        return mentions + self._across_asides(doc)

    def _across_asides(self, doc: Doc) -> list[Mention]:
        """The mentions a parenthetical aside interrupts ("diffuse (widespread) muscle pain"): matched in the
        text without its asides, and mapped back to the tokens of the text as written."""
        asides = [(m.start(), m.end()) for m in _ASIDE.finditer(doc.text)]
        if not asides:
            return []
        bounds = [0, *(i for aside in asides for i in aside), len(doc.text)]
        kept = list(zip(bounds[::2], bounds[1::2], strict=True))
        plain = self.nlp.make_doc("".join(doc.text[start:end] for start, end in kept))
        origin = [i for start, end in kept for i in range(start, end)]  # plain character → written one
        mentions = []
        for match_id, start, end in self.matcher(plain):
            first, last = origin[plain[start].idx], origin[plain[end - 1].idx + len(plain[end - 1]) - 1]
            if last - first + 1 == plain[start:end].end_char - plain[start:end].start_char:
                continue  # no aside inside: the text as written has this mention already
            span = doc.char_span(first, last + 1, alignment_mode="expand")
            if span is not None:
                concept = self._concepts[int(self.nlp.vocab.strings[match_id])]
                mentions.append(Mention(span.start, span.end, concept))
        return mentions

    def _lay_mentions(self, doc: Doc) -> list[Mention]:
        mentions = []
        for sentence in doc.sents:
            words = [token.lower_ for token in sentence]
            for i, word in enumerate(words):
                for cues, parts, default in self._constructions:
                    if word in cues:
                        mentions.extend(self._body_finding(sentence, words, i, cues, parts, default))
                if word in _COUGH:
                    mentions.extend(self._coughed_up(sentence, words, i))
        return mentions

    def _body_finding(
        self,
        sentence: Span,
        words: list[str],
        i: int,
        cues: set[str],
        parts: dict[str, tuple[str, ...]],
        default: tuple[str, ...],
    ) -> list[Mention]:
        """The finding of the body part nearest to the cue word `words[i]` ("pain on the right side of my
        chest" is chest pain: a part "of" another part is the other part), and of the parts listed after it
        ("pain in my left tonsil and my throat"); else the `default` finding."""
        low, high = max(0, i - LAY_WINDOW), min(len(words), i + LAY_WINDOW + 1)
        # a part after the cue belongs to it only within its clause ("it doesn't hurt and my eyes aren't
        # red"); one before may be across ("my knee is swollen and it hurts")
        ahead = next((k for k in range(i + 1, high) if _ends_clause(words, k)), high)
        nearby = [j for j in range(low, ahead) if words[j] in parts and j != i]
        j = _part_of(words, min(nearby, key=lambda k: abs(k - i)), parts) if nearby else None
        if j is None:
            concept = self._first_known(default) if default else None
            return [Mention(sentence.start + i, sentence.start + i + 1, concept)] if concept else []
        pain = cues is _PAIN
        candidates = parts[words[j]]
        if pain and words[j] == "back" and j > 0 and words[j - 1] in {"lower", "low"}:
            candidates = _LOWER_BACK
        if pain and words[j] == "ribs" and _BELOW & set(words[max(0, j - 2) : j]):
            candidates = _BODY["stomach"]  # "under my ribs" is the upper abdomen
        # The cue starts the mention: a part named before it may carry two findings ("my calf is swollen and
        # it hurts"), and a denial between them is then before the mention ("my chest doesn't hurt").
        start, end = i, max(i, j) + 1
        if pain and words[j] == "chest":
            breath = [k for k in range(end, min(len(words), end + 7)) if words[k] in _BREATHING]
            if breath:
                end, candidates = breath[0] + 1, (*_PLEURITIC, *candidates)
        found = [(start, end, self._first_known(candidates))]
        k = j + 1
        while j > i and k < len(words) and (words[k] in _LIST_GLUE or words[k] in parts):
            if words[k] in parts:
                found.append((k, k + 1, self._first_known(parts[words[k]])))
            k += 1
        return [Mention(sentence.start + a, sentence.start + b, c) for a, b, c in found if c is not None]

    def _coughed_up(self, sentence: Span, words: list[str], i: int) -> list[Mention]:
        """What a cough brings up: blood (hemoptysis) or phlegm (a productive cough)."""
        window = range(max(0, i - 2), min(len(words), i + 6))
        for cues, names in ((_BLOOD_COUGHED, ("hemoptysis",)), (_SPUTUM, ("productive cough",))):
            near = [j for j in window if words[j] in cues]
            concept = self._first_known(names) if near else None
            if concept is not None:
                start, end = sentence.start + min(i, near[0]), sentence.start + max(i, near[-1]) + 1
                return [Mention(start, end, concept)]
        return []

    def _first_known(self, names: tuple[str, ...]) -> Concept | None:
        return next((c for name in names if (c := self.vocabulary.lookup(name)) is not None), None)


_ASIDE = re.compile(r"\s*\([^()]*\)")  # a parenthetical aside with the space before it


def _with_sites(vocabulary: Vocabulary) -> tuple[_Parts, ...]:
    """The lay constructions with the one-word body sites of the knowledge's site findings added to their
    parts, and preferred there ("pain in my tonsil" is DDXPlus' tonsil pain, a swollen ankle its ankle
    swelling)."""
    sites: dict[str, dict[str, tuple[str, ...]]] = {}
    prefixes = tuple(f"ddxplus:{name}{VALUE_SEPARATOR}" for name in SITE_FINDINGS)
    for concept in vocabulary.concepts:
        if any(i.startswith(prefixes) for i in concept.ids):
            for surface in concept.surfaces:
                words = surface.casefold().split()
                if len(words) == 2 and words[0].isalpha():
                    sites.setdefault(words[1], {}).setdefault(words[0], (surface,))
    return tuple(
        (cues, {**parts, **sites.get(site or "", {})}, default)
        for cues, parts, default, site in _LAY_CONSTRUCTIONS
    )


def _ends_clause(words: list[str], k: int) -> bool:
    """Whether `words[k]` ends a clause: punctuation or a conjunction, but not one between sides ("my right
    and left ear")."""
    if words[k] not in _CLAUSE_ENDS:
        return False
    sides = {"left", "right", "both"}
    return not (0 < k < len(words) - 1 and words[k - 1] in sides and words[k + 1] in sides)


def _part_of(words: list[str], j: int, parts: dict[str, tuple[str, ...]]) -> int | None:
    """`j`, or the part it is a region of ("the back of my head" → head); None when that is not a part the
    construction knows ("the back of the ankle" for pain words without an ankle)."""
    if j + 1 >= len(words) or words[j + 1] != "of":
        return j
    k = j + 2 + (j + 2 < len(words) and words[j + 2] in _DETERMINERS)
    return k if k < len(words) and words[k] in parts else None


def _resolve(mentions: list[Mention]) -> list[Mention]:
    """Longest first, then earliest; a mention overlapping a kept one is dropped."""
    kept: list[Mention] = []
    taken: set[int] = set()
    for mention in sorted(mentions, key=lambda m: (m.start - m.end, m.start)):
        tokens = set(range(mention.start, mention.end))
        if not tokens & taken:
            kept.append(mention)
            taken |= tokens
    return sorted(kept, key=lambda m: m.start)


class MeaningIndex:
    """Embeddings of the lay-named concepts' surface forms; a text's score for a concept is its best cosine
    with one of the concept's forms."""

    def __init__(self, vocabulary: Vocabulary, embedder: Embedder, lay_names: Iterable[str] | None) -> None:
        self.embedder = embedder
        if lay_names is None:
            named = {c.id: [] for c in vocabulary.concepts if any(i.startswith(_LAY_IDS) for i in c.ids)}
        else:
            named = {}
            for name in lay_names:
                if (concept := vocabulary.lookup(name)) is not None:
                    named.setdefault(concept.id, []).append(name)
        by_id = {concept.id: concept for concept in vocabulary.concepts}
        self.concepts = [by_id[concept_id] for concept_id in named]
        forms: list[str] = []
        starts: list[int] = []
        for concept in self.concepts:
            starts.append(len(forms))
            forms.extend(_forms(concept, named[concept.id]))
        self._starts = np.array(starts)
        self._vectors = embedder.encode([_STATEMENT.format(form) for form in forms])

    def scores(self, texts: list[str]) -> np.ndarray:
        """(len(texts), len(concepts)) best cosines."""
        return np.maximum.reduceat(self.embedder.encode(texts) @ self._vectors.T, self._starts, axis=1)


_LAY_IDS = ("symptom:", "ddxplus:")


def _forms(concept: Concept, lay_names: list[str]) -> list[str]:
    """The names a patient is likeliest to use for the concept: the lay names first, then the shortest."""
    short = sorted(
        (s for s in concept.surfaces if len(s.split()) <= MAX_FORM_WORDS and not s.endswith("?")),
        key=lambda s: len(s.split()),
    )
    forms = {surface.casefold(): surface for surface in [*lay_names, *short]}
    return list(forms.values())[:MAX_FORMS] or [concept.name]


def _clauses(doc: Doc) -> list[Span]:
    """Each sentence cut at punctuation and coordinating words ("it burns when I pee" stays whole)."""
    clauses = []
    for sentence in doc.sents:
        start = sentence.start
        for token in [*sentence, None]:
            end = sentence.end if token is None else token.i
            if token is not None and token.lower_ not in _CLAUSE_BREAKS:
                continue
            if sum(doc[i].is_alpha for i in range(start, end)) >= MIN_CLAUSE_WORDS:
                clauses.append(doc[start:end])
            start = end + 1
    return clauses


def _mentioned_share(clause: Span) -> float:
    words = [token for token in clause if token.is_alpha and not token.is_stop]
    return sum(1 for token in words if token.ent_type_) / len(words) if words else 1.0


def _sentences(doc: Doc, findings: list[Finding]) -> list[str]:
    """The sentences the findings are said in, as written, each once."""
    said = (next(s for s in doc.sents if s.start_char <= f.start < s.end_char) for f in findings)
    return list(dict.fromkeys(sentence.text.strip().rstrip(". ") for sentence in said))


def _offsets(spans: Iterable[Span]) -> list[tuple[int, int]]:
    return [(span.start_char, span.end_char) for span in spans]


def _status(span: Span, after: str) -> FindingStatus:
    """The status of a mention, `after` being the rest of its clause."""
    if span._.hedged:
        return "uncertain"
    return "absent" if span._.negex or _RESOLVED.search(after) else "present"


def _rest_of_clause(text: str, end: int) -> str:
    return _CLAUSE_SPLIT.split(text[end:], maxsplit=1)[0]


def _finding(concept: Concept, span: Span, status: FindingStatus) -> Finding:
    return Finding(
        concept_id=concept.id,
        concept=concept.name,
        ids=list(concept.ids),
        status=status,
        text=span.text,
        start=span.start_char,
        end=span.end_char,
    )


def _not_understood(doc: Doc, covered: list[tuple[int, int]]) -> list[str]:
    """Clauses that read like a complaint but contain no finding (`covered`: the findings' offsets)."""
    phrases: list[str] = []
    text = doc.text
    position = 0
    for piece in [*_CLAUSE_SPLIT.split(text)]:
        start = text.find(piece, position) if piece else position
        position = start + len(piece)
        if not piece.strip() or any(s < position and e > start for s, e in covered):
            continue
        if not _COMPLAINT_CUE.search(piece):
            continue
        phrase = _FILLER.sub("", piece.strip()).strip()
        if len(phrase) > 2 and not _NOT_COMPLAINT.search(phrase.lower()) and not _NEGATIVE_ONLY.match(phrase):
            phrases.append(phrase)
    return list(dict.fromkeys(phrases))


_NEGATIVE_ONLY = re.compile(r"^(?:no|not|nothing|none|never|don't|do not|doesn't)\b.{0,12}$", re.I)


def _age(text: str) -> int | None:
    for pattern in _AGE:
        for match in pattern.finditer(text):
            age = int(match.group(1))
            if 0 < age < 120:
                return age
    return None


def _sex(text: str) -> Sex | None:
    for pattern in _SEX:
        if match := pattern.search(text):
            return "female" if match.group(1).lower() in _FEMALE else "male"
    if _FIRST_PERSON.search(text):
        return None  # the patient speaks: "he"/"she" is someone else
    he, she = len(_HE.findall(text)), len(_SHE.findall(text))
    return "male" if he > she else "female" if she > he else None


def _duration(text: str) -> Duration | None:
    if match := _DURATION.search(text):
        count = match.group(1).lower()
        number = float(count) if count[0].isdigit() else float(_NUMBER_WORDS[count])
        return Duration(
            text=match.group(0).strip(), days=round(number * _UNIT_DAYS[match.group(2).lower()], 3)
        )
    if match := _SINCE_PHRASE.search(text):
        return Duration(text=match.group(0), days=_SINCE[match.group(1).lower()])
    return None


def _onset(text: str) -> OnsetPhrase | None:
    found = [
        (match.start(), kind, match.group(0))
        for kind, pattern in (("sudden", _SUDDEN), ("gradual", _GRADUAL))
        if (match := pattern.search(text))
    ]
    if not found:
        return None
    _, kind, phrase = min(found)
    return OnsetPhrase(kind=kind, text=phrase)
