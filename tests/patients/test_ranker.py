"""The EXPRAG coded-set ranker on real DDXPlus patients, checked against plain Python set arithmetic."""

import ast
import csv
import random
from collections import Counter

import pytest

from clinrag.core.errors import InvalidInputError
from clinrag.patients.ranker import CodedSetRanker, preset_weights


@pytest.fixture(scope="module")
def ddxplus(data_dir):
    with (data_dir / "ddxplus" / "test_patients_mini.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    patients = [
        (f"ddxplus:{i}", {"evidence": ast.literal_eval(row["features"])}, row["diagnosis"])
        for i, row in enumerate(rows)
    ]
    random.Random(0).shuffle(patients)
    cut = len(patients) // 5
    return patients[cut:], patients[:cut]  # base (80 %), held out (20 %)


def _python_scores(query, base, weights):
    scores = {}
    for pid, record, _ in base:
        total = 0.0
        for field, weight in weights.items():
            a, b = set(query.get(field, ())), set(record.get(field, ()))
            if a or b:
                total += weight * len(a & b) / len(a | b)
        scores[pid] = total
    return scores


def test_top5_majority_diagnosis_matches_held_out_patients(ddxplus):
    base, held_out = ddxplus
    ranker = CodedSetRanker([p for p, _, _ in base], [r for _, r, _ in base], ["evidence"])
    diagnosis = {pid: dx for pid, _, dx in base}
    weights = preset_weights("uniform", ["evidence"])
    correct = 0
    for _, record, gold in held_out:
        top = ranker.rank(record, 5, weights)
        majority, _ = Counter(diagnosis[h.id] for h in top).most_common(1)[0]
        correct += majority == gold
    assert correct / len(held_out) >= 0.95, correct / len(held_out)


def test_scores_equal_plain_set_arithmetic(ddxplus):
    base, held_out = ddxplus
    rng = random.Random(1)

    # Two fields from the real codes: evidence names and their values, weighted unevenly.
    def split(record):
        codes = record["evidence"]
        return {"names": [c.split("_@_")[0] for c in codes], "values": [c for c in codes if "_@_" in c]}

    records = [split(r) for _, r, _ in base]
    ranker = CodedSetRanker([p for p, _, _ in base], records, ["names", "values"])
    weights = {"names": 0.7, "values": 0.3}
    small_base = [(p, rec, None) for (p, _, _), rec in zip(base, records, strict=True)]
    for _, record, _ in rng.sample(held_out, 10):
        query = split(record)
        expected = _python_scores(query, small_base, weights)
        top = ranker.rank(query, 15, weights)
        best = sorted(expected.items(), key=lambda item: (-item[1], ranker.ids.index(item[0])))[:15]
        assert [h.id for h in top] == [pid for pid, _ in best]
        assert [h.score for h in top] == pytest.approx([score for _, score in best])


def test_exclusion_and_unknown_codes(ddxplus):
    base, _ = ddxplus
    ranker = CodedSetRanker([p for p, _, _ in base], [r for _, r, _ in base], ["evidence"])
    pid, record, _ = base[0]
    weights = {"evidence": 1.0}
    assert ranker.rank(record, 1, weights)[0].id == pid
    assert ranker.rank(record, 1, weights)[0].score == pytest.approx(1.0)
    assert pid not in [h.id for h in ranker.rank(record, 5, weights, exclude=[pid])]
    with_unknown = {"evidence": [*record["evidence"], "E_NOT_A_CODE"]}  # lowers the Jaccard, does not crash
    assert ranker.rank(with_unknown, 1, weights)[0].score < 1.0
    assert ranker.rank({"evidence": ["E_NOT_A_CODE"]}, 5, weights) == []


def test_presets_and_bad_input():
    fields = ["diagnoses", "medications", "procedures"]
    assert preset_weights("uniform", fields) == pytest.approx({f: 1 / 3 for f in fields})
    assert preset_weights("focused", fields, "medications")["medications"] == 0.5
    assert preset_weights("complementary", fields, "medications") == {
        "medications": 0.0,
        "diagnoses": 0.5,
        "procedures": 0.5,
    }
    with pytest.raises(InvalidInputError, match="focus"):
        preset_weights("focused", fields)
    with pytest.raises(InvalidInputError, match="unique"):
        CodedSetRanker(["a", "a"], [{"diagnoses": ["I10"]}, {"diagnoses": ["E11"]}], fields)
    ranker = CodedSetRanker(["a", "b"], [{"diagnoses": ["I10"]}, {}], fields)  # an empty patient is allowed
    with pytest.raises(InvalidInputError, match="no codes"):
        ranker.rank({"diagnoses": []}, 3, {"diagnoses": 1.0})
    assert [h.id for h in ranker.rank({"diagnoses": ["I10"]}, 3, {"diagnoses": 1.0})] == ["a"]
