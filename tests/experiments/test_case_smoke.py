"""The web case for a few seconds: real nginx and wrk in namespaces, two contenders applied through
xrtd (defaults, TuneD's network-throughput), the defaults again under xobserve, and the host's
sysctls equal before and after."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from cases import web
from cases.run import host_values, run_case


@pytest.mark.timeout(120)
def test_web_case_two_contenders_restores_the_host() -> None:
    for tool in ("nginx", "wrk"):
        assert shutil.which(tool), f"{tool} is missing: `make setup` installs scripts/apt-packages.txt"
    keys = ["net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem", "vm.dirty_ratio", "vm.swappiness", "net.core.somaxconn"]
    before = host_values(keys)
    out = run_case(web.CASE, reps=1, budget=1, quick=True, log=lambda _m: None,
                   only={"defaults", "tuned-network-throughput", "defaults-observed"})  # fmt: skip
    assert set(out["contenders"]) == {"defaults", "tuned-network-throughput"}
    tuned = out["contenders"]["tuned-network-throughput"]
    assert tuned["values"]["net.ipv4.tcp_rmem[2]"] == 16777216
    assert any(n["reason"].startswith("plugin [cpu]") for n in tuned["not_applicable"])
    for c in out["contenders"].values():
        assert c["failed_runs"] == 0 and c["objective"]["mean"] > 0
    assert out["host_restored"] and out["place_restored"]
    assert host_values(keys) == before
    # Not a contender: xobserve's cost on the load, judged only on runs its families saw.
    observed = out["observer_overhead"]
    assert observed["failed_runs"] == [] and observed["ratio"]["n"] == 1
    assert "--netns" in observed["xobserve"]
    seen = observed["seen_per_s"]
    assert seen["sched_wakeups"]["mean"] > 0 and seen["tcp_rtt_samples"]["mean"] > 0
    assert "defaults-observed" not in out["verdict"]["beats_defaults"]


@pytest.mark.parametrize("name", ["web", "db"])
def test_bo_file_workloads_start_with_an_interpreter_that_has_their_imports(name: str) -> None:
    """The BO files start the server (and pgbench's wrapper) as `${PYTHON} script ...`: run with no
    arguments, each script gets past its imports to its usage message. (The key-value case's file
    has no workload: the case starts the server whose process SIE retunes, test_kv_case_sie.py.)"""
    from cases import db
    from cases.case import Case
    from xtune.config import load
    from xtune.host.netns import VethPair

    case: Case = {"web": web.CASE, "db": db.CASE}[name]
    slo = load(case.bo_file, {**case.variables(VethPair(), Path("/nonexistent"), True), "BUDGET": "1"})
    commands = [slo.workload.command] + ([slo.benchmark.command] if slo.benchmark else [])
    scripts = [c[:2] for c in commands if c[1].endswith(".py")]
    assert scripts, f"{case.bo_file.name}: no Python script among its commands"
    for script in scripts:
        out = subprocess.run(script, capture_output=True, text=True, timeout=30)
        assert "Error" not in out.stderr and "usage" in out.stderr.lower(), (script, out.stderr[-400:])
