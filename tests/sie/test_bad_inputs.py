"""Bad input is refused with a clear reason; the target is never left patched or stopped."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

import pytest
import targets
from xtune.sie import attach as eng
from xtune.sie import scope as sc
from xtune.sie.spec import SpecError, spec_from_dict
from xtune.testing import sie_oracle as oracle


def proc_state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def assert_untouched(pid: int, table: sc.ScopeTable) -> None:
    assert eng.spans_hold_original(pid, table)
    assert proc_state(pid) not in ("t", "T"), "target left stopped"
    assert not (eng.STATE_ROOT / str(pid)).exists()


def test_unknown_pid(engine):
    table = targets.analyzed("mt_target", [100, 50, 300])
    with pytest.raises(eng.SieError, match="no such process"):
        eng.attach(2**22 + 17, table, ["K"])


def test_other_build_refused(engine):
    table = targets.analyzed("mt_target", [100, 50, 300])
    other = targets.analyzed("mt_target", [50, 100, 300])  # same program built with K = 50
    t = oracle.Target(Path(other.binary.path))
    try:
        t.ask([1])
        with pytest.raises(eng.SieError, match="another build"):
            eng.attach(t.p.pid, table, ["K"])
        assert_untouched(t.p.pid, other)
        assert t.ask([3]) == [str(3 + 1000000)]
    finally:
        t.close()


def busy() -> tuple[sc.ScopeTable, subprocess.Popen[str]]:
    table = targets.analyzed("busy_target", [100, 50, 300], flags="-O2")
    assert table.consts[0].tunable, table.consts[0].refusals
    p = subprocess.Popen([table.binary.path], stdout=subprocess.PIPE, text=True)
    assert p.stdout and p.stdout.readline().strip() == "ready"
    return table, p


def test_span_occupied_too_long(engine):
    table, p = busy()
    try:
        t0 = time.monotonic()
        with pytest.raises(eng.SieError, match=r"inside a safe span of K for longer than 300 ms"):
            eng.attach(p.pid, table, ["K"], timeout_ms=300)
        assert time.monotonic() - t0 < 10
        assert_untouched(p.pid, table)
    finally:
        p.kill()
        p.wait()


def test_target_exits_during_attach(engine):
    table, p = busy()
    errors: list[str] = []

    def attach() -> None:
        try:
            eng.attach(p.pid, table, ["K"], timeout_ms=20000)
        except eng.SieError as e:
            errors.append(str(e))

    th = threading.Thread(target=attach)
    th.start()
    time.sleep(0.5)
    p.kill()
    p.wait()
    th.join(30)
    assert not th.is_alive()
    assert errors and "exited" in errors[0]
    assert not (eng.STATE_ROOT / str(p.pid)).exists()


def test_bad_scope_tables(tmp_path):
    table = targets.analyzed("mt_target", [100, 50, 300])
    good = json.loads(table.to_json())
    cases = {
        "version": ({**good, "version": 99}, r"\$\.version: Input should be 2, not 99"),
        "expected": (_edit(good, "expected", "zz"), r"\$\.consts\[0\]\.spans\[0\]\.expected: not a hex"),
        "patch": (
            _edit(good, "patch", "nop"),
            r"\.spans\[0\]\.patch: Input should be 'jump' or 'int3', not 'nop'",
        ),
        "safe": (_edit(good, "safe", []), r"\.safe: a span needs at least one safe range"),
        "update": (
            _edit(good, "update", {**good["consts"][0]["spans"][0]["update"], "kind": "scale"}),
            r"\.spans\[0\]\.update: a scale update needs register, probe and v0",
        ),
        "group": (
            _edit(good, "group", -1),
            r"\.spans\[0\]\.group: Input should be greater than or equal to 0, not -1",
        ),
        "multiple_of": (
            _edit_const(good, "multiple_of", 0),
            r"\.consts\[0\]\.multiple_of: Input should be greater than or equal to 1, not 0",
        ),
        "power_of_two": (
            _edit_const(good, "power_of_two", 1),
            r"\.consts\[0\]\.power_of_two: Input should be a valid boolean, not 1",
        ),
        **_rules_across_fields(good),
    }
    for name, (data, msg) in cases.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(data))
        with pytest.raises(sc.ScopeError, match=msg):
            sc.load(str(path))
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(sc.ScopeError, match="not JSON: line 1"):
        sc.load(str(tmp_path / "broken.json"))
    assert sc.ScopeTable.from_json(table.to_json()).to_json() == table.to_json()


def _rules_across_fields(good: dict) -> dict[str, tuple[dict, str]]:
    """Tables breaking a rule between fields, each with the path and reason the error must give."""
    span = good["consts"][0]["spans"][0]
    update, compiled = span["update"], good["consts"][0]["values"][0]
    twice = json.loads(json.dumps(good))
    twice["consts"].append(twice["consts"][0])
    library = {**good, "binary": {**good["binary"], "library": "libk.so", "build_id": ""}}
    return {
        "probe": (
            _edit(good, "update", {**update, "probe": span["end"] + 1}),
            r"\.spans\[0\]\.update\.probe: 0x[0-9a-f]+ is outside the span",
        ),
        "v0": (
            _edit(good, "update", {**update, "v0": compiled + 1}),
            rf"\$\.consts\[0\]\.spans\[0\]\.update\.v0: {compiled + 1} is not the compiled value {compiled}",
        ),
        "pre_add": (
            _edit(good, "update", {**update, "pre_add": 3}),
            r"\.spans\[0\]\.update\.pre_add: only a scale update has one",
        ),
        "reloc": (
            _edit(good, "relocs", [{"offset": 10**6, "kind": "rel32", "target": 0}]),
            r"\.spans\[0\]\.relocs\[0\]\.offset: 1000000 is outside the trampoline",
        ),
        "end": (_edit(good, "end", span["end"] + 1), r"\.spans\[0\]: \[start, end\) = .* expected bytes"),
        "safe range": (
            _edit(good, "safe", [{"start": 5, "end": 5}]),
            r"\.spans\[0\]\.safe\[0\]: empty range",
        ),
        "exits": (_edit(good, "exits", [-1]), r"\.spans\[0\]\.exits\[0\]: Input should be greater than"),
        "unknown field": (_edit(good, "typo", 1), r"\.spans\[0\]\.typo: not a field of this document"),
        "names": (twice, r"\$\.consts: perf-const names must be unique"),
        "library": (library, r"\$\.binary\.build_id: a shared library needs its build id"),
    }


def test_old_tables_load_and_constraints_hold():
    """Tables written before `group`, `multiple_of` and `power_of_two` existed still load; the
    machine-readable constraints are what `check_value` enforces."""
    table = targets.analyzed("mt_target", [100, 50, 300])
    data = json.loads(table.to_json())
    const = data["consts"][0]
    assert const["min_value"] is not None and const["max_value"] is not None, "spans imply a range"
    for key in ("multiple_of", "power_of_two"):
        del const[key]
    for span in const["spans"]:
        del span["group"]
    old = sc.ScopeTable.from_dict(data).consts[0]
    assert (old.multiple_of, old.power_of_two, [s.group for s in old.spans]) == (
        1,
        False,
        [0] * len(old.spans),
    )
    c = sc.ScopeTable.from_json(table.to_json()).consts[0]
    c.min_value, c.max_value, c.multiple_of = 1, 10_000, 12
    c.check_value(96)
    with pytest.raises(sc.ScopeError, match="K: 100 is not a multiple of 12"):
        c.check_value(100)
    c.multiple_of, c.power_of_two = 1, True
    c.check_value(128)
    with pytest.raises(sc.ScopeError, match="K: 96 is not a power of two"):
        c.check_value(96)


def _edit_const(good: dict, key: str, value: object) -> dict:
    data = json.loads(json.dumps(good))
    data["consts"][0][key] = value
    return data


def _edit(good: dict, key: str, value: object) -> dict:
    data = json.loads(json.dumps(good))
    data["consts"][0]["spans"][0][key] = value
    return data


def test_bad_specs(tmp_path):
    src = tmp_path / "a.c"
    src.write_text("#define N 4\nint f(int x) { return x * N; }\n")
    spec = tmp_path / "spec.toml"
    base = {"source": "a.c", "constant": "N", "values": [4, 8], "build": "gcc -c -o {out} {src}"}
    with pytest.raises(SpecError, match="field `values`: need at least two"):
        spec_from_dict({**base, "values": [4]}, spec)
    with pytest.raises(SpecError, match="does not exist"):
        spec_from_dict({**base, "source": "missing.c"}, spec)
    with pytest.raises(SpecError, match="expected exactly one `#define M`"):
        spec_from_dict({**base, "constant": "M"}, spec)
    with pytest.raises(SpecError, match=r"needs the \{out\} placeholder"):
        spec_from_dict({**base, "build": "gcc -c {src}"}, spec)
    with pytest.raises(SpecError, match="field `persistent` must be true or false"):
        spec_from_dict({**base, "persistent": "yes"}, spec)
    spec_from_dict(base, spec)


def test_more_threads_than_the_engine_checks_refused(engine):
    """Past TARGET_MAX_THREADS (1024) a thread could not be checked for quiescence: arming is
    refused with that reason, never done with threads left untraced."""
    table = targets.analyzed("many_threads", [100, 50, 300])
    cmd = [table.binary.path, "1030"]
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        with pytest.raises(eng.SieError, match="more than 1024 threads"):
            eng.attach(p.pid, table, ["K"])
        assert_untouched(p.pid, table)
    finally:
        p.kill()
        p.wait()
