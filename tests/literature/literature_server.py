"""A test double for NCBI E-utilities (esearch, efetch) and the Wikipedia REST API, on 127.0.0.1.

The real services cannot be reached from CI (no network), so this real HTTP server speaks their documented
formats — the esearch eSearchResult XML, the efetch PubmedArticleSet XML (with the DOCTYPE NCBI sends,
so Biopython parses it against its bundled DTD), the core REST title search and the page-summary JSON —
and the client side (httpx, timeouts, retries, Biopython parsing, the cache) runs for real over loopback.

Its content is built from the real PubMedQA records: the PMIDs, the questions (served as article titles,
as PubMedQA questions reword the titles), the abstract sections with their labels and the years. Two things
are not in that file and are therefore the double's own: the journal name (`JOURNAL`), and the Wikipedia
pages, which are titled by the records' MeSH headings and whose extract is the first abstract paragraph of
the first record indexed under that heading. Faults (status, delay, body) can be set per route."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit
from xml.sax.saxutils import escape, quoteattr

JOURNAL = "Test Double Journal of Medicine"
EUTILS_PATH = "/entrez/eutils"
ESEARCH_HEAD = (
    '<?xml version="1.0" encoding="UTF-8" ?>\n'
    '<!DOCTYPE eSearchResult PUBLIC "-//NLM//DTD esearch 20060628//EN" '
    '"https://eutils.ncbi.nlm.nih.gov/eutils/dtd/20060628/esearch.dtd">\n'
)
EFETCH_HEAD = (
    '<?xml version="1.0" ?>\n'
    '<!DOCTYPE PubmedArticleSet PUBLIC "-//NLM//DTD PubMedArticle, 1st January 2025//EN" '
    '"https://dtd.nlm.nih.gov/ncbi/pubmed/out/pubmed_250101.dtd">\n'
)


@dataclass
class Fault:
    """Served instead of (or before) the normal reply on one route: a delay, then this status and body;
    with `trickle_s`, the body is sent in 10 pieces with that pause before each (a slow but live reply)."""

    status: int | None = None
    body: bytes | None = None
    delay_s: float = 0.0
    trickle_s: float = 0.0


@dataclass(frozen=True)
class Request:
    route: str  # "esearch", "efetch", "title", "summary" or "unknown"
    query: dict[str, list[str]]
    headers: dict[str, str]
    at: float  # time.monotonic() on arrival


def record_text(record: dict[str, Any]) -> str:
    return " ".join([record["QUESTION"], *record["CONTEXTS"]])


def wikipedia_pages(records: dict[str, dict[str, Any]]) -> dict[str, str]:
    """MeSH heading -> extract (the first paragraph of the first record indexed under that heading)."""
    pages: dict[str, str] = {}
    for record in records.values():
        for heading in record.get("MESHES", []):
            pages.setdefault(heading, record["CONTEXTS"][0])
    return pages


class LiteratureServer:
    def __init__(self, records: dict[str, dict[str, Any]]) -> None:
        self.records = records
        self.pages = wikipedia_pages(records)
        self.requests: list[Request] = []
        self.faults: dict[str, Fault] = {}  # route ("esearch", "efetch", "title", "summary") -> fault
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = urlsplit(self.path)
                query = parse_qs(url.query)
                route, reply = server.route(url.path, query)
                with server._lock:
                    server.requests.append(Request(route, query, dict(self.headers), time.monotonic()))
                    fault = server.faults.get(route)
                status, content_type, body = reply
                trickle = fault.trickle_s if fault is not None else 0.0
                if fault is not None:
                    time.sleep(fault.delay_s)
                    status = fault.status or status
                    body = fault.body if fault.body is not None else body
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", content_type)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.flush()
                    step = max(1, -(-len(body) // 10))
                    for start in range(0, len(body), step):
                        time.sleep(trickle)
                        self.wfile.write(body[start : start + step])
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout tests)

            def log_message(self, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.origin = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self.eutils_url = self.origin + EUTILS_PATH
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def count(self, route: str) -> int:
        with self._lock:
            return sum(1 for request in self.requests if request.route == route)

    def of(self, route: str) -> list[Request]:
        with self._lock:
            return [request for request in self.requests if request.route == route]

    # --- routing -------------------------------------------------------------------------------------

    def route(self, path: str, query: dict[str, list[str]]) -> tuple[str, tuple[int, str, bytes]]:
        if path == f"{EUTILS_PATH}/esearch.fcgi":
            return "esearch", (200, "text/xml; charset=UTF-8", self.esearch(query))
        if path == f"{EUTILS_PATH}/efetch.fcgi":
            return "efetch", (200, "text/xml; charset=UTF-8", self.efetch(query))
        if path == "/w/rest.php/v1/search/title":
            return "title", (200, "application/json", self.title_search(query))
        if path.startswith("/api/rest_v1/page/summary/"):
            return "summary", self.summary(unquote(path.rsplit("/", 1)[1]))
        return "unknown", (404, "text/plain", b"not found")

    # --- E-utilities ---------------------------------------------------------------------------------

    def matching_pmids(self, term: str) -> list[str]:
        """PMIDs of the records containing every word of `term` (case-insensitive), in file order."""
        words = term.lower().split()
        return [
            pmid for pmid, rec in self.records.items() if all(w in record_text(rec).lower() for w in words)
        ]

    def esearch(self, query: dict[str, list[str]]) -> bytes:
        pmids = self.matching_pmids(query["term"][0])
        shown = pmids[: int(query.get("retmax", ["20"])[0])]
        ids = "".join(f"<Id>{pmid}</Id>" for pmid in shown)
        return (
            f"{ESEARCH_HEAD}<eSearchResult><Count>{len(pmids)}</Count><RetMax>{len(shown)}</RetMax>"
            f"<RetStart>0</RetStart><IdList>{ids}</IdList><TranslationSet/>"
            f"<QueryTranslation>{escape(query['term'][0])}</QueryTranslation></eSearchResult>\n"
        ).encode()

    def efetch(self, query: dict[str, list[str]]) -> bytes:
        pmids = query["id"][0].split(",")
        articles = "".join(self.article_xml(pmid) for pmid in pmids if pmid in self.records)
        return f"{EFETCH_HEAD}<PubmedArticleSet>{articles}</PubmedArticleSet>\n".encode()

    def article_xml(self, pmid: str) -> str:
        record = self.records[pmid]
        labels = record.get("LABELS", [])
        sections = "".join(
            f"<AbstractText Label={quoteattr(labels[i])}>{escape(text)}</AbstractText>"
            if i < len(labels)
            else f"<AbstractText>{escape(text)}</AbstractText>"
            for i, text in enumerate(record["CONTEXTS"])
        )
        year = f"<Year>{record['YEAR']}</Year>" if record.get("YEAR") else ""
        return (
            '<PubmedArticle><MedlineCitation Status="MEDLINE" Owner="NLM">'
            f'<PMID Version="1">{pmid}</PMID><Article PubModel="Print"><Journal>'
            f'<JournalIssue CitedMedium="Print"><PubDate>{year}</PubDate></JournalIssue>'
            f"<Title>{escape(JOURNAL)}</Title></Journal>"
            f"<ArticleTitle>{escape(record['QUESTION'])}</ArticleTitle>"
            f"<Abstract>{sections}</Abstract><Language>eng</Language></Article></MedlineCitation>"
            '<PubmedData><ArticleIdList><ArticleId IdType="pubmed">'
            f"{pmid}</ArticleId></ArticleIdList></PubmedData></PubmedArticle>"
        )

    # --- Wikipedia -----------------------------------------------------------------------------------

    def matching_titles(self, q: str) -> list[str]:
        return [title for title in self.pages if q.lower() in title.lower()]

    def title_search(self, query: dict[str, list[str]]) -> bytes:
        limit = int(query.get("limit", ["10"])[0])
        pages = [
            {"id": i, "key": title.replace(" ", "_"), "title": title, "excerpt": title, "description": None}
            for i, title in enumerate(self.matching_titles(query["q"][0])[:limit], 1)
        ]
        return json.dumps({"pages": pages}).encode()

    def summary(self, key: str) -> tuple[int, str, bytes]:
        title = key.replace("_", " ")
        if title not in self.pages:
            return 404, "application/problem+json", json.dumps({"type": "not_found", "title": key}).encode()
        body = {
            "type": "standard",
            "title": title,
            "displaytitle": title,
            "pageid": sorted(self.pages).index(title) + 1,
            "lang": "en",
            "revision": "1",
            "timestamp": "2024-01-01T00:00:00Z",
            "description": "MeSH heading",
            "extract": self.pages[title],
            "content_urls": {"desktop": {"page": f"{self.origin}/wiki/{quote(key, safe='')}"}},
        }
        return 200, "application/json; charset=utf-8", json.dumps(body).encode()
