"""Benchmark of the knob plane (xrtd): desired → applied latency through the shared table for the
sysctl and bpf backends (in bursts, after the 100 ms hot window, and for the first change after
a quiet second, with the watcher's short slice and with the kernel's default slice),
control-socket operations per second, and xcubic's throughput against the kernel's cubic on the
same veth flows. Writes experiments/results/runtime.json.

Run as root after `make build`: .venv/bin/python experiments/bench_runtime.py
"""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from resultfile import write_result
from xtune import paths
from xtune.knobs.table import KnobClient, KnobTable
from xtune.testing.netpair import BulkPath, unique_tag
from xtune.testing.stats import percentile as pct

QUIET_SAMPLES = 20  # first changes after a quiet spell, per (watcher slice, backend)
QUIET_GAP_S = (1.0, 1.2)  # nothing written by this bench for this long before each one


def summary(samples: list[tuple[int, int]]) -> dict[str, float]:
    """p50/p99 of desired → applied as xrtd published it (its clock when it stored `applied`),
    and as the writer saw it (when its spin loop noticed, after its own scheduling delays)."""
    published = [p / 1000 for p, _ in samples]
    seen = [w / 1000 for _, w in samples]
    return {
        "n": len(samples),
        "p50_us": round(pct(published, 0.5), 1),
        "p99_us": round(pct(published, 0.99), 1),
        "max_us": round(max(published), 1),
        "writer_p50_us": round(pct(seen, 0.5), 1),
        "writer_p99_us": round(pct(seen, 0.99), 1),
    }


class Daemon:
    """An xrtd with its state in `state_dir`; stopped (restoring its knobs) on leaving the block."""

    def __init__(self, state_dir: Path, tag: str, *args: str) -> None:
        self.socket = str(state_dir / "xrtd.sock")
        argv = [
            "--socket",
            self.socket,
            "--state-dir",
            str(state_dir),
            "--shm",
            f"xtknobs-bench-{tag}-{os.getpid()}",
        ]
        self.proc = subprocess.Popen([str(paths.binary("xrtd")), *argv, *args], stderr=subprocess.DEVNULL)
        while not os.path.exists(self.socket):
            time.sleep(0.01)

    def __enter__(self) -> KnobClient:
        self.client = KnobClient(self.socket)
        return self.client

    def __exit__(self, *_exc: object) -> None:
        self.client.close()
        self.proc.terminate()
        self.proc.wait()


def table_latency(
    table: KnobTable, slot: int, values: tuple[int, int], n: int, ring: bool, gap: float
) -> list[tuple[int, int]]:
    """Write desired, spin until xrtd publishes applied for that generation; n samples of
    (ns until xrtd published it, ns until this writer saw it), both on CLOCK_MONOTONIC."""
    out = []
    for i in range(n):
        if gap:
            time.sleep(gap)
        t0 = time.monotonic_ns()
        gen = table.write_desired(slot, values[i % 2], ring=ring)
        view = table.wait_applied(slot, gen, timeout=5)
        out.append((view.applied_ns - t0, time.monotonic_ns() - t0))
        assert view.state == "applied", view
    return out


def latency_suite(client: KnobClient, name: str, values: tuple[int, int], idle_n: int) -> dict:
    table = client.table()
    slot = table.index(name)
    res = {
        "burst_doorbell": summary(table_latency(table, slot, values, 1000, ring=True, gap=0)),
        "burst_no_syscall": summary(table_latency(table, slot, values, 1000, ring=False, gap=0)),
        # After 150 ms without writes the watcher is back at its idle poll period (1 ms).
        "idle_no_syscall": summary(table_latency(table, slot, values, idle_n, ring=False, gap=0.15)),
        "idle_doorbell": summary(table_latency(table, slot, values, idle_n, ring=True, gap=0.15)),
    }
    table.close()
    return res


