"""Datasets loaded once per test session from the real data (each load takes well under a second)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from clinrag.eval.datasets import Dataset, load_dataset


@pytest.fixture(scope="session")
def loaded(data_dir: Path) -> Callable[[str], Dataset]:
    cache: dict[str, Dataset] = {}

    def get(name: str) -> Dataset:
        if name not in cache:
            cache[name] = load_dataset(name, data_dir=data_dir)
        return cache[name]

    return get
