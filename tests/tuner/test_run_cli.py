"""`xtune run FILE`, then `xtune trials` and `xtune report` on its store, as a user runs them."""

from __future__ import annotations

import subprocess
from pathlib import Path

from conftest import HERE, Lab
from xtune import paths
from xtune.services import free_port

XTUNE = str(paths.ROOT / ".venv/bin/xtune")


def test_run_trials_report(lab: Lab, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'trials.db'}"
    args = [XTUNE, "run", str(HERE / "slo_good/bufferbloat-bo.yaml"), "--db", db]
    args += ["--xrtd-socket", lab.svc.xrtd_socket, "--metrics-addr", f"127.0.0.1:{free_port()}"]
    args += ["--report", str(tmp_path / "report")]
    for name, value in lab.variables().items():
        args += ["--var", f"{name}={value}"]
    env = {"COLUMNS": "200", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    res = subprocess.run(args, capture_output=True, text=True, timeout=300, env=env)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert "before / after" in res.stdout and "baseline" in res.stdout
    assert (tmp_path / "report/index.html").exists()

    res = subprocess.run([XTUNE, "trials", "--db", db], capture_output=True, text=True, env=env, check=True)
    assert (
        "test-bufferbloat-bo" in res.stdout
        and res.stdout.count("completed") + res.stdout.count("infeasible") == 4
    )

    res = subprocess.run(
        [XTUNE, "report", "1", "--db", db, "--out", str(tmp_path / "again")],
        capture_output=True,
        text=True,
        env=env,
    )
    assert res.returncode == 0 and (tmp_path / "again/objective.png").stat().st_size > 0
