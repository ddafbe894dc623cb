"""Which build a process runs: a binary linked without a build id is identified by the SHA-256 of
the file it mapped (the plan's `binary - SHA256` line), so the engine refuses another build of it
rather than patch it, with both hashes and what to do."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest
import targets
from xtune.sie import attach as eng
from xtune.testing import sie_oracle as oracle

NO_BUILD_ID = "-O2 -Wl,--build-id=none"


def no_build_id(values: list[int]):
    table = targets.analyzed("fork_target", values, flags=NO_BUILD_ID)
    assert table.consts[0].tunable, table.consts[0].refusals
    assert not table.binary.build_id, "linked with --build-id=none"
    assert table.binary.sha256 == hashlib.sha256(Path(table.binary.path).read_bytes()).hexdigest()
    return table


def arm(engine: Path, pid: int, plan_text: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    plan = tmp_path / "plan"
    plan.write_text(plan_text)
    return subprocess.run(
        [str(engine), "arm", "--pid", str(pid), "--plan", str(plan), "--state", str(tmp_path / "st")],
        capture_output=True,
        text=True,
    )


def test_plan_names_the_sha256_without_a_build_id():
    table = no_build_id([100, 50, 300])
    assert f"\nbinary - {table.binary.sha256}\n" in eng.plan_text(table, ["K"])


def test_identical_file_without_a_build_id_attaches(engine, tmp_path):
    table = no_build_id([100, 50, 300])
    prog = tmp_path / "prog"
    shutil.copy(table.binary.path, prog)
    t = oracle.LineTarget(str(prog))
    try:
        assert t.ask("3000") == oracle.worker_answer(3000, 100)
        eng.attach(t.p.pid, table, ["K"])
        eng.set_value(t.p.pid, "K", 250)
        assert t.ask("3000") == oracle.worker_answer(3000, 250)
        eng.detach(t.p.pid)
        assert eng.spans_hold_original(t.p.pid, table)
    finally:
        t.close()


def test_rebuild_without_a_build_id_refused(engine, tmp_path):
    """The plan of one build, the process started from the same path after a rebuild with another
    constant: refused by the file's hash, before any byte is checked or written."""
    table = no_build_id([100, 50, 300])
    rebuilt = no_build_id([300, 50, 100])  # the same program built with K = 300
    assert rebuilt.binary.sha256 != table.binary.sha256
    prog = tmp_path / "prog"
    shutil.copy(rebuilt.binary.path, prog)
    t = oracle.LineTarget(str(prog))
    try:
        assert t.ask("3000") == oracle.worker_answer(3000, 300)
        r = arm(engine, t.p.pid, eng.plan_text(table, ["K"], "/dev/shm/unused"), tmp_path)
        assert r.returncode == 1, r.stderr
        want = (str(prog), "no build id", rebuilt.binary.sha256, table.binary.sha256, "analyze the running")
        for part in want:
            assert part in r.stderr, r.stderr
        assert eng.spans_hold_original(t.p.pid, rebuilt)
        assert t.ask("3000") == oracle.worker_answer(3000, 300)
    finally:
        t.close()


@pytest.mark.parametrize("build_id", [False, True], ids=["no_build_id", "build_id_dropped"])
def test_plan_with_another_sha256_refused(engine, tmp_path, build_id):
    """Every span's bytes match; only the plan's hash differs (with no build id in the plan, also
    when the binary has one): refused on the hash alone."""
    if build_id:
        table = targets.analyzed("fork_target", [100, 50, 300], flags="-O2")
        assert table.binary.build_id
    else:
        table = no_build_id([100, 50, 300])
    good = eng.plan_text(table, ["K"], "/dev/shm/unused")
    line = f"binary {table.binary.build_id or '-'} {table.binary.sha256}"
    bad = good.replace(line, f"binary - {'0' * 64}")
    assert bad != good
    t = oracle.LineTarget(table.binary.path)
    try:
        t.ask("1")
        r = arm(engine, t.p.pid, bad, tmp_path)
        assert r.returncode == 1 and "SHA-256" in r.stderr and table.binary.sha256 in r.stderr, r.stderr
        assert "another build" in r.stderr, r.stderr
        r = arm(engine, t.p.pid, good.replace(line, "binary - -"), tmp_path)
        assert r.returncode == 1 and "neither the build id nor the SHA-256" in r.stderr, r.stderr
        assert eng.spans_hold_original(t.p.pid, table)
        assert t.ask("3000") == oracle.worker_answer(3000, 100)
    finally:
        t.close()
