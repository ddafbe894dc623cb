"""Real load in the real kernel moves the signals as it must."""

import os
import resource
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
from xtune.host.pmu import pmu_available
from xtune.signals.frames import ShmFrameReader
from xtune.testing.observe import frames_while, total


@pytest.fixture
def loop_device(tmp_path):
    """A 64 MiB loop device over a tmpfs file (its I/O never reaches a disk); detached afterwards."""
    backing = Path("/dev/shm") / f"xt-test-loop-{os.getpid()}-{os.urandom(3).hex()}"
    subprocess.run(["truncate", "-s", "64M", str(backing)], check=True)
    try:
        dev = subprocess.run(
            ["losetup", "--find", "--show", str(backing)], capture_output=True, text=True, check=True
        ).stdout.strip()
    except subprocess.CalledProcessError as e:
        backing.unlink()
        pytest.skip(f"no loop device here: {e.stderr}")
    try:
        yield dev
    finally:
        subprocess.run(["losetup", "-d", dev], check=False)
        backing.unlink(missing_ok=True)


def test_direct_ios_to_a_loop_device_are_counted(start_observer, loop_device):
    st = os.stat(loop_device)
    obs = start_observer(
        "--families", "block", "--block-dev", f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"
    )
    n = 300
    stat = Path("/sys/block") / Path(loop_device).name / "stat"
    kernel_writes = int(stat.read_text().split()[4])
    with ShmFrameReader(obs.shm) as reader:
        frames = frames_while(
            reader,
            lambda: subprocess.run(
                ["dd", "if=/dev/zero", f"of={loop_device}", "bs=4096", f"count={n}", "oflag=direct"],
                capture_output=True,
                check=True,
            ),
        )
    kernel_writes = int(stat.read_text().split()[4]) - kernel_writes
    writes = total(frames, "block.write_ops")
    assert n <= writes <= n + 3, writes
    assert writes == kernel_writes  # the kernel's own count for this device (/sys/block/*/stat)
    assert n * 4096 <= total(frames, "block.bytes") <= (n + 8) * 4096
    assert total(frames, "block.ops") - total(frames, "block.read_ops") >= n
    lat = [f.values["block.latency.p99"] for f in frames if "block.latency.p99" not in f.empty]
    assert lat and all(v > 0 for v in lat)


def run_delay_ns(pid: int) -> int:
    """The kernel's own account of a task's time waiting on a run queue (/proc/PID/schedstat)."""
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[1])


def test_cpu_contention_raises_run_queue_latency(start_observer, uprobe_target):
    comm = uprobe_target.name[:15]
    obs = start_observer("--families", "sched", "--window-ms", "100", "--comm", comm)
    cpu = sorted(os.sched_getaffinity(0))[-1]
    waited: list[int] = []

    def contend() -> None:
        spin = [str(uprobe_target), "spin", "1500", str(cpu)]
        spinners = [subprocess.Popen(spin, stdout=subprocess.PIPE, text=True) for _ in range(4)]
        try:
            for p in spinners:
                assert p.stdout is not None and p.stdout.readline() == "spun\n"
            waited.extend(run_delay_ns(p.pid) for p in spinners)  # all asleep now
        finally:
            for p in spinners:
                p.kill()
                p.wait()

    with ShmFrameReader(obs.shm) as reader:
        frames = frames_while(reader, contend)
    middle = frames[3:-6]
    assert middle, "no frame in the middle of the contention"
    # Four spinners on one CPU: it is fully busy and three of them always wait. Other tasks on this
    # shared machine can only add to the system-wide signals; the target ones are the spinners'.
    assert min(f.values[f"sched.cpu{cpu}.busy"] for f in middle) > 0.9
    assert min(f.values["sched.runq_wait"] * 1e3 / f.window_ns for f in middle) > 2.0
    assert min(f.values["sched.target.runq_wait"] * 1e3 / f.window_ns for f in middle) > 2.0
    assert max(f.values["sched.target.runq_latency.p99"] for f in middle) > 1000  # whole slices (us)
    # The target's summed waits are the kernel's own run delay of the spinners (/proc/PID/schedstat).
    ours = total(frames, "sched.target.runq_wait") * 1e3
    assert 0.95 * sum(waited) - 5e6 <= ours <= 1.05 * sum(waited) + 5e6, (ours, waited)
    assert total(frames, "sched.runq_wait") * 1e3 >= ours


def loopback_traffic(megabytes: int) -> None:
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def sink() -> None:
        conn, _ = server.accept()
        while conn.recv(1 << 16):
            pass
        conn.close()

    t = threading.Thread(target=sink)
    t.start()
    with socket.create_connection(("127.0.0.1", port)) as c:
        chunk = b"x" * (1 << 16)
        for _ in range(megabytes * 16):
            c.sendall(chunk)
    t.join()
    server.close()


