"""Deterministic sampling and splits."""

from __future__ import annotations

import random

import pytest

from clinrag.core.errors import InvalidInputError
from clinrag.core.models import Case
from clinrag.eval.sampling import sample_cases, train_test_split


def _cases(n: int) -> list[Case]:
    return [Case(id=f"case-{i}", question=f"q{i}") for i in range(n)]


def test_same_seed_same_cases_whatever_the_input_order():
    cases = _cases(100)
    shuffled = cases[:]
    random.Random(3).shuffle(shuffled)
    first = sample_cases(cases, 10, seed=1)
    assert len(first) == 10
    assert [c.id for c in first] == [c.id for c in sample_cases(cases, 10, seed=1)]
    assert {c.id for c in first} == {c.id for c in sample_cases(shuffled, 10, seed=1)}
    assert {c.id for c in first} != {c.id for c in sample_cases(cases, 10, seed=2)}
    positions = [cases.index(c) for c in first]
    assert positions == sorted(positions)  # input order kept
    assert positions != list(range(10))  # not simply the first ten


def test_smaller_sample_is_nested_in_a_larger_one():
    cases = _cases(50)
    small = {c.id for c in sample_cases(cases, 5, seed=0)}
    large = {c.id for c in sample_cases(cases, 20, seed=0)}
    assert small < large


def test_limits():
    cases = _cases(7)
    assert sample_cases(cases, None, seed=0) == cases
    assert sample_cases(cases, 100, seed=0) == cases
    for bad in (0, -3):
        with pytest.raises(InvalidInputError, match="at least 1"):
            sample_cases(cases, bad, seed=0)
    with pytest.raises(InvalidInputError, match="duplicate"):
        sample_cases([*cases, cases[0]], 3, seed=0)


def test_split_is_disjoint_complete_and_deterministic():
    cases = _cases(101)
    train, test = train_test_split(cases, 0.2, seed=4)
    assert len(test) == 20 and len(train) == 81
    assert not {c.id for c in train} & {c.id for c in test}
    assert {c.id for c in train} | {c.id for c in test} == {c.id for c in cases}
    again_test = train_test_split(list(reversed(cases)), 0.2, seed=4)[1]
    assert {c.id for c in again_test} == {c.id for c in test}
    assert {c.id for c in train_test_split(cases, 0.2, seed=5)[1]} != {c.id for c in test}


def test_split_with_a_key_and_bad_arguments():
    words = [f"w{i}" for i in range(10)]
    train, test = train_test_split(words, 0.01, seed=0, key=str)
    assert len(test) == 1 and len(train) == 9  # at least one item on each side
    for fraction in (0.0, 1.0, 1.5):
        with pytest.raises(InvalidInputError, match="test_fraction"):
            train_test_split(words, fraction, seed=0, key=str)
    with pytest.raises(InvalidInputError, match="at least 2"):
        train_test_split(words[:1], 0.5, seed=0, key=str)
    with pytest.raises(InvalidInputError, match="key="):
        train_test_split(words, 0.5, seed=0)
