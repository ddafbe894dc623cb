"""Fixtures shared by every integration test."""

import os
import subprocess

import pytest
from xtune import paths


@pytest.fixture(scope="session")
def bin_dir():
    """Directory of the binaries `make build` produced."""
    if not paths.BIN.exists():
        pytest.fail(f"{paths.BIN} is missing: run `make build` first")
    return paths.BIN


@pytest.fixture
def netns():
    """A throwaway network namespace (name), deleted afterwards."""
    name = f"xt-test-{os.getpid()}-{os.urandom(3).hex()}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)
