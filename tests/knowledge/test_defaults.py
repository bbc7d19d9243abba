"""The knowledge base a consultation opens when the user names none, or names sources: built once into the
clinrag home, then reused. The packaged default is narrowed to one packaged source here so the test builds
in seconds; the full default (ICD-10-CM, faker-healthcare, HPO) is the same code over more records."""

from pathlib import Path

from clinrag.core.settings import load_settings
from clinrag.knowledge import defaults
from clinrag.knowledge.base import INFO_FILE
from clinrag.knowledge.defaults import default_knowledge_base_path, open_knowledge_base


def test_packaged_default_is_built_once_then_reused(
    monkeypatch, minilm_embedder, isolated_home: Path
) -> None:
    monkeypatch.setattr(defaults, "PACKAGED_DEFAULT", ("packaged:faker-diseases",))
    settings = load_settings()
    kb = open_knowledge_base(settings, minilm_embedder, progress=False)
    directory = default_knowledge_base_path(settings)
    assert directory.parent == isolated_home and (directory / INFO_FILE).is_file()
    assert kb.stats()["by_source"] == {"faker-diseases": 474}  # 158 diseases × symptoms, drugs, specialty
    assert all(statement.tags for statement in kb.statements.values())  # chapters from the ICD-10 codes
    built_at = (directory / INFO_FILE).stat().st_mtime_ns
    again = open_knowledge_base(settings, minilm_embedder, progress=False)
    assert (directory / INFO_FILE).stat().st_mtime_ns == built_at and set(again.statements) == set(
        kb.statements
    )


def test_named_sources_get_their_own_base_and_a_configured_base_wins(
    monkeypatch, data_dir: Path, minilm_embedder, isolated_home: Path
) -> None:
    source = data_dir / "ddxplus" / "release_conditions.json"
    settings = load_settings(kb_rewrite=False)
    kb = open_knowledge_base(settings, minilm_embedder, sources=[str(source)], progress=False)
    built = [p for p in isolated_home.iterdir() if p.name.startswith("kb-sources-")]
    assert len(built) == 1 and kb.stats()["statements"] == 49  # raw form: one text per condition
    configured = load_settings(kb_path=built[0])
    monkeypatch.setattr(defaults, "PACKAGED_DEFAULT", ("packaged:no-such-source",))  # must not be read
    assert set(open_knowledge_base(configured, minilm_embedder).statements) == set(kb.statements)
