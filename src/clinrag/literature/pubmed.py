"""PubMed: esearch for the PMIDs of a query, then efetch of those records as XML, as citations."""

from __future__ import annotations

import asyncio

import httpx
from pydantic import SecretStr

from clinrag.core.models import Evidence
from clinrag.literature.entrez import EUTILS_BASE, eutils_url, parse_efetch, parse_esearch
from clinrag.literature.http import HttpPolicy, RequestSpacing, get_bytes

# NCBI's limits: 3 requests per second without an API key, 10 with one (Biopython waits 0.37 s / 0.1 s).
INTERVAL_S = 0.37
INTERVAL_WITH_KEY_S = 0.1


class PubMedSource:
    """E-utilities etiquette: every request names `tool` and `email` (NCBI contacts that address before
    blocking a misbehaving client) and, when given, `api_key`; requests are spaced to NCBI's rate limit."""

    name = "pubmed"

    def __init__(
        self,
        *,
        email: str | None = None,
        api_key: SecretStr | None = None,
        tool: str = "clinrag",
        base_url: str = EUTILS_BASE,
        policy: HttpPolicy | None = None,
        user_agent: str = "clinrag",
    ) -> None:
        self.email = email
        self.api_key = api_key
        self.tool = tool
        self.base_url = base_url
        self.policy = policy or HttpPolicy()
        self.user_agent = user_agent
        self.identity = f"pubmed|{base_url}|sort=relevance"
        interval = INTERVAL_WITH_KEY_S if api_key else INTERVAL_S
        self._spacing = RequestSpacing(f"eutils|{base_url}", interval)

    def _params(self, **params: str | int) -> dict[str, str | int]:
        etiquette: dict[str, str | int] = {"tool": self.tool}
        if self.email:
            etiquette["email"] = self.email
        if self.api_key is not None:
            etiquette["api_key"] = self.api_key.get_secret_value()
        return {"db": "pubmed", **params, **etiquette}

    async def search(self, query: str, limit: int) -> list[Evidence]:
        async with httpx.AsyncClient(
            timeout=self.policy.timeout_s, headers={"User-Agent": self.user_agent}
        ) as client:
            found = await get_bytes(
                client,
                eutils_url(self.base_url, "esearch"),
                self._params(term=query, retmax=limit, sort="relevance", retmode="xml"),
                self.policy,
                self._spacing,
            )
            pmids = (await asyncio.to_thread(parse_esearch, found))[:limit]
            if not pmids:
                return []
            fetched = await get_bytes(
                client,
                eutils_url(self.base_url, "efetch"),
                self._params(id=",".join(pmids), retmode="xml", rettype="abstract"),
                self.policy,
                self._spacing,
            )
            articles = {a.pmid: a for a in await asyncio.to_thread(parse_efetch, fetched)}
        ranked = [articles[pmid] for pmid in pmids if pmid in articles]  # esearch's relevance order
        return [article.to_evidence(self.name, rank, query) for rank, article in enumerate(ranked, 1)]