def net_rx_softirqs() -> int:
    """The kernel's own NET_RX softirq count, all CPUs (/proc/softirqs)."""
    line = next(x for x in Path("/proc/softirqs").read_text().splitlines() if x.strip().startswith("NET_RX:"))
    return sum(int(v) for v in line.split()[1:])


def test_loopback_tcp_raises_net_rx_softirqs_and_tcp_signals(start_observer):
    obs = start_observer("--families", "softirq,tcp", "--window-ms", "50")
    marks: list[tuple[int, int]] = []

    def traffic() -> None:
        marks.append((time.monotonic_ns(), net_rx_softirqs()))
        loopback_traffic(64)
        marks.append((time.monotonic_ns(), net_rx_softirqs()))

    with ShmFrameReader(obs.shm) as reader:
        frames = frames_while(reader, traffic)
    (t1, n1), (t2, n2) = marks
    kernel = n2 - n1
    assert kernel >= 100  # the traffic made NET_RX softirqs...
    # ...and ours match the kernel's count: the frames that overlap the interval hold at least it,
    # those inside it at most it (others' traffic on this shared host is in both).
    overlapping = [f for f in frames if f.window_end_ns > t1 and f.window_start_ns < t2]
    inside = [f for f in frames if f.window_start_ns >= t1 and f.window_end_ns <= t2]
    slack = 2 * os.cpu_count()  # a softirq running at a boundary: /proc counts entry, we count exit
    assert total(overlapping, "softirq.net_rx.count") >= kernel - slack
    assert total(inside, "softirq.net_rx.count") <= kernel + slack
    assert total(frames, "softirq.net_rx.time") > 0
    assert total(frames, "tcp.established") >= 2  # both ends of the connection
    assert total(frames, "tcp.rtt_samples") > 0
    assert any(0 < f.values["tcp.srtt.p50"] < 100000 for f in frames if "tcp.srtt.p50" not in f.empty)


def test_uprobe_call_count_equals_the_calls_made(start_observer, uprobe_target):
    n = 12345
    obs = start_observer("--families", "func", "--func", f"{uprobe_target}:xt_work", "--window-ms", "20")
    with ShmFrameReader(obs.shm) as reader:
        frames = frames_while(
            reader, lambda: subprocess.run([str(uprobe_target), "calls", str(n)], check=True)
        )
    assert total(frames, "func.xt_work.calls") == n
    lat = [f.values["func.xt_work.latency.p50"] for f in frames if "func.xt_work.latency.p50" not in f.empty]
    assert lat and all(0 < v < 1000 for v in lat)


def test_uprobe_concurrency_counts_threads_inside(start_observer, uprobe_target):
    obs = start_observer("--families", "func", "--func", f"{uprobe_target}:xt_nap", "--window-ms", "100")
    with ShmFrameReader(obs.shm) as reader:
        frames = frames_while(
            reader, lambda: subprocess.run([str(uprobe_target), "threads", "4", "400"], check=True)
        )
    assert total(frames, "func.xt_nap.calls") == 8
    # 4 threads inside for 800 ms: the full windows in between read 4.
    conc = [f.values["func.xt_nap.concurrency"] for f in frames]
    assert max(conc) == pytest.approx(4, abs=0.05)
    weighted = sum(c * f.window_ns for c, f in zip(conc, frames, strict=True)) / 1e9
    assert weighted == pytest.approx(4 * 0.8, rel=0.05)  # thread-seconds inside


def test_syscalls_of_a_target_command(start_observer, uprobe_target):
    n = 20000
    comm = uprobe_target.name[:15]
    obs = start_observer("--families", "syscall", "--comm", comm, "--window-ms", "20")
    with ShmFrameReader(obs.shm) as reader:
        frames = frames_while(
            reader,
            lambda: subprocess.run([str(uprobe_target), "syscalls", str(n)], check=True, capture_output=True),
        )
    calls = total(frames, "syscall.calls")
    assert n <= calls <= n + 200, calls  # plus the loader's own few dozen
    assert max(f.values["syscall.rate"] for f in frames) > 1000


def test_pmu_said_as_it_is_and_never_faked(start_observer):
    """Hardware counters exactly when this host has a PMU (detected with perf_event_open here, not
    assumed); software counters either way."""
    has_pmu, how = pmu_available()
    obs = start_observer("--families", "pmu")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    with ShmFrameReader(obs.shm) as reader:
        frames = frames_while(reader, lambda: bytearray(64 << 20))
        assert reader.catalog is not None
        assert reader.catalog.pmu == ("available" if has_pmu else "unavailable"), how
        hardware = [s.name for s in reader.catalog.signals if s.source == "perf_event:hardware"]
        assert bool(hardware) == has_pmu, (hardware, how)
    own = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    assert ("pmu.cycles" in frames[0].values) == has_pmu, how
    # The software page-fault counter is system-wide: it holds at least this process's own faults.
    assert total(frames, "pmu.page_faults") >= 0.9 * own > 0  # (a few after the last window)
