"""A real Dask LocalCluster (two worker processes bound to 127.0.0.1) shared by the scale-out tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from clinrag.scale.cluster import dask_client


@pytest.fixture(scope="session")
def client() -> Iterator:
    with dask_client(workers=2) as connected:
        yield connected
