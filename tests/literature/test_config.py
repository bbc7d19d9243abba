"""Which sources a configuration turns on: offline unless the network is asked for."""

from __future__ import annotations

from pydantic import SecretStr

from clinrag.core.settings import Settings
from clinrag.literature.config import (
    LiteratureConfig,
    build_literature_search,
    build_sources,
    literature_config,
)


def names(config: LiteratureConfig) -> list[str]:
    return [source.name for source in build_sources(config)]


def test_default_is_offline_and_empty():
    assert names(LiteratureConfig()) == []


def test_offline_index_is_the_fallback(pubmedqa_path):
    assert names(LiteratureConfig(offline_path=pubmedqa_path)) == ["pubmedqa"]
    assert names(LiteratureConfig(offline_path=pubmedqa_path, pubmed_email="a@b.org")) == ["pubmed"]
    assert names(LiteratureConfig(offline_path=pubmedqa_path, wikipedia_enabled=True, offline="always")) == [
        "wikipedia",
        "pubmedqa",
    ]
    assert names(LiteratureConfig(offline_path=pubmedqa_path, offline="never")) == []


def test_pubmed_follows_the_email_unless_told():
    assert names(LiteratureConfig(pubmed_email="a@b.org")) == ["pubmed"]
    assert names(LiteratureConfig(pubmed_email="a@b.org", pubmed_enabled=False)) == []
    assert names(LiteratureConfig(pubmed_enabled=True)) == ["pubmed"]


def test_settings_reach_the_sources(tmp_path):
    config = LiteratureConfig(
        pubmed_email="a@b.org",
        pubmed_api_key=SecretStr("secret"),
        pubmed_base_url="http://127.0.0.1:9/eutils",
        wikipedia_enabled=True,
        wikipedia_base_url="http://127.0.0.1:9",
        timeout_s=3,
        max_retries=1,
        deadline_s=7,
        cache_path=tmp_path / "lit.sqlite",
    )
    search = build_literature_search(config)
    pubmed, wikipedia = search.sources
    assert (pubmed.base_url, pubmed.email, pubmed.policy.timeout_s, pubmed.policy.max_retries) == (
        "http://127.0.0.1:9/eutils",
        "a@b.org",
        3,
        1,
    )
    assert wikipedia.user_agent == "clinrag (a@b.org)" and wikipedia.base_url == "http://127.0.0.1:9"
    assert (
        search.deadline_s == 7 and search.cache is not None and search.cache.path == tmp_path / "lit.sqlite"
    )
    assert "secret" not in repr(config) and "secret" not in pubmed.identity


def test_clinrag_settings_configure_the_literature(tmp_path, pubmedqa_path):
    settings = Settings(home=tmp_path, literature_offline_path=pubmedqa_path, literature_deadline_s=4)
    search = build_literature_search(literature_config(settings))
    assert search.source_names == ["pubmedqa"] and search.deadline_s == 4
    assert search.cache.path == tmp_path / "literature_cache.sqlite"

    nothing = build_literature_search(literature_config(Settings(home=tmp_path / "bare")))
    assert nothing.sources == [] and nothing.cache is None
    assert not (tmp_path / "bare" / "literature_cache.sqlite").exists()
