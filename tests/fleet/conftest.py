"""Fixtures of the fleet tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from xtune.testing import images
from xtune.testing.postgres import temporary_cluster


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.root)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty store: a SQLite file, or a database of a private PostgreSQL cluster."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'trials.db'}"
        return
    with temporary_cluster() as cluster:
        yield cluster.create_database("fleet")


@pytest.fixture(scope="session")
def agent_image(bin_dir: Path) -> str:
    """The ID of the agent image docker/build.sh builds from build/bin (once per test run)."""
    missing = images.podman_missing()
    if missing:
        pytest.skip(missing)
    try:
        return images.agent_image()
    except RuntimeError as e:
        pytest.fail(str(e))
