"""The consultation's knowledge compiled once under the home: saved complete, loaded without reading the
sources again (no HPO, ICD-10 or DDXPlus parsing on the warm path), rebuilt when what it was built from
changes, and refused with a clear error when a saved part is malformed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import srsly

from clinrag.consult.compiled import COMPLETE, CompiledKnowledge, Extractors, fingerprint
from clinrag.consult.diseases import FORMAT_VERSION, DiseaseModel
from clinrag.consult.understand.rules import UnsupportedLanguageError
from clinrag.consult.understand.vocabulary import Vocabulary
from clinrag.core.errors import DataFormatError

pytestmark = pytest.mark.integration  # builds the packaged knowledge; a fresh process reads it back
FAKER = ["packaged:faker-diseases"]
TEXT = "I have a fever, a runny nose and a sore throat since yesterday. No cough."


@pytest.fixture(scope="module")
def compiled_home(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("compiled")
    CompiledKnowledge.open(FAKER, directory, None)
    return directory


def _folders(directory: Path) -> list[Path]:
    return sorted(directory.glob("compiled-*"))


def test_compiled_once_and_loaded_as_built(compiled_home: Path) -> None:
    (folder,) = _folders(compiled_home)
    assert (folder / COMPLETE).is_file() and oct(folder.stat().st_mode & 0o777) == "0o700"
    built = CompiledKnowledge.build(FAKER, None)
    loaded = CompiledKnowledge.open(FAKER, compiled_home, None)
    assert _folders(compiled_home) == [folder]
    assert len(loaded.model.diseases) == len(built.model.diseases) == 158
    assert loaded.vocabulary.concepts == built.vocabulary.concepts
    assert loaded.vocabulary.index == built.vocabulary.index
    as_built = Extractors(built, None)("en").extract(TEXT)
    as_loaded = Extractors(loaded, None)("en").extract(TEXT)
    assert as_loaded == as_built
    assert {f.concept: f.status for f in as_loaded.findings} == {
        "Fever": "present",
        "Rhinorrhea": "present",
        "Pharyngalgia": "present",
        "Cough": "absent",
    }


def test_the_warm_path_parses_no_source(compiled_home: Path) -> None:
    """In a fresh process, loading the compilation and answering imports neither pyhpo's OBO parser nor
    simple_icd_10_cm (which parses its XML at import) and reads no source."""
    script = (
        "import sys; from pathlib import Path\n"
        "from clinrag.consult.compiled import CompiledKnowledge, Extractors\n"
        f"k = CompiledKnowledge.open({FAKER!r}, Path({str(compiled_home)!r}), None)\n"
        f"print(len(Extractors(k, None)('en').extract({TEXT!r}).findings))\n"
        "print(sorted(m for m in sys.modules if m.startswith(('pyhpo.parser', 'simple_icd_10_cm'))))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == ["4", "[]"]


def test_a_change_of_source_is_compiled_anew(compiled_home: Path, data_dir: Path, tmp_path: Path) -> None:
    ddxplus = tmp_path / "ddxplus"
    shutil.copytree(data_dir / "ddxplus", ddxplus)
    spec = [f"ddxplus:{ddxplus}"]
    before = fingerprint(spec, None)
    conditions = ddxplus / "release_conditions.json"
    os.utime(conditions, ns=(conditions.stat().st_atime_ns, conditions.stat().st_mtime_ns + 10**9))
    assert fingerprint(spec, None) != before


def test_a_malformed_saved_part_is_a_clear_error(tmp_path: Path) -> None:
    saved = tmp_path / "diseases.msgpack"
    srsly.write_msgpack(saved, {"format": FORMAT_VERSION - 1, "specs": FAKER, "diseases": []})
    with pytest.raises(DataFormatError, match="delete it to rebuild"):
        DiseaseModel.load(saved)
    saved.write_bytes(b"{not msgpack")
    with pytest.raises(DataFormatError):
        DiseaseModel.load(saved)
    vocabulary = tmp_path / "vocabulary.msgpack"  # saved by a Concept of other fields
    srsly.write_msgpack(vocabulary, {"fields": ["id", "name"], "concepts": [["hpo:HP:0001945", "Fever"]]})
    with pytest.raises(DataFormatError, match="fields"):
        Vocabulary.load(vocabulary)


@pytest.mark.parametrize(
    ("language", "text", "expected"),
    [
        (
            "fr",
            "J'ai 45 ans, de la fièvre et une toux depuis trois jours. J'ai mal à la gorge mais pas de "
            "diarrhée. Ma femme a des vomissements.",
            {"Fièvre": "present", "Toux": "present", "Mal de gorge": "present", "Diarrhée": "absent"},
        ),
        (
            "zh",
            "我45岁，发烧三天了，咳嗽，喉咙痛，没有腹泻。我妈妈有呕吐。",
            {"发热": "present", "咳嗽": "present", "咽痛": "present", "腹泻": "absent"},
        ),
    ],
)
def test_french_and_chinese_words_reach_the_same_concepts(
    compiled_home: Path, language: str, text: str, expected: dict[str, str]
) -> None:
    """The packaged table names its symptoms in French and Chinese too: text in either reaches the concepts
    the English names do, with that language's ConText rules (a relative's vomiting is not the patient's)."""
    compiled = CompiledKnowledge.open(FAKER, compiled_home, None)
    found = Extractors(compiled, None)(language).extract(text)
    assert {f.concept: f.status for f in found.findings} == expected
    english = Extractors(compiled, None)("en").extract(
        "I have a fever, a cough and a sore throat. No diarrhea."
    )
    assert {f.concept_id for f in found.findings} == {f.concept_id for f in english.findings}
    assert found.age == 45 and found.duration is not None and found.duration.days == 3.0
    assert (compiled.folder / f"pipeline-{language}").is_dir()  # compiled once, kept with the rest


def test_a_language_without_rules_is_refused_by_the_consultant(compiled_home: Path) -> None:
    compiled = CompiledKnowledge.open(FAKER, compiled_home, None)
    with pytest.raises(UnsupportedLanguageError, match="'de'"):
        Extractors(compiled, None)("de")
