"""The block case for a few seconds: a loop device of its own over a file on the host's disk, fio
on it, two contenders applied through xrtd (defaults, TuneD's throughput-performance: its [disk]
readahead on the device's queue, its vm.* sysctls host-wide); fio's figures are parsed and
positive, the host's sysctls equal before and after, and no loop device or file is left."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cases import block
from cases.run import host_values, run_case


def loop_devices() -> set[str]:
    return {p.name for p in Path("/sys/block").iterdir() if p.name.startswith("loop")}


@pytest.mark.timeout(120)
def test_block_case_two_contenders_restores_the_host() -> None:
    for tool in ("fio", "losetup"):
        assert shutil.which(tool), f"{tool} is missing: `make setup` installs scripts/apt-packages.txt"
    keys = ["vm.dirty_ratio", "vm.dirty_background_ratio", "vm.swappiness"]
    before, devices = host_values(keys), loop_devices()
    out = run_case(block.CASE, reps=1, budget=1, quick=True, log=lambda _m: None,
                   only={"defaults", "tuned-throughput-performance", "defaults-observed"})  # fmt: skip
    assert set(out["contenders"]) == {"defaults", "tuned-throughput-performance"}
    tuned = out["contenders"]["tuned-throughput-performance"]
    readahead = [t for t in tuned["values"] if t.endswith("/queue/read_ahead_kb")]
    assert len(readahead) == 1 and tuned["values"][readahead[0]] >= 4096
    assert tuned["values"]["vm.swappiness"] == 10
    assert any(n["key"] == "net.core.somaxconn" for n in tuned["not_applicable"])
    assert readahead[0] in out["device_values_before"]
    for c in out["contenders"].values():
        assert c["failed_runs"] == 0 and c["objective"]["mean"] > 0 and c["p99_ms"]["mean"] > 0
    # One repetition pairs each contender with the other once: a ratio, no interval, no verdict.
    ratio = tuned["paired"]["defaults"]
    assert ratio["n"] == 1 and ratio["geomean"] > 0 and ratio["low"] is None
    assert out["verdict"]["beats_defaults"] == [] and out["verdict"]["beats_every_other"] == []
    assert out["host_restored"] and out["place_restored"]
    assert host_values(keys) == before
    assert loop_devices() == devices
    # xobserve's block family scoped to the case's device saw the fio run.
    observed = out["observer_overhead"]
    assert observed["failed_runs"] == [] and "--block-dev" in observed["xobserve"]
    assert observed["seen_per_s"]["block_ops"]["mean"] > 0


def test_bo_file_benchmark_starts_with_the_interpreter() -> None:
    """The BO file runs fio's wrapper as `${PYTHON} script ...`: with no arguments it gets past its
    imports to its usage message."""
    from cases.case import HERE
    from xtune.config import load

    variables = {"DEVICE": "loop0", "CASES": str(HERE), "PYTHON": sys.executable, "SECONDS": "1"}
    variables["BUDGET"] = "1"
    slo = load(block.CASE.bo_file, variables)
    assert slo.benchmark is not None and slo.benchmark.command[1].endswith("fio_json.py")
    out = subprocess.run(slo.benchmark.command[:2], capture_output=True, text=True, timeout=30)
    assert "Error" not in out.stderr and "usage" in out.stderr.lower(), out.stderr[-400:]
