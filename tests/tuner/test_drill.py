"""`xtune drill` on a running program: slow() -> {fast(), heavy()}, heavy() -> deeper().

The drill must find heavy, then deeper, as the largest shares and fast as a small one, and leave
the program as it found it: same pid, its code byte for byte the file's again (a uprobe shows as
int3 in the process's memory), no xobserve left, its output still right. Ctrl-C mid-measurement
leaves the same. Bad input is refused with the thing named.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile
from xtune import paths

pytestmark = pytest.mark.root

HERE = Path(__file__).parent
XTUNE = str(paths.ROOT / ".venv/bin/xtune")
FUNCTIONS = ("slow", "fast", "heavy", "deeper")
ROUND = re.compile(r"round (\d+) sum (\d+)")


@pytest.fixture(scope="module")
def target_binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("drill") / "drill_target"
    subprocess.run(["cc", "-O2", "-g", "-o", str(out), str(HERE / "drill_target.c")], check=True)
    return out


class Target:
    def __init__(self, binary: Path, log: Path) -> None:
        self.binary, self.log = binary, log
        with open(log, "w") as f:
            self.proc = subprocess.Popen([str(binary)], stdout=f)
        self.pid = self.proc.pid

    def rounds(self) -> list[tuple[int, int]]:
        return [(int(a), int(b)) for a, b in ROUND.findall(self.log.read_text())]

    def code(self, name: str, n: int = 16) -> tuple[bytes, bytes]:
        """(the function's first bytes in the file, the same bytes in the running process)."""
        with open(self.binary, "rb") as f:
            elf = ELFFile(f)
            sym = elf.get_section_by_name(".symtab").get_symbol_by_name(name)[0]
            seg = next(
                s
                for s in elf.iter_segments()
                if s["p_type"] == "PT_LOAD" and s["p_vaddr"] <= sym["st_value"] < s["p_vaddr"] + s["p_filesz"]
            )
            off = sym["st_value"] - seg["p_vaddr"] + seg["p_offset"]
            f.seek(off)
            want = f.read(n)
        for line in Path(f"/proc/{self.pid}/maps").read_text().splitlines():
            parts = line.split()
            start, end = (int(v, 16) for v in parts[0].split("-"))
            moff = int(parts[2], 16)
            if parts[-1] == str(self.binary) and moff <= off < moff + end - start:
                with open(f"/proc/{self.pid}/mem", "rb") as mem:
                    mem.seek(start + off - moff)
                    return want, mem.read(n)
        raise AssertionError(f"{name} is not mapped in pid {self.pid}")


@pytest.fixture
def target(target_binary: Path, tmp_path: Path) -> Iterator[Target]:
    t = Target(target_binary, tmp_path / "target.out")
    deadline = time.monotonic() + 10
    while not t.rounds():
        assert time.monotonic() < deadline, "the target printed no round in 10 s"
        time.sleep(0.05)
    yield t
    t.proc.kill()
    t.proc.wait()


def xobserves_of(pid: int) -> list[str]:
    out = subprocess.run(["pgrep", "-af", "xobserve"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if f"--pid {pid}" in line]


def assert_left_as_found(t: Target) -> None:
    assert t.proc.poll() is None, "the target exited"
    for name in FUNCTIONS:
        want, live = t.code(name)
        assert live == want, f"{name}: {live.hex()} in the process, {want.hex()} in the file"
    assert not xobserves_of(t.pid)
    seen = len(t.rounds())
    deadline = time.monotonic() + 10
    while len(t.rounds()) <= seen:
        assert time.monotonic() < deadline, "the target stopped printing"
        time.sleep(0.05)
    assert all(s == 7 * n for n, s in t.rounds()), "each round adds 1 + 1 + 2 + 3 to the sum"


def test_drill_refines_into_heavy_then_deeper_and_leaves_no_probe(target: Target, tmp_path: Path) -> None:
    out = tmp_path / "drill.json"
    run = subprocess.run(
        [
            XTUNE,
            "drill",
            "slow",
            "--pid",
            str(target.pid),
            "--depth",
            "3",
            "--seconds",
            "1",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    d = json.loads(out.read_text())
    assert d["path"] == ["slow", "heavy", "deeper"]
    slow = d["root"]
    assert slow["calls_per_s"] > 0 and slow["latency_p50_us"] is not None
    by_name = {c["function"]: c for c in slow["callees"]}
    assert set(by_name) == {"fast", "heavy"}
    heavy, fast = by_name["heavy"], by_name["fast"]
    assert heavy["refined"] and not fast["refined"]
    assert fast["share"] < heavy["share"] / 2, "fast does almost nothing; heavy holds slow's work"
    assert heavy["share_net"] > 0.5
    assert fast["share_net"] is None or fast["share_net"] < heavy["share_net"] / 4
    assert heavy["share"] <= 1.05, "heavy runs only inside slow: not more than slow's time"
    below = {c["function"]: c for c in heavy["callees"]}
    assert set(below) == {"deeper", "strtol"}
    assert Path(below["strtol"]["file"]).name == "libc.so.6", "a PLT call is probed in the library"
    [indirect] = heavy["not_followed"]
    assert indirect["site"].startswith("heavy+") and "indirect call" in indirect["reason"]
    deeper = heavy["callees"][:1]
    assert [c["function"] for c in deeper] == ["deeper"], "deeper holds the largest share"
    assert deeper[0]["share"] > 0.5 and deeper[0]["share_net"] > 0.3, (
        "deeper does five times heavy's own work"
    )
    assert deeper[0]["callees"] == [] and deeper[0]["not_followed"] == []
    assert d["after"] == {"functions_probed": 5, "probes_left": [], "code_differs": [], "pid_alive": True}
    assert "heavy" in run.stdout and "calls/s" in run.stdout
    assert_left_as_found(target)


def test_ctrl_c_mid_measurement_removes_the_probes(target: Target) -> None:
    drill = subprocess.Popen(
        [XTUNE, "drill", "slow", "--pid", str(target.pid), "--seconds", "60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while target.code("slow")[1][0] != 0xCC:  # the entry uprobe's int3: the probe is in
            assert drill.poll() is None, drill.communicate()
            assert time.monotonic() < deadline, "the drill placed no probe in 30 s"
            time.sleep(0.02)
        drill.send_signal(signal.SIGINT)
        drill.wait(30)
    finally:
        if drill.poll() is None:
            drill.kill()
            drill.wait()
    assert drill.returncode != 0
    assert_left_as_found(target)


def test_bad_input_names_what_is_wrong(target: Target, target_binary: Path, tmp_path: Path) -> None:
    def refused(*args: str) -> str:
        run = subprocess.run(
            [XTUNE, "drill", *args, "--seconds", "0.5"], capture_output=True, text=True, timeout=60
        )
        assert run.returncode == 2, run.stdout + run.stderr
        return run.stderr

    assert "no process with pid 999999999" in refused("slow", "--pid", "999999999")
    err = refused("no_such_function", "--pid", str(target.pid))
    assert "'no_such_function'" in err and str(target_binary) in err
    stripped = tmp_path / "stripped_target"
    shutil.copy(target_binary, stripped)
    subprocess.run(["strip", str(stripped)], check=True)
    with open(tmp_path / "stripped.out", "w") as f:
        proc = subprocess.Popen([str(stripped)], stdout=f)
    try:
        err = refused("slow", "--pid", str(proc.pid))
        assert "stripped" in err and str(stripped) in err and "'slow'" in err
    finally:
        proc.kill()
        proc.wait()
    assert not xobserves_of(target.pid)
