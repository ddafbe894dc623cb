"""Fixtures for the runtime tests: xrtd instances in private tmp dirs, bpffs, xcubic."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from xtune.testing.xrtd import Xrtd


@pytest.fixture
def xrtd_factory(tmp_path: Path, bin_dir: Path) -> Iterator:
    """Start xrtd instances: `xrtd_factory(*extra_args)`; all are stopped (restoring) at the end."""
    made: list[Xrtd] = []

    def make(*args: str) -> Xrtd:
        d = tmp_path / f"x{len(made)}"
        d.mkdir()
        x = Xrtd(d, *args)
        made.append(x)
        return x.start()

    yield make
    for x in made:
        x.cleanup()


@pytest.fixture
def xrtd(xrtd_factory) -> Xrtd:
    return xrtd_factory()


@pytest.fixture(scope="session")
def bpffs() -> str:
    """/sys/fs/bpf, mounted if it is not (struct_ops maps are pinned there)."""
    if subprocess.run(["mountpoint", "-q", "/sys/fs/bpf"]).returncode != 0:
        subprocess.run(["mount", "-t", "bpf", "bpf", "/sys/fs/bpf"], check=True)
    return "/sys/fs/bpf"


@pytest.fixture(scope="session")
def xcubic(bpffs: str, bin_dir: Path) -> Iterator[str]:
    """xcubic loaded once for the test run; yields its pin dir."""
    pin = f"{bpffs}/xtknobs-test-{os.getpid()}"
    res = subprocess.run([str(bin_dir / "xcubic"), "load", "--pin", pin], capture_output=True, text=True)
    if res.returncode != 0:
        pytest.fail(f"xcubic load failed: {res.stderr.strip()}")
    try:
        yield pin
    finally:
        subprocess.run([str(bin_dir / "xcubic"), "unload", "--pin", pin], check=True)
