"""Fixtures of the SIE tests: built targets and analyzed scope tables, cached by content hash."""

from __future__ import annotations

import shutil

import pytest
from xtune.sie import attach as eng


@pytest.fixture(scope="session", autouse=True)
def sie_state_dir(tmp_path_factory):
    """Attachment state under a private folder, so that tests never touch /run/xtune/sie."""
    d = tmp_path_factory.mktemp("sie-state")
    old = eng.STATE_ROOT
    eng.STATE_ROOT = d
    yield d
    eng.STATE_ROOT = old
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def engine(bin_dir):
    path = bin_dir / "xsie-user"
    if not path.exists():
        pytest.fail(f"{path} is missing: run `make build`")
    return path
