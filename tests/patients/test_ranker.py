"""The EXPRAG coded-set ranker, checked against plain Python set arithmetic on real DDXPlus patients and on
random cohorts built to hit its edge cases (ties, exclusion, missing fields, zero weights, unknown codes)."""

import ast
import csv
import random
from collections import Counter

import numpy as np
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


def test_the_copy_guard_drops_another_id_with_the_same_codes(ddxplus):
    """DoctorRAG drops near-copies of the query (similarity > 0.99) besides its own id: a real patient's codes
    stored again under another id are found without the guard and dropped with it."""
    base, _ = ddxplus
    pid, record, _ = base[0]
    ids = [p for p, _, _ in base] + ["copy"]
    ranker = CodedSetRanker(ids, [r for _, r, _ in base] + [record], ["evidence"])
    weights = {"evidence": 1.0}
    plain = ranker.rank(record, 5, weights, exclude=[pid])
    assert plain[0].id == "copy" and plain[0].score == pytest.approx(1.0)
    guarded = ranker.rank(record, 5, weights, exclude=[pid], guard=0.99)
    assert "copy" not in [h.id for h in guarded] and len(guarded) == 5
    assert [h.id for h in guarded] == [h.id for h in ranker.rank(record, 6, weights, exclude=[pid])][1:]


def test_presets_and_bad_input():
    fields = ["diagnoses", "medications", "procedures"]
    assert preset_weights("uniform", fields) == pytest.approx({f: 1 / 3 for f in fields})
    assert preset_weights("focused", fields, "medications")["medications"] == 0.5
    # the paper's task-focused weights: the focus field alone
    assert preset_weights("focused", fields, "medications", focus_share=1.0) == {
        "diagnoses": 0.0,
        "medications": 1.0,
        "procedures": 0.0,
    }
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


def _brute_top(scores, k, exclude):
    """Top k of plain Python scores (an id → τ dict in insertion order): τ > 0, best first, ties by order."""
    pids = list(scores)
    ranked = sorted(
        (-score, row) for row, pid in enumerate(pids) if (score := scores[pid]) > 0 and pid not in exclude
    )
    return [(pids[row], -score) for score, row in ranked[:k]]


def _random_cohort(rng, n):
    fields = {"diagnoses": 300, "medications": 120, "procedures": 90}
    vocabulary = {f: [f"{f[:3]}{i}" for i in range(size)] for f, size in fields.items()}

    def patient():
        record = {}
        for field, codes in vocabulary.items():
            if rng.random() < 0.15:
                continue  # the field is missing from this record
            # Skewed draws: a few codes are in most records (bit words), the tail is rare (postings).
            drawn = [
                codes[min(int(rng.paretovariate(0.8)), len(codes)) - 1] for _ in range(rng.randint(0, 12))
            ]
            record[field] = drawn + drawn[:1]  # a repeated code counts once
        return record

    records = [patient() for _ in range(n)]
    for _ in range(n // 3):  # many identical sets: ties broken by insertion order
        records.insert(rng.randrange(len(records)), dict(rng.choice(records[:50])))
    return list(fields), records


def test_top_k_equals_brute_force_jaccard_with_ties_exclusion_and_gaps():
    rng = random.Random(7)
    fields, records = _random_cohort(rng, 3000)
    ids = [f"p{i}" for i in range(len(records))]
    ranker = CodedSetRanker(ids, records, fields)
    base = [(pid, record, None) for pid, record in zip(ids, records, strict=True)]
    presets = [
        preset_weights("uniform", fields),
        preset_weights("focused", fields, "medications"),
        preset_weights("complementary", fields, "diagnoses"),  # a zero-weight field
        {"procedures": 1.0},
    ]
    checked = 0
    for i in range(60):
        query = dict(rng.choice(records)) if i % 2 else _random_cohort(rng, 1)[1][0]
        query = {f: [*codes, "NOT_A_CODE"] if i % 3 == 0 else codes for f, codes in query.items()}
        weights = presets[i % len(presets)]
        if not any(query.get(f) for f, w in weights.items() if w > 0):
            continue
        exclude = {ids[rng.randrange(len(ids))] for _ in range(i % 4)} | ({"p0"} if i % 5 == 0 else set())
        k = rng.choice([1, 5, 15, 200])
        expected = _python_scores(query, base, weights)
        # Same arithmetic in the same order as the loop: equal scores, not just close ones.
        assert ranker.scores(query, weights).tolist() == list(expected.values())
        top = ranker.rank(query, k, weights, exclude=exclude)
        assert [(h.id, h.score) for h in top] == _brute_top(expected, k, exclude)
        checked += 1
    assert checked > 40


def test_from_codes_matches_records_and_checks_its_input():
    rng = random.Random(3)
    fields, records = _random_cohort(rng, 500)
    ids = [f"p{i}" for i in range(len(records))]
    encoded = {}
    for field in fields:
        vocabulary = sorted({c for r in records for c in r.get(field, ())}, reverse=True)
        column = {c: i for i, c in enumerate(vocabulary)}
        rows = [sorted({column[c] for c in r.get(field, ())}) for r in records]
        indptr = np.cumsum([0, *map(len, rows)])
        encoded[field] = (vocabulary, indptr, np.array([c for row in rows for c in row], dtype=np.int64))
    from_codes = CodedSetRanker.from_codes(ids, encoded)
    from_records = CodedSetRanker(ids, records, fields)
    weights = preset_weights("uniform", fields)
    for query in rng.sample(records, 20):
        assert from_codes.rank(query, 10, weights) == from_records.rank(query, 10, weights)

    vocabulary, indptr, codes = encoded["diagnoses"]
    repeated = codes.copy()
    row = int(np.argmax(np.diff(indptr) >= 2))
    repeated[indptr[row] + 1] = repeated[indptr[row]]
    with pytest.raises(InvalidInputError, match="twice"):
        CodedSetRanker.from_codes(ids, {"diagnoses": (vocabulary, indptr, repeated)})
    with pytest.raises(InvalidInputError, match="indptr"):
        CodedSetRanker.from_codes(ids[:-1], {"diagnoses": encoded["diagnoses"]})
    with pytest.raises(InvalidInputError, match="vocabulary"):
        CodedSetRanker.from_codes(ids, {"diagnoses": (vocabulary[:10], indptr, codes)})


def test_ties_keep_insertion_order():
    ids = [f"p{i}" for i in range(5000)]
    records = [{"diagnoses": ["I10", "E11"]} if i % 2 else {"diagnoses": ["I10"]} for i in range(5000)]
    ranker = CodedSetRanker(ids, records, ["diagnoses"])
    top = ranker.rank({"diagnoses": ["I10", "E11"]}, 3, {"diagnoses": 1.0}, exclude=["p3"])
    assert [(h.id, h.score) for h in top] == [("p1", 1.0), ("p5", 1.0), ("p7", 1.0)]
    top = ranker.rank({"diagnoses": ["I10"]}, 4000, {"diagnoses": 1.0})
    assert [h.id for h in top[:3]] == ["p0", "p2", "p4"] and [h.id for h in top[2500:2502]] == ["p1", "p3"]
