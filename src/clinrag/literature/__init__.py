"""Literature citations for evidence packs: PubMed (E-utilities, parsed by Biopython), Wikipedia summaries,
and an offline BM25 index over PubMedQA abstracts — cached, best effort, never blocking past a deadline."""

from clinrag.literature.cache import LiteratureCache
from clinrag.literature.config import LiteratureConfig, build_literature_search, build_sources
from clinrag.literature.errors import FailureKind, LiteratureError
from clinrag.literature.models import LiteratureResult, SourceFailure, SourceRun
from clinrag.literature.offline import PubMedQAIndex
from clinrag.literature.pubmed import PubMedSource
from clinrag.literature.search import LiteratureSearch
from clinrag.literature.wikipedia import WikipediaSource

__all__ = [
    "FailureKind",
    "LiteratureCache",
    "LiteratureConfig",
    "LiteratureError",
    "LiteratureResult",
    "LiteratureSearch",
    "PubMedQAIndex",
    "PubMedSource",
    "SourceFailure",
    "SourceRun",
    "WikipediaSource",
    "build_literature_search",
    "build_sources",
]
