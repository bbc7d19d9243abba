"""What every index returns."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Hit:
    """One search result: the id of an indexed item and its score (higher is better; meaning per index)."""

    id: str
    score: float
