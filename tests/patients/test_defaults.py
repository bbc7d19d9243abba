"""The patient base a consultation opens: the synthetic default (its size narrowed here so the test builds
in seconds), one built from a real dataset the user names, or one saved where the user points."""

from pathlib import Path

import pytest

from clinrag.core.errors import DataFormatError
from clinrag.core.settings import load_settings
from clinrag.patients import defaults
from clinrag.patients.defaults import open_patient_base


def test_synthetic_default_then_a_named_dataset(monkeypatch, data_dir: Path, minilm_embedder) -> None:
    monkeypatch.setattr(defaults, "DEFAULT_COHORT_SIZE", 40)
    settings = load_settings()
    synthetic = open_patient_base(settings, minilm_embedder, progress=False)
    assert len(synthetic.records) == 40 and all(r.synthetic for r in synthetic.records.values())
    icraft = open_patient_base(
        settings, minilm_embedder, dataset="icraft", data_path=data_dir / "icraft_md" / "craft_md.jsonl"
    )
    assert len(icraft.records) == 100 and all(rid.startswith("icraft:") for rid in icraft.records)
    hits = icraft.similar("umbilicated papules on the trunk of a child", k=3)
    assert len(hits) == 3
    saved = defaults.dataset_patient_base_path(settings, "icraft", data_dir / "icraft_md" / "craft_md.jsonl")
    assert set(open_patient_base(settings, minilm_embedder, saved).records) == set(icraft.records)


def test_a_missing_base_is_a_clear_error(tmp_path: Path, minilm_embedder) -> None:
    with pytest.raises(DataFormatError, match="no patient base"):
        open_patient_base(load_settings(), minilm_embedder, tmp_path / "nothing")
