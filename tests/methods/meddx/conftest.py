"""Real DDXPlus interactive cases (the mini release beside the checkout)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clinrag.eval.datasets import load_dataset
from clinrag.eval.datasets.base import Dataset


@pytest.fixture(scope="session")
def ddxplus_interactive(data_dir: Path) -> Dataset:
    return load_dataset("ddxplus-interactive", data_dir / "ddxplus")
