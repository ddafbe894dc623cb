"""The database case once, quickly: a private PostgreSQL cluster in a namespace, pgbench in the
client's, the defaults contender only; pgbench's TPS is parsed and positive, the host unchanged."""

from __future__ import annotations

import shutil

import pytest
from cases import db
from cases.run import host_values, run_case
from xtune.testing.postgres import pg_bin


@pytest.mark.timeout(120)
def test_db_case_defaults_parses_positive_tps() -> None:
    for tool in ("pgbench", "psql", "pg_isready"):
        assert shutil.which(tool), f"{tool} is missing: `make setup` installs scripts/apt-packages.txt"
    assert (pg_bin() / "initdb").exists()
    keys = ["net.ipv4.tcp_rmem", "net.core.somaxconn", "vm.dirty_ratio"]
    before = host_values(keys)
    out = run_case(db.CASE, reps=1, budget=1, quick=True, log=lambda _m: None, only={"defaults"})
    assert set(out["contenders"]) == {"defaults"}
    defaults = out["contenders"]["defaults"]
    assert defaults["failed_runs"] == 0
    assert defaults["objective"]["mean"] > 0 and defaults["p99_ms"]["mean"] > 0
    assert out["host_restored"] and out["place_restored"]
    assert host_values(keys) == before
