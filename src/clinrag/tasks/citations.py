"""Evidence ids cited in a reply."""

from __future__ import annotations

import re

_BRACKETS = re.compile(r"\[([^\[\]\n]{1,300})\]")
_EVIDENCE_ID = re.compile(r"^[A-Za-z][\w.\-]*:\S+$")


def cited_ids(text: str) -> list[str]:
    """Evidence ids cited in square brackets ("[kb:12]", "[ddxplus:12, kb:3]"), in order of first citation,
    each once. Bracketed text that is not a `source:id` (e.g. "[MASK]", "[1]") is ignored."""
    found: list[str] = []
    for group in _BRACKETS.finditer(text):
        for part in re.split(r"[,;，；]", group.group(1)):
            candidate = part.strip()
            if _EVIDENCE_ID.match(candidate) and candidate not in found:
                found.append(candidate)
    return found