def quiet_spell(pin: str, ns_prefix: str) -> dict:
    """The first change after a quiet second, doorbell rung, the writer spinning on its CPU until
    applied (as a polling application would): xrtd with its watcher's short slice (the default)
    and with the kernel's default slice (`--slice-us 0`), both running, samples interleaved."""
    fields = {"short_slice": "hystart_low_window", "default_slice": "hystart_ack_delta_us"}
    streams, samples, daemons, tables = [], {}, [], []
    try:
        for label, args in (("short_slice", ()), ("default_slice", ("--slice-us", "0"))):
            disk = tempfile.TemporaryDirectory(prefix="xtknobs-bench-", dir="/var/tmp")
            daemon = Daemon(Path(disk.name), f"quiet-{label}", *args)
            daemons.append((disk, daemon))
            c = daemon.__enter__()
            ns = f"{ns_prefix}-{label}"
            subprocess.run(["ip", "netns", "add", ns], check=True)
            c.register(
                "somaxconn", "sysctl", "net.core.somaxconn", min=128, max=65535, netns=f"/run/netns/{ns}"
            )
            c.register("bpf_field", "bpf", f"{pin}/params:{fields[label]}", min=2, max=1 << 20)
            table = c.table()
            tables.append(table)
            for backend, name, values in (
                ("sysctl", "somaxconn", (1000, 1001)),
                ("bpf", "bpf_field", (17, 18)),
            ):
                streams.append((label, backend, table, table.index(name), values))
                samples[(label, backend)] = []
        for i in range(QUIET_SAMPLES):
            random.shuffle(streams)
            for label, backend, table, slot, values in streams:
                time.sleep(random.uniform(*QUIET_GAP_S))
                samples[(label, backend)] += table_latency(
                    table, slot, (values[i % 2],) * 2, 1, ring=True, gap=0
                )
    finally:
        for table in tables:
            table.close()
        for disk, daemon in daemons:
            daemon.__exit__()
            disk.cleanup()
        for label in ("short_slice", "default_slice"):
            subprocess.run(
                ["ip", "netns", "del", f"{ns_prefix}-{label}"], check=False, stderr=subprocess.DEVNULL
            )
    res: dict = {"gap_s": list(QUIET_GAP_S)}
    for (label, backend), v in sorted(samples.items()):
        res.setdefault(label, {})[backend] = summary(v)
    return res


def control_ops(client: KnobClient, name: str, seconds: float = 1.5) -> dict[str, float]:
    res = {}
    for op, fn in (("get", lambda i: client.get(name)), ("set", lambda i: client.set(name, 1000 + i % 2))):
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            fn(n)
            n += 1
        res[f"{op}_per_s"] = round(n / (time.perf_counter() - t0))
    return res


def throughput(pair: BulkPath, nbytes: int, rounds: int) -> dict:
    """Alternate cubic and xcubic flows on the same pair; median throughput of each and the ratio."""
    mbps: dict[str, list[float]] = {"cubic": [], "xcubic": []}
    for r in range(rounds):
        for cc in ("cubic", "xcubic") if r % 2 == 0 else ("xcubic", "cubic"):  # ABBA: no order bias
            mbps[cc] += [f.mbps for f in pair.flows(cc, nbytes)]
    med = {cc: statistics.median(v) for cc, v in mbps.items()}
    return {
        "flows_each": rounds,
        "bytes_per_flow": nbytes,
        "cubic_mbps_median": round(med["cubic"], 1),
        "xcubic_mbps_median": round(med["xcubic"], 1),
        "ratio_xcubic_over_cubic": round(med["xcubic"] / med["cubic"], 3),
        "samples_mbps": {cc: [round(x, 1) for x in v] for cc, v in mbps.items()},
    }


def xcubic_stats(pin: str) -> dict[str, int]:
    out = subprocess.run([str(paths.binary("xcubic")), "show", "--pin", pin], check=True, capture_output=True)
    return json.loads(out.stdout)["stats"]


