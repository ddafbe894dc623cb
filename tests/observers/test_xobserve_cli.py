"""xobserve's command line: --list, --once, bad input, not root, and nothing left attached."""

import json
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from xtune import paths
from xtune.host.pmu import pmu_available
from xtune.signals.frames import ShmFrameReader
from xtune.testing.observe import bpf_ids_alive, bpf_ids_of
from xtune.testing.sched import sched_fields

FAMILIES = ["sched", "softirq", "block", "syscall", "func", "pmu", "tcp", "mem"]


def run(xobserve: Path, *args: str, **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(xobserve), *args], capture_output=True, text=True, timeout=120, **kw)


def test_list_says_which_families_work_here(xobserve):
    r = run(xobserve, "--list")
    assert r.returncode == 0, r.stderr
    lines = {line.split()[0]: line for line in r.stdout.splitlines()}
    assert sorted(lines) == sorted(FAMILIES)
    for name in ("sched", "softirq", "block", "syscall", "tcp", "mem", "pmu"):
        assert " usable" in lines[name], lines[name]
    assert "--func" in lines["func"]
    # Hardware counters said as they are here (detected, not assumed), never invented.
    has_pmu, how = pmu_available()
    assert ("pmu: unavailable" in lines["pmu"]) != has_pmu, (lines["pmu"], how)


def test_once_prints_one_json_frame(xobserve):
    r = run(xobserve, "--once", "--window-ms", "50", "--families", "sched,pmu")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["seq"] == 1
    assert 45e6 <= doc["window_ns"] <= 1e9
    assert doc["signals"]["sched.switches"] > 0
    assert "pmu.page_faults" in doc["signals"]
    assert ("pmu.cycles" in doc["signals"]) == pmu_available()[0]
    assert "softirq.net_rx.count" not in doc["signals"]


def test_unknown_family_lists_the_valid_ones(xobserve):
    r = run(xobserve, "--families", "sched,nope", "--once")
    assert r.returncode == 2
    assert "unknown family 'nope'" in r.stderr
    assert ", ".join(FAMILIES) in r.stderr


def test_bad_options_are_named(xobserve):
    for args, words in [
        (["--frobnicate"], "unknown option '--frobnicate'"),
        (["--window-ms", "0"], "--window-ms wants a number in [1, 10000], not '0'"),
        (["--window-ms", "fast"], "not 'fast'"),
        (["--shm-slots", "100"], "power of two"),
        (["--func", "nocolon"], "BINARY:FUNCTION"),
        (["--block-dev", "sda"], "MAJOR:MINOR"),
        (["--once", "extra"], "unexpected argument 'extra'"),
        (["--rt-priority", "100"], "--rt-priority wants a number in [1, 99]"),
        (["--slice-us", "50"], "--slice-us wants 0 or 100..100000, not '50'"),
        (["--slice-us", "100001"], "--slice-us wants a number in [0, 100000]"),
    ]:
        r = run(xobserve, *args)
        assert r.returncode == 2, (args, r.stderr)
        assert words in r.stderr, (args, r.stderr)
        assert "--families a,b" in r.stderr  # the usage with every option follows


def test_not_root_is_refused_clearly(xobserve, tmp_path):
    r = run(Path("setpriv"), "--reuid=65534", "--regid=65534", "--clear-groups", str(xobserve), "--once")
    assert r.returncode == 1
    assert "must run as root" in r.stderr


def test_family_that_fails_to_load_leaves_the_others_running(xobserve):
    r = run(
        xobserve, "--once", "--window-ms", "20", "--families", "sched,func", "--func", "/bin/true:no_such_fn"
    )
    assert r.returncode == 0, r.stderr
    assert "family func failed to start" in r.stderr
    assert "no_such_fn" in r.stderr
    assert json.loads(r.stdout)["signals"]["sched.switches"] >= 0


