"""Fixtures of the fleet tests."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from xtune.testing.postgres import Cluster


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.root)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty store: a SQLite file, or a database of a private PostgreSQL cluster."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'trials.db'}"
        return
    cluster = Cluster(Path(tempfile.mkdtemp(prefix="xtune-pg-")))
    try:
        cluster.start()
        try:
            yield cluster.create_database("fleet")
        finally:
            cluster.stop()
    finally:
        shutil.rmtree(cluster.dir, ignore_errors=True)
