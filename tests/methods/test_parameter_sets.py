"""Named parameter sets (`preset=paper`): the packaged sets are valid parameters of their methods, each value
with its source; the user's own parameters win; an unknown set or a malformed file is a clear error."""

from __future__ import annotations

import pytest

from clinrag.core.errors import DataFormatError, InvalidInputError
from clinrag.methods.doctorrag import DoctorRAGConfig
from clinrag.methods.parameter_sets import PRESETS, preset_values, presets
from clinrag.methods.registry import get_method, method_names

pytestmark = pytest.mark.unit


def test_every_packaged_set_is_valid_for_its_method_and_cites_its_source() -> None:
    files = sorted(PRESETS.glob("*.jsonl"))
    assert [path.stem for path in files] == ["deepdoctor", "doctorrag", "exprag", "imedrag", "meddx"]
    for path in files:
        method = path.stem
        assert method in method_names(), path
        for name, values in presets(method).items():
            config = get_method(method).config.from_params({"preset": name})
            for value in values:
                assert getattr(config, value.parameter) == value.value
                assert len(value.source) > 20, value  # a paper, and where in it


def test_the_doctorrag_paper_set_runs_med_textgrad_as_algorithm_1_without_the_label_vote() -> None:
    default = DoctorRAGConfig.from_params({})
    paper = DoctorRAGConfig.from_params({"preset": "paper"})
    assert (default.refine_iterations, default.refine_select, default.use_prior) == (0, "best", True)
    assert (paper.refine_iterations, paper.refine_select, paper.use_prior) == (3, "last", False)
    assert paper.preset == "paper"
    # a parameter given beside the set keeps the user's value; the rest stay the paper's
    changed = DoctorRAGConfig.from_params({"preset": "paper", "refine_iterations": 1})
    assert (changed.refine_iterations, changed.refine_select, changed.use_prior) == (1, "last", False)


def test_an_unknown_set_names_the_sets_there_are() -> None:
    with pytest.raises(InvalidInputError, match=r"no parameter set 'papr' \(its sets: paper\)"):
        DoctorRAGConfig.from_params({"preset": "papr"})
    with pytest.raises(InvalidInputError, match=r"its sets: none"):
        get_method("knn-vote").config.from_params({"preset": "paper"})


def test_a_malformed_set_or_one_naming_another_parameter_is_a_data_error(tmp_path) -> None:
    (tmp_path / "broken.jsonl").write_text('{"preset": "paper", "value": 3}\n', encoding="utf-8")
    with pytest.raises(DataFormatError, match="malformed parameter set"):
        presets("broken", tmp_path)
    line = '{"preset": "paper", "parameter": "k_rounds", "value": 3, "source": "§2"}\n'
    (tmp_path / "stray.jsonl").write_text(line, encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"does not have: \['k_rounds'\]"):
        preset_values("stray", "paper", {"k", "preset"}, tmp_path)
