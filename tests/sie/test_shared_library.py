"""Perf-consts in a shared library the process loaded: analyzed from library builds, found in the
process by build id (spans relative to the library's load address), retuned live with the results
of rebuilt libraries, disarmed byte-exact; refused when the process loaded another build, none, or
two copies. And the corpus built as shared libraries through the rebuild oracle."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import targets
from xtune.sie import attach as eng
from xtune.sie.analyze import analyze
from xtune.sie.scope import ScopeTable
from xtune.sie.spec import Spec, SpecError, spec_from_dict
from xtune.sie.variants import build_one
from xtune.testing import sie_oracle as oracle

INPUTS = ["5", "60", "99", "100", "250", "500"]


def library_spec(**extra: object) -> Spec:
    data = {
        "source": "libk.c",
        "constant": "K",
        "values": [100, 50, 300],
        "library": "libk.so",
        "build": "gcc -O2 -shared -fPIC -o {out} {src}",
    }
    return spec_from_dict({**data, **extra}, targets.TARGETS / "spec.toml")


@pytest.fixture(scope="module")
def main_program(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("libk") / "libk_main"
    subprocess.run(["gcc", "-O2", "-o", str(out), str(targets.TARGETS / "libk_main.c")], check=True)
    return out


@pytest.fixture(scope="module")
def table() -> ScopeTable:
    t = analyze(library_spec())
    assert t.consts[0].tunable, t.consts[0].refusals
    return t


class Main:
    """libk_main: loads the libraries it is told to, answers compute(n) of the first."""

    def __init__(self, program: Path, *libraries: Path) -> None:
        self.p = subprocess.Popen([str(program)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for lib in libraries:
            assert self.ask(f"load {lib}") == "loaded"

    def ask(self, line: str) -> str:
        assert self.p.stdin and self.p.stdout
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        return self.p.stdout.readline().strip()

    def answers(self) -> list[str]:
        return [self.ask(n) for n in INPUTS]

    def close(self) -> None:
        self.p.kill()
        self.p.wait()


def rebuilt(program: Path, value: int) -> list[str]:
    m = Main(program, build_one(library_spec(), value))
    try:
        return m.answers()
    finally:
        m.close()


def test_table_names_the_library(table):
    assert table.binary.library == "libk.so" and table.binary.elf_type == "DYN"
    assert table.binary.build_id and table.binary.load_vaddr == 0
    assert "library libk.so" in eng.plan_text(table, ["K"], "/dev/shm/unused").splitlines()
    assert ScopeTable.from_json(table.to_json()).binary.library == "libk.so"


@pytest.mark.parametrize("int3", [False, True], ids=["jump", "int3"])
def test_library_retuned_live(engine, table, main_program, int3):
    const = table.consts[0]
    m = Main(main_program, Path(table.binary.path))
    try:
        before = m.answers()
        eng.attach(m.p.pid, table, ["K"], force_int3=int3)
        for v in (50, 300, 77, 100):  # 77 was not analyzed
            eng.set_value(m.p.pid, "K", v, const)
            assert m.answers() == rebuilt(main_program, v), f"K={v}"
        eng.detach(m.p.pid)
        assert eng.spans_hold_original(m.p.pid, table)
        assert m.answers() == before
    finally:
        m.close()


def test_another_build_refused(engine, table, main_program, tmp_path):
    other = tmp_path / "libk.so"  # the same library built with K = 50
    shutil.copy(build_one(library_spec(), 50), other)
    m = Main(main_program, other)
    try:
        with pytest.raises(
            eng.SieError, match=r"has loaded libk.so .*another build: analyze the loaded library"
        ):
            eng.attach(m.p.pid, table, ["K"])
        assert m.answers() == rebuilt(main_program, 50)
    finally:
        m.close()


def test_library_not_loaded_refused(engine, table, main_program):
    m = Main(main_program)
    try:
        with pytest.raises(eng.SieError, match="has not loaded the library libk.so"):
            eng.attach(m.p.pid, table, ["K"])
        assert m.ask("load " + table.binary.path) == "loaded", "the process runs on"
        assert m.ask("5") == "15"
    finally:
        m.close()


def test_library_loaded_twice_refused(engine, table, main_program, tmp_path):
    copy = tmp_path / "libk-copy.so"
    shutil.copy(table.binary.path, copy)
    m = Main(main_program, Path(table.binary.path), copy)
    try:
        with pytest.raises(eng.SieError, match="loaded twice"):
            eng.attach(m.p.pid, table, ["K"])
        assert m.answers() == rebuilt(main_program, 100)
    finally:
        m.close()


def test_library_plan_needs_a_build_id(engine, table, tmp_path):
    plan = eng.plan_text(table, ["K"], "/dev/shm/unused")
    (tmp_path / "plan").write_text(
        "\n".join(x for x in plan.splitlines() if not x.startswith("binary ")) + "\n"
    )
    args = [
        "arm",
        "--pid",
        str(os.getpid()),
        "--plan",
        str(tmp_path / "plan"),
        "--state",
        str(tmp_path / "st"),
    ]
    r = subprocess.run([str(engine), *args], capture_output=True, text=True)
    assert r.returncode != 0 and "library libk.so needs a `binary` line" in r.stderr, r.stderr


def test_spec_says_what_the_build_makes():
    with pytest.raises(SpecError, match="no shared library"):
        analyze(library_spec(build="gcc -O2 -c -o {out} {src}"))
    with pytest.raises(SpecError, match="made a shared library"):
        analyze(library_spec(library=""))
    with pytest.raises(SpecError, match="file name"):
        library_spec(library="lib/libk.so")


@pytest.mark.parametrize("cc,opt", [("gcc", "-O2"), ("clang", "-O0")])
def test_corpus_oracle_shared_libraries(engine, cc, opt):
    """The corpus built as shared libraries (run by so_main): retuned exactly or refused with a reason."""
    libs = oracle.run_corpus(workers=2, only=(cc, opt), shared=True)
    failed = [(c.name, c.detail) for c in libs if c.verdict == "fail"]
    passed = sum(c.verdict == "pass" for c in libs)
    print(f"\nSIE oracle (shared libraries, {cc} {opt}): {passed}/{len(libs)} pass")
    assert not failed, failed
    assert all(c.detail and c.detail[0] for c in libs if c.verdict == "refused")
    assert {c.program for c in libs if c.verdict == "pass"} >= {
        "add_off",
        "cmp_lt",
        "clamp_max",
        "inlined_callers",
    }