def test_nothing_stays_attached_on_any_exit(start_observer):
    for sig in (signal.SIGINT, signal.SIGTERM):
        obs = start_observer("--window-ms", "5")
        ids = bpf_ids_of(obs.proc.pid)
        assert len([k for k, _ in ids if k == "link"]) >= 10, ids
        assert obs.stop(sig) == 0
        assert not bpf_ids_alive(ids), f"left after signal {sig}"
        assert not Path(f"/dev/shm/{obs.shm}").exists()


def test_ring_in_use_is_refused(xobserve, start_observer):
    obs = start_observer("--families", "sched")
    # The second producer loads and attaches before it finds the ring taken: it must undo that.
    second = subprocess.Popen(
        [str(xobserve), "--families", "sched,softirq", "--shm", obs.shm, "--zmq", "tcp://127.0.0.1:0"],
        stderr=subprocess.PIPE,
        text=True,
    )
    ids: set[tuple[str, int]] = set()
    while second.poll() is None:
        ids |= bpf_ids_of(second.pid) if Path(f"/proc/{second.pid}").exists() else set()
    stderr = second.stderr.read() if second.stderr else ""
    assert second.returncode == 1
    assert not bpf_ids_alive(ids)
    assert f"ring {obs.shm} is in use by pid {obs.proc.pid}" in stderr
    assert Path(f"/dev/shm/{obs.shm}").exists()  # the first producer's ring is untouched


def test_verifier_rejection_shows_the_log_tail_and_the_others_run(tmp_path):
    """A copy of the sources whose sched program lost a NULL check: the real verifier refuses it."""
    src = tmp_path / "observers"
    shutil.copytree(paths.ROOT / "observers", src)
    bpf = src / "sched.bpf.c"
    text = bpf.read_text()
    assert "\tif (ts) {" in text
    bpf.write_text(text.replace("\tif (ts) {", "\tif (1) {", 1))
    build = tmp_path / "build"
    subprocess.run(
        ["make", "-C", str(src), f"TOP={paths.ROOT}", f"BUILD={build}", "FAMILIES=sched softirq"],
        check=True,
        capture_output=True,
    )
    r = run(build / "bin" / "xobserve", "--once", "--window-ms", "20", "--families", "sched,softirq")
    assert r.returncode == 0, r.stderr
    assert "family sched failed to start" in r.stderr
    assert re.search(r"R\d+ invalid mem access 'map_value_or_null'", r.stderr)  # the verifier's words
    signals = json.loads(r.stdout)["signals"]
    assert "softirq.timer.count" in signals and "sched.switches" not in signals


@pytest.mark.parametrize(
    "args,slice_ns", [((), 100_000), (("--slice-us", "400"), 400_000), (("--slice-us", "0"), None)]
)
def test_window_loop_slice(start_observer, args, slice_ns):
    """The window loop (the main thread) wakes with a short slice; 0 keeps the host's default, the
    slice this test's own process has."""
    obs = start_observer("--families", "sched", "--window-ms", "1", *args)
    loop = sched_fields(obs.proc.pid)[obs.proc.pid]
    default = sched_fields(os.getpid())[os.getpid()]["se.slice"]
    assert loop["policy"] == 0  # SCHED_OTHER
    assert loop["se.slice"] == (slice_ns or default)


def test_rt_priority_runs_the_window_loop_sched_fifo(start_observer):
    obs = start_observer("--families", "sched", "--window-ms", "1", "--rt-priority", "5")
    threads = [int(t.name) for t in Path(f"/proc/{obs.proc.pid}/task").iterdir()]
    assert all(os.sched_getscheduler(t) == os.SCHED_FIFO for t in threads)  # ZeroMQ's threads too
    assert os.sched_getparam(obs.proc.pid).sched_priority == 5
    with ShmFrameReader(obs.shm) as reader:
        frames = [reader.poll(5) for _ in range(50)]
    assert all(frames) and reader.stats.lost == 0
