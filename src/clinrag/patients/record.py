"""A patient-base record (DoctorRAG's (p_j, s_j, a_j), EXPRAG's coded sets and report sections)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class ReportSection(BaseModel):
    title: str
    text: str


class PatientRecord(BaseModel):
    """`narrative` is p_j (chief complaint / conversation / vignette), `structured` is s_j (findings, vitals,
    diagnosis, differential), `metadata` is a_j (age, sex, source, split), `codes` are coded sets by field
    (e.g. "evidence", "diagnoses", "medications", "procedures"), `report` is an optional sectioned report."""

    id: str = Field(min_length=1)
    narrative: str = Field(min_length=1)
    structured: dict[str, Any] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)
    codes: dict[str, list[str]] = Field(default_factory=dict)
    report: list[ReportSection] = Field(default_factory=list)
    source: str = ""
    synthetic: bool = False
