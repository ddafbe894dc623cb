"""The command line end to end: analyze, attach two perf-consts as one transaction, set, status,
detach; bad scope tables and unknown pids get clear errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import oracle
import targets
from xtune.sie import attach as eng
from xtune.sie.scope import SCOPE_VERSION

XTUNE = str(Path(sys.executable).parent / "xtune")


def xtune(*args: str, env: dict[str, str], ok: bool = True) -> subprocess.CompletedProcess[str]:
    r = subprocess.run([XTUNE, *args], capture_output=True, text=True, env=env)
    if ok:
        assert r.returncode == 0, r.stderr
    return r


def test_cli_two_consts_one_transaction(tmp_path, engine):
    env = {**os.environ, "XTUNE_SIE_STATE": str(tmp_path / "state")}
    k = targets.analyzed("two_consts", [100, 50, 300], flags="-O2")
    spec = tmp_path / "l.toml"
    src = targets.TARGETS / "two_consts.c"
    spec.write_text(
        f'source = "{src}"\nconstant = "L"\nvalues = [7, 9, 40]\nbuild = "gcc -O2 -o {{out}} {{src}}"\n'
    )
    out = xtune("analyze", str(spec), "-o", str(tmp_path / "l.json"), env=env).stdout
    assert "L: 1 span(s), 0 refusal(s)" in out
    (tmp_path / "k.json").write_text(k.to_json())
    t = oracle.Target(Path(k.binary.path))
    try:
        assert t.ask([500]) == ["400 521"]
        pid = str(t.p.pid)
        scopes = ["--scope", str(tmp_path / "k.json"), "--scope", str(tmp_path / "l.json")]
        xtune("sie", "attach", "--pid", pid, *scopes, env=env)
        xtune("sie", "set", "--pid", pid, "K", "20", env=env)
        xtune("sie", "set", "--pid", pid, "L", "100", env=env)
        assert t.ask([500]) == ["480 800"]
        status = json.loads(xtune("sie", "status", "--pid", pid, env=env).stdout)
        assert status["values"] == {"K": 20, "L": 100}
        low = k.consts[0].min_value
        assert low is not None and low > 1
        r = xtune("sie", "set", "--pid", pid, "K", str(low - 1), env=env, ok=False)
        assert r.returncode == 1 and f"is below {low}, where the analysis holds" in r.stderr
        r = xtune("sie", "set", "--pid", pid, "M", "1", env=env, ok=False)
        assert r.returncode != 0 and "no perf-const 'M'" in r.stderr
        xtune("sie", "detach", "--pid", pid, env=env)
        assert t.ask([500]) == ["400 521"]
        assert eng.spans_hold_original(t.p.pid, k)
    finally:
        t.close()


def test_cli_bad_inputs(tmp_path, engine):
    env = {**os.environ, "XTUNE_SIE_STATE": str(tmp_path / "state")}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"version": SCOPE_VERSION, "binary": {}, "consts": []}))
    r = xtune("sie", "attach", "--pid", "1", "--scope", str(bad), env=env, ok=False)
    assert r.returncode == 1 and "$.binary.path: missing" in r.stderr
    k = targets.analyzed("two_consts", [100, 50, 300], flags="-O2")
    (tmp_path / "k.json").write_text(k.to_json())
    r = xtune(
        "sie", "attach", "--pid", str(2**22 + 17), "--scope", str(tmp_path / "k.json"), env=env, ok=False
    )
    assert r.returncode == 1 and "no such process" in r.stderr
    r = xtune("sie", "detach", "--pid", str(2**22 + 17), env=env, ok=False)
    assert r.returncode == 1 and "not attached" in r.stderr
    spec = tmp_path / "s.toml"
    spec.write_text('source = "missing.c"\nconstant = "K"\nvalues = [1, 2]\nbuild = "cc -o {out} {src}"\n')
    r = xtune("analyze", str(spec), "-o", str(tmp_path / "o.json"), env=env, ok=False)
    assert r.returncode == 2 and "field `source`" in r.stderr
