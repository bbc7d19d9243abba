"""The finding rules are data (`resources/<language>/`): every rule's target resolves in the vocabulary it is
written for, every file reads, and a language without rules is refused rather than parsed as English."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from faker_healthcare.disease_correlations import DISEASE_CORRELATIONS

from clinrag.consult.understand import rules as rules_module
from clinrag.consult.understand.rules import (
    UnsupportedLanguageError,
    languages,
    load_rules,
    pipe_config,
    rules_for,
)
from clinrag.consult.understand.vocabulary import Vocabulary
from clinrag.core.errors import DataFormatError
from clinrag.core.settings import Settings
from clinrag.methods.base import MethodContext
from clinrag.methods.consult import ConsultConfig, build_consultant


@pytest.fixture(scope="module")
def full_vocabulary(data_dir: Path) -> Vocabulary:
    """HPO, DDXPlus' evidences and the packaged disease table's symptoms: the vocabularies rules target."""
    lay = sorted({name for disease in DISEASE_CORRELATIONS.values() for name in disease["symptoms"]})
    return (
        Vocabulary.from_hpo()
        .merge(Vocabulary.of_source(f"ddxplus:{data_dir / 'ddxplus'}"))
        .merge(Vocabulary.of_source("packaged:faker-diseases", lay))
    )


def test_every_rule_target_resolves(full_vocabulary: Vocabulary) -> None:
    """A misspelt target would never fire: each name a rule gives must be a finding of the vocabulary."""
    targets = load_rules("en").targets()
    assert len(targets) > 200
    unknown = [
        (where, name) for where, names in targets for name in names if full_vocabulary.lookup(name) is None
    ]
    assert unknown == []


@pytest.mark.parametrize("language", ["fr", "zh"])
def test_every_french_and_chinese_rule_target_resolves(consult_home: Path, language: str) -> None:
    """A French or Chinese rule names its finding by the name the default knowledge gives it in that language
    or by HPO id: each must be a finding of that language's vocabulary (an HPO finding without a name in
    the language would never be read)."""
    compiled = build_consultant(MethodContext(settings=Settings(home=consult_home)), ConsultConfig())
    vocabulary, _ = compiled.extractors.compiled.pipeline(language)
    targets = load_rules(language).targets()
    assert len(targets) > 500
    unknown = sorted(
        {name for _, names in targets for name in names if vocabulary.first_known((name,)) is None}
    )
    assert unknown == []


def test_rules_are_one_record_shape_per_file() -> None:
    folder = rules_module.RESOURCES / "en"
    for path in folder.glob("*.json"):
        records = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(records, list):
            shapes = {
                tuple(sorted(k for k in record if k not in {"default", "site", "refine"}))
                for record in records
            }
            assert len(shapes) == 1, (path.name, shapes)
    cues = load_rules("en").termsets
    assert "no longer" in cues["NEGATED_EXISTENCE"]["preceding_negations"]  # ours, beside negspacy's
    assert "denies" in cues["NEGATED_EXISTENCE"]["preceding_negations"]  # negspacy's en_clinical
    assert "and now" in cues["FAMILY"]["termination"]  # an ANY termination ends every category


def test_a_language_without_rules_is_refused() -> None:
    assert "en" in languages()
    with pytest.raises(UnsupportedLanguageError, match="no finding rules for language 'de'"):
        load_rules("de")


def test_malformed_rules_are_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "xx"
    folder.mkdir()
    for path in (rules_module.RESOURCES / "en").glob("*.json"):
        (folder / path.name).write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    (folder / "nearby.json").write_text('[{"cues": "no such set", "before": 1, "after": 1, "words": "x"}]')
    monkeypatch.setattr(rules_module, "RESOURCES", tmp_path)
    with pytest.raises(DataFormatError, match="malformed finding rules"):
        load_rules("xx")
    (folder / "nearby.json").write_text("[{")
    with pytest.raises(DataFormatError, match="cannot read"):
        load_rules.__wrapped__("xx")


def test_a_pipe_is_given_its_rules_by_its_config() -> None:
    rules = load_rules("fr")
    config = pipe_config(rules)
    assert config == {"language": "fr", "rules": rules.fingerprint}
    assert rules_for(config["language"], config["rules"]) is rules
    with pytest.raises(DataFormatError, match="delete the saved pipeline"):
        rules_for("fr", "0" * 16)
