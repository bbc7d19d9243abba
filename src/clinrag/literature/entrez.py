"""NCBI E-utilities requests and replies; the replies are parsed by Biopython's `Bio.Entrez`.

Biopython's own `Entrez.esearch` / `Entrez.efetch` are not used to make the HTTP calls, because (Biopython
1.88) each hard-codes the https://eutils.ncbi.nlm.nih.gov URL (there is no module-level base URL to point
elsewhere), opens it with urllib's `urlopen` without a timeout (only the process-wide socket default would
apply), retries after a blocking 15 s sleep, and reads email / tool / api_key from module globals shared by
the whole process. The requests are made instead by `clinrag.literature.http` (httpx, async, a hard per-call
timeout) with the parameters Biopython sends (db, term or id, tool, email, api_key) and NCBI's rate limit;
`Entrez.read` then parses the XML against the DTDs Biopython ships. This module is the only place that
knows E-utilities URLs and XML."""

from __future__ import annotations

import io
import re
from typing import Any

from Bio import Entrez

from clinrag.literature.article import PubMedArticle
from clinrag.literature.errors import MalformedResponseError, ServiceError

EUTILS_BASE = "https://eutils.ncbi.nlm.nih.gov/entrez/eutils"
_YEAR = re.compile(r"\b(1[89]\d\d|20\d\d)\b")


def eutils_url(base_url: str, utility: str) -> str:
    """The URL of one E-utility ("esearch", "efetch") under `base_url`."""
    return f"{base_url.rstrip('/')}/{utility}.fcgi"


def _read(body: bytes, what: str) -> Any:
    try:
        return Entrez.read(io.BytesIO(body), validate=False)
    except RuntimeError as exc:  # Bio.Entrez raises the service's own <ERROR> element as RuntimeError
        raise ServiceError(f"{what}: E-utilities error: {exc}") from exc
    except ValueError as exc:  # NotXMLError, CorruptedXMLError, or XML without a DTD
        raise MalformedResponseError(f"{what}: {exc}") from exc


def parse_esearch(body: bytes) -> list[str]:
    """The PMIDs of an esearch reply, in the service's order."""
    record = _read(body, "esearch")
    if not isinstance(record, dict) or "IdList" not in record:
        raise MalformedResponseError("esearch: the reply has no IdList")
    return [str(pmid) for pmid in record["IdList"]]


def parse_efetch(body: bytes) -> list[PubMedArticle]:
    """The journal articles of an efetch (db=pubmed, retmode=xml) reply; book records are skipped."""
    record = _read(body, "efetch")
    if not isinstance(record, dict) or "PubmedArticle" not in record:
        raise MalformedResponseError("efetch: the reply is not a PubmedArticleSet")
    try:
        return [_article(item["MedlineCitation"]) for item in record["PubmedArticle"]]
    except (KeyError, TypeError, AttributeError) as exc:
        raise MalformedResponseError(f"efetch: an article lacks {exc}") from exc


def _article(citation: dict[str, Any]) -> PubMedArticle:
    article = citation["Article"]
    sections = article.get("Abstract", {}).get("AbstractText", [])
    abstract = " ".join(
        f"{label}: {text}" if (label := getattr(text, "attributes", {}).get("Label")) else str(text)
        for text in sections
    )
    journal = article.get("Journal", {})
    return PubMedArticle(
        pmid=str(citation["PMID"]),
        title=str(article.get("ArticleTitle", "")),
        abstract=abstract,
        journal=str(journal["Title"]) if journal.get("Title") else None,
        year=_year(journal.get("JournalIssue", {}).get("PubDate", {}), article.get("ArticleDate", [])),
    )


def _year(pub_date: dict[str, Any], article_dates: list[dict[str, Any]]) -> str | None:
    """The publication year: PubDate's Year, else the first year in its MedlineDate ("1998 Dec-1999 Jan"),
    else the electronic ArticleDate's year."""
    if pub_date.get("Year"):
        return str(pub_date["Year"])
    if match := _YEAR.search(str(pub_date.get("MedlineDate", ""))):
        return match.group(1)
    for date in article_dates:
        if date.get("Year"):
            return str(date["Year"])
    return None
