"""What the finding extractor reads of a text: each finding with its status and where it was written, and
the patient's age, sex, course and whom the account is about. Kept apart from the extractor, so that a
reader of a report (the CLI's printer, the API's schemas) loads no spaCy."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from clinrag.consult.understand.crises import CrisisMention
from clinrag.consult.understand.demographics import Duration, OnsetPhrase, Sex, Subject

FindingStatus = Literal["present", "absent", "uncertain"]


class Contradiction(BaseModel):
    """The patient's sentences that state a finding and those that deny it (or a broader finding it is a kind
    of): the finding is then uncertain, and asked about again."""

    stated: list[str]
    denied: list[str]


class Finding(BaseModel):
    concept_id: str
    concept: str  # the concept's preferred name
    ids: list[str]  # every id the concept carries (merged vocabularies)
    status: FindingStatus
    text: str  # the span as written (its first mention)
    start: int  # character offsets in the input
    end: int
    contradiction: Contradiction | None = None  # why it is uncertain, when the text says it both ways


class Findings(BaseModel):
    findings: list[Finding] = Field(default_factory=list)
    age: int | None = None
    sex: Sex | None = None
    duration: Duration | None = None
    onset: OnsetPhrase | None = None
    onset_classes: list[str] = Field(default_factory=list)  # HPO onset classes given as codes ("HP:0003593")
    subject: Subject | None = None  # whom the account is about, when not the one writing
    self_told: bool = False  # the one writing says it is about themselves ("I have …")
    crises: list[CrisisMention] = Field(default_factory=list)  # words telling of a crisis (an overdose, …)
    not_understood: list[str] = Field(default_factory=list)

    def with_status(self, status: FindingStatus) -> list[Finding]:
        return [finding for finding in self.findings if finding.status == status]
