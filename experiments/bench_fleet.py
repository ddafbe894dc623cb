"""Benchmark of several hosts: trials per hour on 1, 2, 4 and 8 simulated hosts with the same
workload and trial length, the round trip of a set + commit through xrtd-bridge (ZeroMQ CURVE
over TCP on a veth) against xrtd's local unix socket, and the signals' fan-in: 8 hosts' xobserve
publishing 1 ms frames (CURVE, TCP) to one subscriber process, one reader thread per host.

Hosts are network namespaces on this machine, each with its own xrtd and bridge
(`xtune.testing.fleet`); the workload is experiments/fleet/sysctl-score.yaml, a fixed-length
measurement (`--measure-s`) that scores the host's own sysctls, so the figure is the coordinator's.
Trials per hour = trials completed / (last trial's end - first trial's start), per run; runs are
repeated (`--reps`) and given as mean ± 95 % CI. Round trips: `--samples` transactions each
(begin, set, commit: three requests), local and bridge interleaved, p50/p99 with distribution-free
95 % CIs (order statistics). Fan-in: microseconds from a frame's window end (CLOCK_MONOTONIC, the
same clock on every simulated host) to the decoded frame in the subscriber's hand, over every
host's frames closed in `--fan-in-s` seconds after a second of draining, p50/p99 with CIs, and
frames lost (sequence gaps).

Writes experiments/results/fleet.json. Needs root and `make build`.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from resultfile import write_result
from scipy.stats import binom
from xtune import paths
from xtune.config import load, load_hosts
from xtune.hosts.bridge import BridgeClient
from xtune.hosts.coordinator import run_fleet
from xtune.knobs.table import KnobClient
from xtune.signals.frames import ZmqFrameReader
from xtune.testing.fleet import SimulatedFleet
from xtune.testing.stats import mean_ci95
from xtune.trials.store import Store
from xtune.tuning.metrics import Metrics

SLO = paths.ROOT / "experiments/fleet/sysctl-score.yaml"
HOST_COUNTS = (1, 2, 4, 8)
FAN_IN_HOSTS = 8


def quantile_ci(samples: list[float], q: float) -> dict[str, float]:
    """The q-quantile and a 95 % CI from order statistics (no assumption on the distribution)."""
    xs = sorted(samples)
    n = len(xs)
    lo = max(int(binom.ppf(0.025, n, q)) - 1, 0)
    hi = min(int(binom.ppf(0.975, n, q)), n - 1)
    return {"value": xs[min(int(q * n), n - 1)], "ci95_low": xs[lo], "ci95_high": xs[hi]}


def round_trips(root: Path, samples: int) -> dict[str, Any]:
    """Transactions of one set, alternately through the local socket and through the bridge."""
    with SimulatedFleet(root, 1) as fleet:
        host = fleet.hosts[0]
        local = KnobClient(host.socket, client="bench-local")
        remote = BridgeClient(host.bridge, host.client_keys(), client="bench-remote")
        local.register("somaxconn", "sysctl", "net.core.somaxconn", min=128, max=65535)
        times: dict[str, list[float]] = {"local_unix_socket": [], "bridge_curve_tcp": []}
        try:
            for i in range(samples):
                for name, client in (("local_unix_socket", local), ("bridge_curve_tcp", remote)):
                    t0 = time.perf_counter()
                    with client.transaction():
                        client.set("somaxconn", 3000 + i % 2, reason="bench_fleet round trip")
                    times[name].append((time.perf_counter() - t0) * 1e6)
            local.rollback(["somaxconn"], reason="bench_fleet done")
        finally:
            local.close()
            remote.close()
    out: dict[str, Any] = {"samples": samples, "unit": "us", "requests_per_sample": 3}
    for name, xs in times.items():
        out[name] = {"p50": quantile_ci(xs, 0.5), "p99": quantile_ci(xs, 0.99)}
    out["bridge_over_local_p50"] = (
        out["bridge_curve_tcp"]["p50"]["value"] / out["local_unix_socket"]["p50"]["value"]
    )
    return out


def fan_in(root: Path, hosts: int, seconds: float) -> dict[str, Any]:
    """Every host's 1 ms frames into one process: latency from window end to frame in hand."""
    with SimulatedFleet(root, hosts) as fleet:
        # mem: a family whose tracepoints rarely fire, so eight observers load the machine little.
        readers = [
            ZmqFrameReader(h.observe("--families", "mem", "--window-ms", "1"), curve=h.client_keys())
            for h in fleet.hosts
        ]
        for reader, host in zip(readers, fleet.hosts, strict=True):
            if reader.poll(30) is None:
                raise RuntimeError(f"{host.name}: no frame from xobserve within 30 s")
        per_host: list[list[float]] = [[] for _ in readers]
        # Frames queued while the readers were checked one by one are drained, not measured.
        measured_from_ns = time.monotonic_ns() + 1_000_000_000
        end = time.monotonic() + 1 + seconds

        errors: list[str] = []  # a host gone silent fails the benchmark, never drops out of it

        def consume(reader: ZmqFrameReader, out: list[float]) -> None:
            while time.monotonic() < end:
                frame = reader.poll(5)
                if frame is None:
                    errors.append(f"{reader.endpoint}: no frame within 5 s")
                    return
                if frame.window_end_ns >= measured_from_ns:
                    out.append((time.monotonic_ns() - frame.window_end_ns) / 1e3)

        threads = [threading.Thread(target=consume, args=rx) for rx in zip(readers, per_host, strict=True)]
        gc.disable()  # a latency-minded consumer does not let the collector pause it mid-stream
        try:
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        finally:
            gc.enable()
        lost = sum(r.stats.lost for r in readers)
        for r in readers:
            r.close()
    if errors or not all(per_host):
        raise RuntimeError(f"signals fan-in: {'; '.join(errors) or 'a host gave no frame'}")
    xs = [x for out in per_host for x in out]
    return {
        "hosts": hosts,
        "window_ms": 1,
        "seconds": seconds,
        "unit": "us",
        "frames": len(xs),
        "frames_per_host": [len(out) for out in per_host],
        "lost": lost,
        "p50": quantile_ci(xs, 0.5),
        "p99": quantile_ci(xs, 0.99),
    }


