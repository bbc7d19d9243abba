"""`clinrag patients build | similar | rank` on the real DDXPlus and iCraft-MD files."""

import pytest

from tests.app.test_cli import _assert_clean_failure, invoke_cli

pytestmark = pytest.mark.integration  # every build embeds the narratives with the packaged MiniLM model


@pytest.fixture(scope="module")
def ddxplus_base(tmp_path_factory, data_dir):
    """The first 150 real DDXPlus patients (embedding all 2,100 long narratives takes over a minute)."""
    folder = tmp_path_factory.mktemp("ddxplus")
    source = data_dir / "ddxplus"
    rows = (source / "test_patients_mini.csv").read_text().splitlines()[:151]
    (folder / "test_patients_mini.csv").write_text("\n".join(rows) + "\n")
    for name in ("release_evidences.json", "release_conditions.json"):
        (folder / name).write_bytes((source / name).read_bytes())
    out = folder / "base"
    result = invoke_cli("patients", "build", "--dataset", "ddxplus", "--path", str(folder), "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert '"records": 150' in result.stdout
    return out


def test_similar_patients_for_a_sore_throat(ddxplus_base):
    result = invoke_cli(
        "patients",
        "similar",
        "Sore throat and fever, pain when swallowing",
        "--base",
        str(ddxplus_base),
        "--k",
        "3",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("ddxplus:") == 3


def test_rank_by_evidence_codes_and_exclusion(ddxplus_base):
    result = invoke_cli(
        "patients", "rank", "--codes", "evidence=E_53,E_91,E_201", "--base", str(ddxplus_base), "--k", "2"
    )
    assert result.returncode == 0, result.stderr
    assert "coded-set ranking (uniform)" in result.stdout and result.stdout.count("ddxplus:") == 2


def test_bad_codes_and_missing_base(tmp_path, ddxplus_base):
    _assert_clean_failure(
        invoke_cli("patients", "rank", "--codes", "evidence", "--base", str(ddxplus_base)), "FIELD=CODE"
    )
    _assert_clean_failure(
        invoke_cli("patients", "similar", "cough", "--base", str(tmp_path / "none")), "patients build"
    )


def test_icraft_base_builds(tmp_path, data_dir):
    result = invoke_cli(
        "patients",
        "build",
        "--dataset",
        "icraft",
        "--path",
        str(data_dir / "icraft_md" / "craft_md.jsonl"),
        "--out",
        str(tmp_path / "b"),
    )
    assert result.returncode == 0, result.stderr
    assert '"records": 100' in result.stdout


def test_synthetic_cohort_is_labelled(tmp_path):
    result = invoke_cli(
        "patients", "build", "--dataset", "synthetic", "--n", "60", "--out", str(tmp_path / "s")
    )
    assert result.returncode == 0, result.stderr
    assert "60 SYNTHETIC patients" in result.stdout and '"synthetic": 60' in result.stdout
    ranked = invoke_cli("patients", "rank", "--codes", "diagnoses=I10,E11.65", "--base", str(tmp_path / "s"))
    assert ranked.returncode == 0, ranked.stderr
    assert "synthetic:0:" in ranked.stdout
