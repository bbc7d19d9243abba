"""The patient base: records with a dense index over their narratives (DoctorRAG eq. 2), the leakage guard
of the DoctorRAG protocol, and the coded-set ranker (EXPRAG) over their codes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

from clinrag.core.errors import DataFormatError, IndexMismatchError, InvalidInputError
from clinrag.embed.base import Embedder
from clinrag.index.dense import DenseIndex
from clinrag.index.store import atomic_directory, read_json, write_json
from clinrag.patients.ranker import CodedSetRanker
from clinrag.patients.record import PatientRecord

FORMAT_VERSION = 1
INFO_FILE = "patients.json"
RECORDS_FILE = "records.jsonl"
# DoctorRAG protocol: records this similar to the query are treated as the query patient itself.
LEAKAGE_THRESHOLD = 0.99


def _unique(records: Sequence[PatientRecord]) -> dict[str, PatientRecord]:
    by_id: dict[str, PatientRecord] = {}
    for record in records:
        if record.id in by_id:
            raise InvalidInputError(f"duplicate patient id {record.id!r}")
        by_id[record.id] = record
    return by_id


def format_record(record: PatientRecord) -> str:
    """Format(p, s, a) of DoctorRAG eq. 3: the record as a block of prompt text."""
    lines = [f"Patient {record.id}" + (" (synthetic)" if record.synthetic else "")]
    if record.metadata:
        lines.append("Profile: " + ", ".join(f"{k}: {v}" for k, v in record.metadata.items()))
    lines.append(f"Presentation: {record.narrative}")
    for key, value in record.structured.items():
        shown = "; ".join(map(str, value)) if isinstance(value, list) else str(value)
        lines.append(f"{key.replace('_', ' ').capitalize()}: {shown}")
    return "\n".join(lines)


class PatientBase:
    def __init__(self, records: Sequence[PatientRecord], index: DenseIndex, embedder: Embedder) -> None:
        self.records = _unique(records)
        self.index = index
        self.embedder = embedder

    @classmethod
    def create(
        cls, records: Sequence[PatientRecord], embedder: Embedder, *, progress: bool = False
    ) -> PatientBase:
        if not records:
            raise InvalidInputError("a patient base needs at least one record")
        _unique(records)
        index = DenseIndex(embedder.name, embedder.dimension)
        index.add(embedder.encode([r.narrative for r in records], progress=progress), [r.id for r in records])
        return cls(records, index, embedder)

    def save(self, directory: Path) -> None:
        with atomic_directory(directory) as staging:
            write_json(
                staging / INFO_FILE,
                {
                    "format_version": FORMAT_VERSION,
                    "embedder": self.embedder.name,
                    "dimension": self.embedder.dimension,
                    "count": len(self.records),
                },
            )
            with (staging / RECORDS_FILE).open("w", encoding="utf-8") as sink:
                for record in self.records.values():
                    sink.write(record.model_dump_json() + "\n")
            self.index.save(staging / "dense")

    @classmethod
    def load(cls, directory: Path, embedder: Embedder) -> PatientBase:
        info_path = Path(directory) / INFO_FILE
        if not info_path.exists():
            raise DataFormatError(f"no patient base at {directory} (build one with `clinrag patients build`)")
        info = read_json(info_path)
        if info.get("format_version") != FORMAT_VERSION:
            raise IndexMismatchError(f"{directory} has patient-base format {info.get('format_version')}")
        if (info["embedder"], info["dimension"]) != (embedder.name, embedder.dimension):
            raise IndexMismatchError(
                f"{directory} was built with {info['embedder']} ({info['dimension']}-d), the configured "
                f"embedder is {embedder.name} ({embedder.dimension}-d)"
            )
        try:
            lines = (Path(directory) / RECORDS_FILE).read_text(encoding="utf-8").splitlines()
            records = [PatientRecord.model_validate_json(line) for line in lines]
        except (OSError, ValueError) as exc:
            raise DataFormatError(f"cannot read the records of {directory}: {exc}") from exc
        index = DenseIndex.load(
            Path(directory) / "dense", expect_embedder=embedder.name, expect_dimension=embedder.dimension
        )
        return cls(records, index, embedder)

    def similar(
        self, text: str, k: int = 5, *, exclude: Iterable[str] = (), guard: float = LEAKAGE_THRESHOLD
    ) -> list[tuple[PatientRecord, float]]:
        """Top-k records by cosine between narratives (DoctorRAG eq. 2). The leakage guard drops the ids in
        `exclude` (the case's own record) and every record with cosine > `guard` (a copy of the case)."""
        if not text.strip():
            raise InvalidInputError("the patient description is empty")
        if k < 1:
            raise InvalidInputError(f"k must be positive, got {k}")
        excluded = set(exclude)
        query = self.embedder.encode([text])
        width = k + len(excluded) + 8
        while True:
            (hits,) = self.index.search(query, min(width, len(self.records)))
            kept = [h for h in hits if h.id not in excluded and h.score <= guard]
            if len(kept) >= k or len(hits) == len(self.records):
                return [(self.records[h.id], h.score) for h in kept[:k]]
            width *= 4  # many near-duplicates: look further down the ranking

    @cached_property
    def _ranker(self) -> CodedSetRanker:
        fields = sorted({field for r in self.records.values() for field in r.codes})
        return CodedSetRanker(list(self.records), [r.codes for r in self.records.values()], fields)

    def rank(
        self,
        codes: Mapping[str, Iterable[str]],
        k: int,
        weights: Mapping[str, float],
        *,
        exclude: Iterable[str] = (),
    ) -> list[tuple[PatientRecord, float]]:
        """Top-k records by the coded-set ranker (EXPRAG eq. 4–7)."""
        return [(self.records[h.id], h.score) for h in self._ranker.rank(codes, k, weights, exclude=exclude)]

    def stats(self) -> dict[str, Any]:
        fields: dict[str, int] = {}
        for record in self.records.values():
            for field, values in record.codes.items():
                fields[field] = fields.get(field, 0) + bool(values)
        return {
            "records": len(self.records),
            "synthetic": sum(r.synthetic for r in self.records.values()),
            "sources": sorted({r.source for r in self.records.values()}),
            "records_with_codes": fields,
            "embedder": self.embedder.name,
        }
