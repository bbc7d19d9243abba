"""A PubMed article as a citation, and its `Evidence` form (shared by the live and the offline sources)."""

from __future__ import annotations

from dataclasses import dataclass

from clinrag.core.models import Evidence
from clinrag.literature.text import clean, snippet

PUBMED_URL = "https://pubmed.ncbi.nlm.nih.gov/{pmid}/"


@dataclass(frozen=True)
class PubMedArticle:
    """`title_is_question` marks a title that is not the article's own (PubMedQA records carry no title;
    their question, usually the title reworded, stands in for it)."""

    pmid: str
    title: str
    abstract: str
    journal: str | None = None
    year: str | None = None
    title_is_question: bool = False

    @property
    def url(self) -> str:
        return PUBMED_URL.format(pmid=self.pmid)

    def to_evidence(self, source: str, rank: int, query: str, score: float | None = None) -> Evidence:
        """A `citation` with id "pubmed:<pmid>" (the same article from any source has the same id); the text
        is the title and the abstract's first sentences (up to ~600 characters)."""
        title = clean(self.title)
        abstract = snippet(self.abstract)
        joiner = " " if title.endswith((".", "?", "!")) else ". "
        return Evidence(
            id=f"pubmed:{self.pmid}",
            kind="citation",
            text=f"{title}{joiner}{abstract}" if abstract else title,
            score=score,
            source=source,
            provenance={
                "pmid": self.pmid,
                "title": title,
                "title_is_question": self.title_is_question,
                "journal": self.journal,
                "year": self.year,
                "url": self.url,
                "snippet": abstract,
                "rank": rank,
                "query": query,
            },
        )
