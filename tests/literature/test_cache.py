"""The SQLite literature cache."""

from __future__ import annotations

import sqlite3
import time

import pytest

from clinrag.core.models import Evidence
from clinrag.literature.cache import LiteratureCache, cache_key

EVIDENCE = [
    Evidence(
        id="pubmed:12377809", kind="citation", text="Is anorectal endosonography valuable?", source="pubmed"
    )
]


def test_round_trip_and_key_parts(tmp_path):
    cache = LiteratureCache(tmp_path / "c.sqlite")
    key = cache_key("pubmed|base", "dyschesia", {"limit": 3})
    assert cache.get(key) is None
    cache.put(key, EVIDENCE)
    assert cache.get(key) == EVIDENCE and len(cache) == 1
    assert key != cache_key("pubmed|base", "dyschesia", {"limit": 4})
    assert key != cache_key("pubmed|other", "dyschesia", {"limit": 3})
    assert key != cache_key("pubmed|base", "Dyschesia", {"limit": 3})


def test_expired_and_unreadable_entries_are_misses(tmp_path):
    cache = LiteratureCache(tmp_path / "c.sqlite", ttl_s=0.2)
    cache.put("old", EVIDENCE)
    time.sleep(0.3)
    cache.put("new", EVIDENCE)
    assert cache.get("old") is None and cache.get("new") == EVIDENCE
    assert cache.prune() == 1 and len(cache) == 1

    with sqlite3.connect(cache.path) as db:
        db.execute("UPDATE literature SET payload = '[{\"id\": 1}]' WHERE key = 'new'")
    assert cache.get("new") is None


def test_ttl_must_be_positive(tmp_path):
    with pytest.raises(ValueError):
        LiteratureCache(tmp_path / "c.sqlite", ttl_s=0)
