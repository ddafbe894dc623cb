"""`xtune run FILE`, then `xtune trials` and `xtune report` on its store, as a user runs them."""

from __future__ import annotations

import subprocess
from pathlib import Path

from conftest import HERE, Lab
from test_report import Page
from xtune import paths
from xtune.host.services import free_port

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
    page = Page()
    page.feed((tmp_path / "report/index.html").read_text())
    text = "".join(page.text)
    # Four trials may find nothing that holds up when measured again: then the summary says why.
    changed = "\u2192" in page.summary or "the start's values are kept" in page.summary
    assert " ms" in page.summary and changed and "rollbacks: " in page.summary, page.summary
    assert "{" not in text and "e+" not in text and "e-0" not in text, text

    res = subprocess.run([XTUNE, "trials", "--db", db], capture_output=True, text=True, env=env, check=True)
    rows = "\n".join(line for line in res.stdout.splitlines() if line.lstrip().startswith(("│", "|")))
    assert "test-bufferbloat-bo" in res.stdout and rows.count("completed") + rows.count("infeasible") == 4
    assert "rollbacks:" in res.stdout  # the run's one-line summary under its table

    res = subprocess.run(
        [XTUNE, "report", "1", "--db", db, "--out", str(tmp_path / "again")],
        capture_output=True,
        text=True,
        env=env,
    )
    assert res.returncode == 0 and (tmp_path / "again/objective.png").stat().st_size > 0


def test_sweep_records_every_value_under_every_regime_then_restores(lab: Lab, tmp_path: Path) -> None:
    """`xtune sweep` applies each value through xrtd under each load and records labelled cells
    that the regime trainer reads; the sysctl is back at its original value afterwards."""
    from xtune.learning.regimes import read_landscape

    original = lab.net.sysctl(lab.net.receiver, "net.ipv4.tcp_rmem").split()[2]
    bulk = f"{lab.bulk} --server-netns {lab.net.path(lab.net.receiver)}"
    bulk += f" --client-netns {lab.net.path(lab.net.sender)} --addr {lab.net.receiver_addr}"
    out = tmp_path / "sweep.xtrec"
    args = [XTUNE, "sweep", str(HERE / "slo_good/bufferbloat-bo.yaml"), "--knob", "rcv_buf_max"]
    args += ["--values", "65536,4194304", "--regime", f"bulk={bulk}", "--regime", "idle=sleep 30"]
    args += ["--seconds", "1.0", "--settle", "0.3", "--out", str(out), "--xrtd-socket", lab.svc.xrtd_socket]
    for name, value in lab.variables().items():
        args += ["--var", f"{name}={value}"]
    res = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    land = read_landscape([out], "rcv_buf_max", "tcp.srtt.p99", "func.bulk_chunk.rate", settle=0)
    assert set(land.cells) == {"bulk", "idle"}
    assert all(
        set(cells) == {65536, 4194304} and all(c.frames for c in cells.values())
        for cells in land.cells.values()
    )
    assert land.cells["bulk"][65536].mean("func.bulk_chunk.rate") > 0
    assert lab.net.sysctl(lab.net.receiver, "net.ipv4.tcp_rmem").split()[2] == original

    bad = subprocess.run(args[:3] + ["--knob", "nope"] + args[5:], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "no knob 'nope'" in bad.stderr