def trials_per_hour(root: Path, hosts: int, per_host: int, measure_s: float) -> float:
    slo = load(SLO, {"MEASURE_S": str(measure_s), "BUDGET": str(hosts * per_host)})
    starts: list[float] = []
    ends: list[float] = []

    def progress(_host: str, event: str, _data: dict[str, Any]) -> None:
        if event in ("trial", "trial_done"):
            (starts if event == "trial" else ends).append(time.monotonic())

    with SimulatedFleet(root, hosts) as fleet:
        store = Store(f"sqlite:///{root}/trials.db")
        result = run_fleet(slo, load_hosts(fleet.hosts_file), store, Metrics(slo.name), progress)
    failed = [r.error for r in result.hosts if r.error]
    if failed:
        raise RuntimeError(f"a host left the run: {failed}")
    completed = sum(t.status == "completed" for t in store.trials(result.experiment_id))
    return completed * 3600 / (max(ends) - min(starts))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--trials-per-host", type=int, default=6)
    ap.add_argument("--measure-s", type=float, default=1.0)
    ap.add_argument("--samples", type=int, default=2000)
    ap.add_argument("--fan-in-s", type=float, default=10.0)
    args = ap.parse_args()
    started = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        rtt = round_trips(root / "rtt", args.samples)
        signals = fan_in(root / "fan-in", FAN_IN_HOSTS, args.fan_in_s)
        print(f"fan-in: {FAN_IN_HOSTS} hosts, p99 {signals['p99']['value']:.0f} us", flush=True)
        rates: dict[int, list[float]] = {n: [] for n in HOST_COUNTS}
        for rep in range(args.reps):  # interleaved: drift on the shared host hits every count alike
            for n in HOST_COUNTS:
                rates[n].append(
                    trials_per_hour(root / f"r{rep}-{n}", n, args.trials_per_host, args.measure_s)
                )
                print(f"rep {rep}: {n} hosts: {rates[n][-1]:.0f} trials/h", flush=True)
    one = statistics.mean(rates[1])
    scaling = {}
    for n in HOST_COUNTS:
        stats = mean_ci95(rates[n])
        scaling[str(n)] = {**stats, "runs": rates[n], "over_n_times_one_host": stats["mean"] / (n * one)}
    result = {
        "workload": {
            "slo": "experiments/fleet/sysctl-score.yaml",
            "measure_s": args.measure_s,
            "trials_per_host": args.trials_per_host,
            "windows_per_trial": 1,
            "policy": "bo (Ax), one suggestion per host in flight",
            "hosts": "network namespaces on this machine, each its own xrtd + xrtd-bridge over a veth",
        },
        "trials_per_hour": scaling,
        "set_commit_round_trip": rtt,
        "signals_fan_in": signals,
        "runtime_s": time.time() - started,
    }
    sources = [
        "experiments/bench_fleet.py",
        "experiments/fleet/sysctl-score.yaml",
        "runtime/bridge/main.c",
        "runtime/bridge/peer.c",
        "runtime/bridge/bridge.h",
        "runtime/bridge/trust.c",
        "lib/zmq_curve/keys.c",
        "lib/zmq_curve/zap.c",
        "lib/zmq_curve/serve.c",
        "include/xtune/zmq_curve.h",
        "tuner/xtune/hosts/bridge.py",
        "tuner/xtune/hosts/coordinator.py",
        "tuner/xtune/knobs/table.py",
        "tuner/xtune/knobs/actuator.py",
        "tuner/xtune/tuning/loop.py",
        "tuner/xtune/tuning/bench_loop.py",
        "tuner/xtune/testing/fleet.py",
        "tuner/xtune/signals/frames.py",
        "tuner/xtune/signals/curve.py",
        "include/xtune/signal.h",
        # xobserve, for the fan-in: observers/ without its README (as the observers benchmark).
        *sorted(f"observers/{p.name}" for p in (paths.ROOT / "observers").iterdir() if p.name != "README.md"),
    ]
    print(write_result("fleet", result, sources))


if __name__ == "__main__":
    main()