def hystart_sweep(c: KnobClient, pair: BulkPath, pin: str, flows: int = 3) -> list[dict]:
    """HyStart by delay increase only, its threshold clamped to one value per row (set live
    through xrtd): how many flows leave slow start by HyStart, and their mean cwnd at that moment."""
    params = f"{pin}/params"
    c.register("detect", "bpf", f"{params}:hystart_detect", min=0, max=3)
    c.register("delay_min", "bpf", f"{params}:hystart_delay_min_us", min=1000, max=100000)
    c.register("delay_max", "bpf", f"{params}:hystart_delay_max_us", min=1000, max=100000)
    rows = []
    for clamp_us in (4000, 8000, 16000, 32000):
        with c.transaction():
            c.set("detect", 2, reason="bench: delay detection only")
            c.set("delay_min", clamp_us, reason="bench")
            c.set("delay_max", clamp_us, reason="bench")
        s0 = xcubic_stats(pin)
        pair.flows("xcubic", 3_000_000, flows)
        s1 = xcubic_stats(pin)
        exits = s1["hystart_delay_exits"] - s0["hystart_delay_exits"]
        cwnd = s1["exit_cwnd_sum"] - s0["exit_cwnd_sum"]
        rows.append(
            {
                "delay_clamp_us": clamp_us,
                "flows": flows,
                "hystart_exits": exits,
                "mean_exit_cwnd": round(cwnd / exits, 1) if exits else None,
            }
        )
    return rows


def main() -> None:
    if subprocess.run(["mountpoint", "-q", "/sys/fs/bpf"]).returncode:
        subprocess.run(["mount", "-t", "bpf", "bpf", "/sys/fs/bpf"], check=True)
    pin = f"/sys/fs/bpf/xtknobs-bench-{os.getpid()}"
    subprocess.run([str(paths.binary("xcubic")), "load", "--pin", pin], check=True, capture_output=True)
    ns = f"xtknobs-bench-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    result: dict = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "loadavg_at_start": os.getloadavg(),
        "command": "sudo .venv/bin/python experiments/bench_runtime.py",
    }
    try:
        # Journal on disk, default sync policy (originals fdatasync'd, other records written);
        # the table watcher scheduled normally, then as SCHED_FIFO (--rt-priority 1).
        result["desired_to_applied"] = {"journal_sync": "originals"}
        for label, args in (("normal", ()), ("rt_priority_1", ("--rt-priority", "1"))):
            with (
                tempfile.TemporaryDirectory(prefix="xtknobs-bench-", dir="/var/tmp") as disk,
                Daemon(Path(disk), label, *args) as c,
            ):
                c.register(
                    "somaxconn", "sysctl", "net.core.somaxconn", min=128, max=65535, netns=f"/run/netns/{ns}"
                )
                c.register("low_window", "bpf", f"{pin}/params:hystart_low_window", min=2, max=1 << 20)
                result["desired_to_applied"][label] = {
                    "sysctl": latency_suite(c, "somaxconn", (1000, 1001), idle_n=40),
                    "bpf": latency_suite(c, "low_window", (17, 18), idle_n=40),
                }
                if label == "normal":
                    result["control_socket"] = control_ops(c, "somaxconn")
        with (
            tempfile.TemporaryDirectory(prefix="xtknobs-bench-", dir="/var/tmp") as disk,
            Daemon(Path(disk), "sync-all", "--journal-sync", "all") as c,
        ):
            # Same disk, every record fdatasync'd: what full durability of each change costs.
            c.register("low_window", "bpf", f"{pin}/params:hystart_low_window", min=2, max=1 << 20)
            with c.table() as table:
                slot = table.index("low_window")
                samples = table_latency(table, slot, (17, 18), 1000, ring=True, gap=0)
            result["journal_sync_all"] = {"bpf_burst_doorbell": summary(samples)}
        with BulkPath(unique_tag("xtkb")) as pair:
            result["xcubic_vs_cubic"] = {"bottleneck_tbf_50mbit": throughput(pair, 3_000_000, 4)}
            with (
                tempfile.TemporaryDirectory(prefix="xtknobs-bench-", dir="/var/tmp") as disk,
                Daemon(Path(disk), "hystart") as c,
            ):
                result["hystart_delay_clamp"] = hystart_sweep(c, pair, pin)
        result["quiet_spell_doorbell"] = quiet_spell(pin, ns)
        with BulkPath(unique_tag("xtkc"), rate=None) as pair:
            result["xcubic_vs_cubic"]["veth_unlimited"] = throughput(pair, 1_000_000_000, 8)
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)
        subprocess.run([str(paths.binary("xcubic")), "unload", "--pin", pin], check=False)
    write_result(
        "runtime",
        result,
        ["runtime/xrtd", "runtime/bpf", "include/xtune/knob.h", "experiments/bench_runtime.py"],
    )
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
