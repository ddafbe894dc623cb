"""`xtune demo --short`: the three phases run end to end, print before/after and write their reports.

Phase 1 tunes socket buffers through a bottleneck; phase 2 tunes the dataplane server's
compiled-in RX_BATCH_SIZE through SIE (xrtd's sie-user backend) and must leave the process text
byte-exact; phase 3 trains a tree from a short sweep and runs it live at 1 ms windows: its table,
its plot, at least one change of the value, the text byte-exact after. Whether the tree beats the
compiled value is not asserted here: one short run says little, experiments/bench_adaptive_dataplane.py
measures it. `--json` writes the same tables' figures as data (experiments/bench_demo.py reads them)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from xtune import paths


def test_demo_short(tmp_path: Path) -> None:
    doc = tmp_path / "figures.json"
    res = subprocess.run(
        [str(paths.ROOT / ".venv/bin/xtune"), "demo", "--short", "--out", str(tmp_path), "--json", str(doc)],
        capture_output=True,
        text=True,
        timeout=420,
        env={"COLUMNS": "200", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
    )
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    out = res.stdout
    assert "before / after" in out and "knob rcv_buf_max" in out and "knob snd_buf_max" in out
    gains = [line for line in out.splitlines() if re.search(r"\bgain\b", line)]
    assert len(gains) == 2, gains
    # p99 RTT, then the dataplane's batch latency: each strictly better than before ("+0.0 %" fails).
    for line in gains:
        m = re.search(r"([+-]\d+(?:\.\d+)?) %", line)
        assert m and float(m.group(1)) > 0, gains
    knob = next(line for line in out.splitlines() if "knob rx_batch_size" in line)
    before, after = (int(v) for v in re.findall(r"\d+", knob)[-2:])
    assert before == 64 and 8 <= after < 64, knob  # compiled value -> a smaller batch bound
    assert "RX_BATCH_SIZE restored on exit: process text byte-exact" in out
    assert "xtune adaptive: before / after" in out
    changes = next(line for line in out.splitlines() if "value changes" in line)
    assert int(re.findall(r"\d+", changes)[-1]) >= 1, changes  # the tree moved the value
    assert "RX_BATCH_SIZE restored after the adaptive phase: process text byte-exact" in out
    # Times and rates with their units, scaled for reading: 962 µs, 5.18 ms, 12,390 req/s.
    assert not re.search(r"\d us\b", out), [line for line in out.splitlines() if re.search(r"\d us\b", line)]
    client = next(line for line in out.splitlines() if line.startswith("client-measured p50"))
    time = r"[\d.,]+ (ms|µs)"
    assert re.search(rf"RX_BATCH_SIZE 64: {time}, RX_BATCH_SIZE \d+: {time}$", client), client
    assert re.search(r"throughput \(answered\).*[\d,]+ req/s", out), out
    assert (tmp_path / "report-adaptive" / "p99_over_time.png").stat().st_size > 0
    for report in ("report", "report-sie"):
        for name in ("index.html", "objective.png", "knobs.png", "slo_margin.png"):
            assert (tmp_path / report / name).stat().st_size > 0
    assert (tmp_path / "trials.db").exists()
    # The figures as data: the values the tables print.
    figures = json.loads(doc.read_text())
    assert figures["sie"]["knobs"]["rx_batch_size"] == {"before": 64, "after": after}
    assert figures["sie"]["text_restored"] and figures["adaptive"]["text_restored"]
    for phase in ("bufferbloat", "sie"):
        f = figures[phase]
        assert f["after"]["objective"] < f["before"]["objective"], f  # the gains asserted above
        assert f["trials"] >= 1 and len(f["slo"]) == 1 and f["slo"][0]["after"] > 0, f
    assert figures["adaptive"]["changes"] == int(re.findall(r"\d+", changes)[-1])
    assert len(figures["adaptive"]["phases"]) == 3
