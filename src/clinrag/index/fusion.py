"""Reciprocal-rank fusion (Cormack et al., 2009): merge rankings from indexes whose scores do not compare."""

from __future__ import annotations

from collections.abc import Sequence

from clinrag.core.errors import InvalidInputError
from clinrag.index.hits import Hit


def rrf(rankings: Sequence[Sequence[Hit]], k: int = 60, limit: int | None = None) -> list[Hit]:
    """Fuse rankings (each best first) into one: score(id) = Σ over rankings of 1 / (k + rank), rank from 1.

    Only positions matter; the input scores are ignored. An id listed twice in one ranking counts at its best
    position. Ties are broken by the best rank the id reached in any ranking, then by id, so the output
    never depends on dict or set order. `limit` keeps only the first `limit` fused hits."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise InvalidInputError(f"the RRF constant k must be a non-negative integer, got {k!r}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise InvalidInputError(f"limit must be a non-negative integer or None, got {limit!r}")
    ranks: dict[str, list[int]] = {}
    for ranking in rankings:
        seen: set[str] = set()
        for rank, hit in enumerate(ranking, start=1):
            if hit.id not in seen:
                seen.add(hit.id)
                ranks.setdefault(hit.id, []).append(rank)
    # Summing each id's terms in rank order makes equal rank multisets give bit-identical scores, so true
    # ties are exact and reach the tie-break instead of differing in the last floating-point bit.
    fused = [(sum(1.0 / (k + r) for r in sorted(rs)), min(rs), item) for item, rs in ranks.items()]
    fused.sort(key=lambda entry: (-entry[0], entry[1], entry[2]))
    if limit is not None:
        fused = fused[:limit]
    return [Hit(item, score) for score, _, item in fused]
