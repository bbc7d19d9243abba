"""Each language's rules on a tiny handmade vocabulary (spaCy's habit of testing on a blank pipeline): four
findings named in English, French and Chinese, read from a sentence in each language with its own negation,
a relative's finding and a duration, with no knowledge source and no shared data."""

from __future__ import annotations

import pytest

from clinrag.consult.understand.findings import FindingExtractor
from clinrag.consult.understand.vocabulary import Vocabulary
from clinrag.graph.importers.records import SourceTraits

NAMES = {  # English name → (French names, Chinese names)
    "fever": (["fièvre"], ["发烧", "发热"]),
    "cough": (["toux", "tousse"], ["咳嗽"]),
    "sore throat": (["mal de gorge"], ["嗓子疼", "咽痛"]),
    "diarrhea": (["diarrhée"], ["腹泻", "拉肚子"]),
    "vomiting": (["vomissements", "vomit"], ["呕吐"]),
}
SENTENCES = {
    "en": "I have had a fever and a cough for three days, and a sore throat. No diarrhea. "
    "My wife is vomiting.",
    "fr": "J'ai de la fièvre et je tousse depuis trois jours, et mal de gorge. Pas de diarrhée. "
    "Ma femme vomit.",
    "zh": "我发烧、咳嗽三天了，嗓子疼，没有拉肚子。我老婆在呕吐。",
}


@pytest.fixture(scope="module")
def english() -> Vocabulary:
    return Vocabulary.from_names(NAMES, "handmade", SourceTraits(lay=True, askable=True))


def _vocabulary(english: Vocabulary, language: str) -> Vocabulary:
    if language == "en":
        return english
    side = 0 if language == "fr" else 1
    return english.in_language({english.lookup(name).id: NAMES[name][side] for name in NAMES})


@pytest.mark.parametrize("language", ["en", "fr", "zh"])
def test_each_language_reads_its_own_negation_relatives_and_duration(
    english: Vocabulary, language: str
) -> None:
    vocabulary = _vocabulary(english, language)
    found = FindingExtractor(vocabulary, language=language).extract(SENTENCES[language])
    ids = {english.lookup(name).id: name for name in NAMES}
    read = {ids[f.concept_id]: f.status for f in found.findings}
    assert read == {"fever": "present", "cough": "present", "sore throat": "present", "diarrhea": "absent"}
    assert found.duration is not None and found.duration.days == 3.0
