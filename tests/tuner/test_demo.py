"""`xtune demo --short`: the end-to-end job runs, prints before/after and writes the report."""

from __future__ import annotations

import subprocess
from pathlib import Path

from xtune import paths


def test_demo_short(tmp_path: Path) -> None:
    res = subprocess.run(
        [str(paths.ROOT / ".venv/bin/xtune"), "demo", "--short", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        env={"COLUMNS": "200", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
    )
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    out = res.stdout
    assert "before / after" in out and "knob rcv_buf_max" in out and "knob snd_buf_max" in out
    gain_line = next(line for line in out.splitlines() if "gain" in line)
    assert "+" in gain_line, gain_line  # a measured improvement of p99 RTT
    for name in ("index.html", "objective.png", "knobs.png", "slo_margin.png"):
        assert (tmp_path / "report" / name).stat().st_size > 0
    assert (tmp_path / "trials.db").exists()
