"""What a statement knowledge base (`clinrag kb build`) says about a diagnosis, shown and cited beside it.

The statements are found by the lexical index, the diagnosis's name and the findings that support it being
the query, among those that name the diagnosis; the case's own record is never among them (leave-case-out).
They do not change the probabilities: a statement that names a disease and a finding is not a frequency."""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

from clinrag.core.models import Evidence
from clinrag.core.provenance import Origin

if TYPE_CHECKING:  # a knowledge base is built by the caller; importing it loads the indexes
    from clinrag.knowledge.base import KnowledgeBase

SHOWN = 1  # statements per diagnosis
FETCHED = 25  # candidates searched for those that name the diagnosis
MAX_QUOTE_CHARS = 240


def statements_about(
    knowledge: KnowledgeBase, name: str, findings: Sequence[str], exclude: Collection[Origin] = ()
) -> list[Evidence]:
    """Up to `SHOWN` statements of the knowledge base that name the diagnosis `name`, best first."""
    query = " ".join([name, *findings])
    named = re.compile(rf"(?<!\w){re.escape(name)}(?!\w)", re.IGNORECASE)
    found = knowledge.search(query, k=FETCHED, mode="lexical", exclude=exclude).evidence()
    return [item for item in found if named.search(item.text)][:SHOWN]


def quote(text: str) -> str:
    """A statement short enough to quote in a sentence (cut at a word, marked by an ellipsis)."""
    if len(text) <= MAX_QUOTE_CHARS:
        return text
    return text[:MAX_QUOTE_CHARS].rsplit(" ", 1)[0] + "…"


def cited_statements(
    knowledge: KnowledgeBase | None,
    name: str,
    findings: Sequence[str],
    exclude: Collection[Origin],
    evidence: dict[str, Evidence],
) -> list[str]:
    """The ids of the statements `knowledge` makes about the diagnosis `name` (none without a knowledge
    base), each statement added to `evidence`."""
    if knowledge is None:
        return []
    found = statements_about(knowledge, name, findings, exclude)
    evidence.update((item.id, item) for item in found)
    return [item.id for item in found]
