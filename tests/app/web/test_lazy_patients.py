"""The server opens its patient base only when a method that draws on past patients is first built: a server
that answers consultations alone never opens (or embeds) one, and the consultation never takes the server's
base as its experience."""

from __future__ import annotations

from pathlib import Path

from clinrag.app.web.services import ConsultService
from clinrag.core.models import Case
from clinrag.core.settings import Settings
from clinrag.patients.base import PatientBase
from clinrag.patients.loaders import load_patient_dataset


def test_the_patient_base_is_opened_by_the_first_method_that_needs_it(
    consult_home: Path, data_dir: Path, minilm_embedder
) -> None:
    records = load_patient_dataset("ddxplus", data_dir / "ddxplus")[0][:20]
    opened: list[PatientBase] = []

    def open_base() -> PatientBase:
        opened.append(PatientBase.create(records, minilm_embedder))
        return opened[-1]

    service = ConsultService(
        Settings(home=consult_home), patient_base=open_base, embedder=lambda _: minilm_embedder
    )
    consult = service.method("consult", {})
    answer = consult.answer(Case(id="c", question="I have a fever and a cough."))
    assert opened == [] and answer.details["patients"] is None
    assert "no patient base" in answer.details["experience"]
    vote = service.method("knn-vote", {})
    service.method("knn-vote", {"k": 3})
    assert len(opened) == 1  # opened once, for the first method that draws on patients
    assert vote.answer(Case(id="v", question="I have a fever and a cough.")).result is not None
