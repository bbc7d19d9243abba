"""Literature configuration and the facade built from it.

clinrag is offline by default: PubMed is queried only when an email is set (NCBI's etiquette requires one)
or `pubmed_enabled` is true, Wikipedia only when `wikipedia_enabled` is true. The offline PubMedQA index is
used when `offline_path` is set and no network source is on (`offline="fallback"`), always, or never."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from clinrag.core.settings import Settings
from clinrag.literature.cache import LiteratureCache
from clinrag.literature.entrez import EUTILS_BASE
from clinrag.literature.http import HttpPolicy
from clinrag.literature.offline import PubMedQAIndex
from clinrag.literature.pubmed import PubMedSource
from clinrag.literature.search import LiteratureSearch
from clinrag.literature.source import LiteratureSource
from clinrag.literature.wikipedia import WIKIPEDIA_BASE, WikipediaSource


class LiteratureConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pubmed_enabled: bool | None = None  # None: on exactly when pubmed_email is set
    pubmed_email: str | None = None
    pubmed_api_key: SecretStr | None = None
    pubmed_tool: str = "clinrag"
    pubmed_base_url: str = EUTILS_BASE
    wikipedia_enabled: bool = False
    wikipedia_base_url: str = WIKIPEDIA_BASE
    wikipedia_language: str = "en"
    offline_path: Path | None = None  # a PubMedQA-format JSON file (e.g. pubmedqa/test_set.json)
    offline: Literal["fallback", "always", "never"] = "fallback"
    timeout_s: float = Field(default=10.0, gt=0)  # per HTTP call, whole reply included
    max_retries: int = Field(default=2, ge=0)
    backoff_s: float = Field(default=0.5, ge=0)
    deadline_s: float = Field(default=20.0, gt=0)  # for a whole search, all sources together
    cache_path: Path | None = None  # None: no cache
    cache_ttl_s: float = Field(default=7 * 24 * 3600, gt=0)

    @property
    def pubmed_on(self) -> bool:
        return self.pubmed_enabled if self.pubmed_enabled is not None else bool(self.pubmed_email)

    @property
    def user_agent(self) -> str:
        """Wikimedia and NCBI ask clients to identify themselves and give a contact."""
        return f"{self.pubmed_tool} ({self.pubmed_email})" if self.pubmed_email else self.pubmed_tool


def literature_config(settings: Settings) -> LiteratureConfig:
    """The literature configuration of clinrag's settings (CLINRAG_PUBMED_EMAIL, CLINRAG_WIKIPEDIA_ENABLED,
    CLINRAG_LITERATURE_OFFLINE_PATH, …), cached under the clinrag home."""
    return LiteratureConfig(
        pubmed_email=settings.pubmed_email,
        pubmed_api_key=settings.pubmed_api_key,
        wikipedia_enabled=settings.wikipedia_enabled,
        offline_path=settings.literature_offline_path,
        timeout_s=settings.literature_timeout_s,
        deadline_s=settings.literature_deadline_s,
        cache_path=settings.literature_cache_path,
    )


def build_sources(config: LiteratureConfig) -> list[LiteratureSource]:
    policy = HttpPolicy(
        timeout_s=config.timeout_s, max_retries=config.max_retries, backoff_s=config.backoff_s
    )
    sources: list[LiteratureSource] = []
    if config.pubmed_on:
        sources.append(
            PubMedSource(
                email=config.pubmed_email,
                api_key=config.pubmed_api_key,
                tool=config.pubmed_tool,
                base_url=config.pubmed_base_url,
                policy=policy,
                user_agent=config.user_agent,
            )
        )
    if config.wikipedia_enabled:
        sources.append(
            WikipediaSource(
                base_url=config.wikipedia_base_url,
                language=config.wikipedia_language,
                policy=policy,
                user_agent=config.user_agent,
            )
        )
    wants_offline = config.offline == "always" or (config.offline == "fallback" and not sources)
    if config.offline_path is not None and wants_offline:
        sources.append(PubMedQAIndex.from_file(config.offline_path))
    return sources


def build_literature_search(config: LiteratureConfig) -> LiteratureSearch:
    """The facade over the configured sources (possibly none: every search then returns no citations)."""
    sources = build_sources(config)
    # no file is created for a search that has nothing to cache
    cache = LiteratureCache(config.cache_path, config.cache_ttl_s) if config.cache_path and sources else None
    return LiteratureSearch(sources, deadline_s=config.deadline_s, cache=cache)
