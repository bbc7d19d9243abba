"""The offline literature source: BM25 over a PubMedQA-format file of real PubMed abstracts (JSON keyed by
PMID), so citations work with no network. PubMedQA records have no article title, no journal and no
conclusion section in their contexts: the question stands in for the title (flagged `title_is_question`),
the journal is unknown, and the conclusion (PubMedQA's long answer) is neither indexed nor cited."""

from __future__ import annotations

from pathlib import Path

from clinrag.core.models import Evidence
from clinrag.index.lexical import LexicalIndex
from clinrag.knowledge.readers.pubmedqa import read_pubmedqa
from clinrag.literature.article import PubMedArticle

LONG_ANSWER = "LONG_ANSWER"


class PubMedQAIndex:
    name = "pubmedqa"
    identity = None  # local: nothing to cache

    def __init__(self, articles: list[PubMedArticle], path: Path) -> None:
        self.path = Path(path)
        self.articles = {article.pmid: article for article in articles}
        self.index = LexicalIndex("en")
        self.index.add(
            [article.pmid for article in articles],
            [f"{article.title}\n{article.abstract}" for article in articles],
        )

    @classmethod
    def from_file(cls, path: str | Path) -> PubMedQAIndex:
        """Index every record of the file (read by the knowledge-base reader: strict UTF-8, broken records
        skipped, a file with none refused with `DataFormatError`)."""
        questions: dict[str, str] = {}
        years: dict[str, str | None] = {}
        sections: dict[str, list[str]] = {}
        for item in read_pubmedqa(path):
            meta = item.provenance
            pmid = str(meta["pmid"])
            questions[pmid] = str(meta["question"])
            years[pmid] = meta.get("year")
            section = meta.get("section")
            if section == LONG_ANSWER:
                continue
            sections.setdefault(pmid, []).append(f"{section}: {item.text}" if section else item.text)
        articles = [
            PubMedArticle(
                pmid=pmid,
                title=question,
                abstract=" ".join(sections.get(pmid, [])),
                year=years[pmid],
                title_is_question=True,
            )
            for pmid, question in questions.items()
        ]
        return cls(articles, Path(path))

    def __len__(self) -> int:
        return len(self.articles)

    async def search(self, query: str, limit: int) -> list[Evidence]:
        hits = self.index.search(query, limit)
        return [
            self.articles[hit.id].to_evidence(self.name, rank, query, score=hit.score)
            for rank, hit in enumerate(hits, 1)
        ]
