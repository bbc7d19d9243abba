"""Dataset loaders → `Case`s (and patient-base records), and the registry the runner and CLI use.

Each module of this package registers its `DatasetSpec`s in `DATASETS` when it is imported (an installed
distribution can add its own under the `clinrag.datasets` entry-point group).
`load_dataset(name, path, data_dir=...)` resolves the files: an explicit `path` for this dataset, else
`data_dir / spec.default_path`. Generated datasets (DischargeQA over the synthetic cohort) need no data
root: their "path" is a generator spec such as "synthetic:300:0"."""

from __future__ import annotations

from pathlib import Path

from clinrag.core.errors import ConfigError, InvalidInputError
from clinrag.eval.datasets.base import DATASETS, Dataset, DatasetSpec

__all__ = ["DATASETS", "Dataset", "DatasetSpec", "dataset_names", "get_dataset", "load_dataset"]


def dataset_names() -> list[str]:
    return DATASETS.names()


def get_dataset(name: str) -> DatasetSpec:
    specs = DATASETS.items()
    if name not in specs:
        raise InvalidInputError(f"unknown dataset {name!r}; valid names: {', '.join(sorted(specs))}")
    return specs[name]


def load_dataset(name: str, path: str | Path | None = None, *, data_dir: str | Path | None = None) -> Dataset:
    """Load a registered dataset from `path` — the dataset's own file or folder, or a data root holding it
    at its default place — or from `data_dir / default_path` when no path is given."""
    spec = get_dataset(name)
    if spec.generated:
        # A data root (an existing folder) means nothing to a generator: it keeps its default spec.
        given = spec.default_path if path is None or Path(path).is_dir() else str(path)
        return spec.load(Path(given))
    if path is not None:
        resolved = Path(path)
        if resolved.is_dir() and (resolved / spec.default_path).exists():
            resolved = resolved / spec.default_path  # a data root such as a copy of shared/data
    elif data_dir is not None:
        resolved = Path(data_dir) / spec.default_path
    else:
        raise ConfigError(f"no data for dataset {name!r}: pass --data or set CLINRAG_DATA_DIR")
    if not resolved.exists():
        raise InvalidInputError(f"data path for dataset {name!r} does not exist: {resolved}")
    return spec.load(resolved)
