"""The command line end to end, through a private xrtd: analyze, attach two perf-consts (xrtd
sie-user knobs of one plan, armed in one stop), set (journaled and audited by xrtd; a value outside
the analysis's range refused and the process left as it was), status, detach; bad scope tables,
unknown pids and a missing xrtd get clear errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import targets
from xtune.sie import attach as eng
from xtune.sie.scope import SCOPE_VERSION
from xtune.testing import sie_oracle as oracle
from xtune.testing.sched import sched_fields
from xtune.testing.xrtd import Xrtd

XTUNE = str(Path(sys.executable).parent / "xtune")


def xtune(*args: str, env: dict[str, str], ok: bool = True) -> subprocess.CompletedProcess[str]:
    r = subprocess.run([XTUNE, *args], capture_output=True, text=True, env=env)
    if ok:
        assert r.returncode == 0, r.stderr
    return r


def engine_sched(x: Xrtd) -> dict[str, int]:
    """The scheduling of the SIE engine xrtd started (`xsie-user run`, its only child)."""
    assert x.proc is not None
    tasks = Path(f"/proc/{x.proc.pid}/task").iterdir()  # the thread that forked it holds it
    children = [c for task in tasks for c in (task / "children").read_text().split()]
    assert len(children) == 1, children
    return sched_fields(int(children[0]))[int(children[0])]


def test_cli_two_consts_one_plan(tmp_path, engine):
    env = {**os.environ, "XTUNE_SIE_STATE": str(tmp_path / "sie")}
    k = targets.analyzed("two_consts", [100, 50, 300], flags="-O2")
    spec = tmp_path / "l.toml"
    src = targets.TARGETS / "two_consts.c"
    spec.write_text(
        f'source = "{src}"\nconstant = "L"\nvalues = [7, 9, 40]\nbuild = "gcc -O2 -o {{out}} {{src}}"\n'
    )
    out = xtune("analyze", str(spec), "-o", str(tmp_path / "l.json"), env=env).stdout
    assert "L: 1 span(s), 0 refusal(s)" in out
    (tmp_path / "k.json").write_text(k.to_json())
    low, high = k.consts[0].min_value, k.consts[0].max_value
    assert low is not None and low > 1 and high is not None
    t = oracle.Target(Path(k.binary.path))
    x = Xrtd(tmp_path).start()
    try:
        assert t.ask([500]) == ["400 521"]
        pid = str(t.p.pid)
        sock = ["--socket", x.socket]
        scopes = ["--scope", str(tmp_path / "k.json"), "--scope", str(tmp_path / "l.json")]
        xtune("sie", "attach", "--pid", pid, *scopes, *sock, env=env)
        r = xtune("sie", "set", "--pid", pid, "K", str(high + 1), *sock, env=env, ok=False)
        assert r.returncode == 1 and f"value {high + 1} out of bounds [{low}, {high}]" in r.stderr
        assert eng.spans_hold_original(t.p.pid, k), "a refused first value must not arm the process"
        xtune("sie", "set", "--pid", pid, "K", "20", "--reason", "cli test: K", *sock, env=env)
        xtune("sie", "set", "--pid", pid, "L", "100", *sock, env=env)
        assert t.ask([500]) == ["480 800"]
        assert engine_sched(x) == {"policy": 0, "se.slice": 100_000}, "each change wakes it: a short slice"
        status = json.loads(xtune("sie", "status", "--pid", pid, *sock, env=env).stdout)
        assert status["values"] == {"K": 20, "L": 100}
        r = xtune("sie", "set", "--pid", pid, "K", str(low - 1), *sock, env=env, ok=False)
        assert r.returncode == 1 and f"value {low - 1} out of bounds [{low}, {high}]" in r.stderr
        assert t.ask([500]) == ["480 800"], "a refused value changes nothing in the process"
        r = xtune("sie", "set", "--pid", pid, "M", "1", *sock, env=env, ok=False)
        assert r.returncode == 1 and "no perf-const 'M' attached" in r.stderr
        sets = [r for r in map(json.loads, x.journal()) if r["op"] == "set"]
        assert [(s["knob"], s["new"]) for s in sets] == [(f"{pid}:K", 20), (f"{pid}:L", 100)], sets
        audit = x.audit()
        assert f"knob={pid}:K backend=sie-user" in audit and "100 -> 20 applied" in audit
        assert 'reason="cli test: K"' in audit
        assert f"100 -> {high + 1} refused" in audit and f"20 -> {low - 1} refused" in audit
        xtune("sie", "detach", "--pid", pid, *sock, env=env)
        assert t.ask([500]) == ["400 521"]
        assert eng.spans_hold_original(t.p.pid, k)
        assert x.client().list() == []
    finally:
        x.cleanup()
        t.close()


def test_cli_bad_inputs(tmp_path, engine):
    env = {**os.environ, "XTUNE_SIE_STATE": str(tmp_path / "sie")}
    x = Xrtd(tmp_path).start()
    sock = ["--socket", x.socket]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"version": SCOPE_VERSION, "binary": {}, "consts": []}))
    r = xtune("sie", "attach", "--pid", "1", "--scope", str(bad), env=env, ok=False)
    assert r.returncode == 1 and "$.binary.path: missing" in r.stderr
    k = targets.analyzed("two_consts", [100, 50, 300], flags="-O2")
    (tmp_path / "k.json").write_text(k.to_json())
    gone = str(2**22 + 17)
    try:
        r = xtune(
            "sie", "attach", "--pid", gone, "--scope", str(tmp_path / "k.json"), *sock, env=env, ok=False
        )
        assert r.returncode == 1 and "no such process" in r.stderr
        r = xtune("sie", "detach", "--pid", gone, *sock, env=env, ok=False)
        assert r.returncode == 1 and "not attached" in r.stderr
        assert x.client().list() == []
    finally:
        x.cleanup()
    missing = str(tmp_path / "no-xrtd.sock")
    r = xtune("sie", "set", "--pid", gone, "K", "20", "--socket", missing, env=env, ok=False)
    assert r.returncode == 1 and f"cannot connect to xrtd at {missing}" in r.stderr
    assert f"xrtd --socket {missing} --state-dir" in r.stderr
    # Without an xrtd, attach leaves no plan behind (one would block every later attach).
    live = str(os.getpid())
    r = xtune(
        "sie",
        "attach",
        "--pid",
        live,
        "--scope",
        str(tmp_path / "k.json"),
        "--socket",
        missing,
        env=env,
        ok=False,
    )
    assert r.returncode == 1 and f"cannot connect to xrtd at {missing}" in r.stderr
    assert not list((tmp_path / "sie").rglob("*.plan")), "no plan is left without an xrtd"
    spec = tmp_path / "s.toml"
    spec.write_text('source = "missing.c"\nconstant = "K"\nvalues = [1, 2]\nbuild = "cc -o {out} {src}"\n')
    r = xtune("analyze", str(spec), "-o", str(tmp_path / "o.json"), env=env, ok=False)
    assert r.returncode == 2 and "field `source`" in r.stderr


def test_cli_refused_constant_says_why(tmp_path):
    """A constant SIE refuses (also folded into .rodata as 1.0 / (K * K + 1), no c / K) is printed
    with its refusal and no range."""
    spec = tmp_path / "r.toml"
    src = Path(__file__).resolve().parent / "targets" / "data_words.c"
    spec.write_text(
        f'source = "{src}"\nconstant = "K"\nvalues = [64, 50, 80]\n'
        'build = "gcc -O2 -DSQUARE -o {out} {src} -lm"\n'
    )
    r = xtune("analyze", str(spec), "-o", str(tmp_path / "r.json"), env=dict(os.environ), ok=False)
    assert r.returncode == 1, r.stderr
    assert "also lives in data" in r.stdout and "not tunable: see the refusals above" in r.stdout
    assert "None" not in r.stdout, r.stdout
