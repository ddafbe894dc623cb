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

Time to target: seconds from `run_fleet`'s call (Ax's start and the hosts' baselines included)
until a trial's objective first reaches the target: the landscape's best minus 5 % of its range
(best - worst), both measured in the same benchmark by running the workload's own command in a
namespace at a grid of knob values and at the optimum the workload file states. Coordinator CPU:
this process's CPU time over the run (the coordinator's threads, its store and metrics) and the
Ax worker's (its /proc/PID/stat, read every 50 ms while it lives; its start, Ax's and torch's
import, given apart), per trial and per host-second.
Store writes: `add_trial` and `add_measurement` one after the other on SQLite (a file on disk)
and on a private PostgreSQL cluster (Debian's, stock configuration), interleaved, p50/p99 with
CIs. Ax's suggestion time as the batch grows: one Ax worker given the last largest run's trials
as data, asked for suggestions without completing any, so the n-th is generated with n - 1
pending. `at_1000_hosts` derives, on paper, what each of these figures allows at 1 000 hosts.

Writes experiments/results/fleet.json (`--quick`: a short check of the code, written to
`--out`, by default a file in the temp dir). Needs root and `make build`.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import os
import resource
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry
from resultfile import provenance, write_result
from scipy.stats import binom
from xtune import paths
from xtune.config import expr, load, load_hosts
from xtune.config.schema import SloFile
from xtune.host import netns
from xtune.hosts.bridge import BridgeClient
from xtune.hosts.coordinator import run_fleet
from xtune.knobs.table import KnobClient
from xtune.policies.bo import BoPolicy
from xtune.signals.frames import ZmqFrameReader
from xtune.testing.fleet import SimulatedFleet
from xtune.testing.postgres import temporary_cluster
from xtune.testing.stats import mean_ci95
from xtune.trials.store import Store, StoredTrial
from xtune.tuning.benchmark import run_benchmark
from xtune.tuning.metrics import Metrics

SLO = paths.ROOT / "experiments/fleet/sysctl-score.yaml"
HOST_COUNTS = (1, 2, 4, 8)
FAN_IN_HOSTS = 8
FRAME_HZ = 1000  # the fan-in's 1 ms windows
AT_SCALE = 1000  # hosts the figures are carried to, on paper
# The target: within this share of the landscape's range (best - worst) of its best.
TARGET_SHARE = 0.05
# Where experiments/fleet/sysctl-score.yaml says its score is best; the grid checks that no
# measured point beats it.
STATED_OPTIMUM = {"somaxconn": 3000, "fin_timeout": 20}
GRID = 9  # values per knob, ends included
CPU_EVERY_S = 0.05
# Series Prometheus adds per target (up, scrape_duration_seconds, scrape_samples_scraped,
# scrape_samples_post_metric_relabeling, scrape_series_added).
SCRAPE_SERIES = 5


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
        taken = [0] * len(readers)  # every frame decoded, drained ones too: the CPU is spent on all

        def consume(reader: ZmqFrameReader, out: list[float], i: int) -> None:
            while time.monotonic() < end:
                frame = reader.poll(5)
                if frame is None:
                    errors.append(f"{reader.endpoint}: no frame within 5 s")
                    return
                taken[i] += 1
                if frame.window_end_ns >= measured_from_ns:
                    out.append((time.monotonic_ns() - frame.window_end_ns) / 1e3)

        threads = [
            threading.Thread(target=consume, args=(r, out, i))
            for i, (r, out) in enumerate(zip(readers, per_host, strict=True))
        ]
        gc.disable()  # a latency-minded consumer does not let the collector pause it mid-stream
        cpu0 = cpu_seconds(resource.RUSAGE_SELF)  # this process: the readers and ZeroMQ's I/O threads
        try:
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        finally:
            gc.enable()
        cpu = cpu_seconds(resource.RUSAGE_SELF) - cpu0
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
        "frames_decoded": sum(taken),
        "cpu_s": cpu,
        "cpu_us_per_frame": cpu * 1e6 / sum(taken),
        "p50": quantile_ci(xs, 0.5),
        "p99": quantile_ci(xs, 0.99),
    }


def landscape(slo: SloFile) -> dict[str, Any]:
    """The workload's score at a grid over its knobs' ranges and at the stated optimum, each
    measured by its own command in a namespace of ours whose sysctls are set to the point."""
    assert slo.benchmark is not None
    objective = expr.parse(slo.objective.expression)
    axes = []
    for k in slo.knobs:
        assert k.range is not None
        lo, hi = k.range
        axes.append(sorted({round(lo + (hi - lo) * i / (GRID - 1)) for i in range(GRID)}))
    points = [dict(zip((k.name for k in slo.knobs), xs, strict=True)) for xs in itertools.product(*axes)]
    points.append(dict(STATED_OPTIMUM))
    name = netns.unique_prefix("xtf")
    netns.run("ip", "netns", "add", name)
    try:
        bench = slo.benchmark.model_copy(update={"netns": name})
        scores = []
        for point in points:
            for k in slo.knobs:
                netns.run("ip", "netns", "exec", name, "sysctl", "-qw", f"{k.target}={point[k.name]}")
            scores.append(expr.evaluate(objective, run_benchmark(bench).values))
    finally:
        netns.run("ip", "netns", "del", name)
    sign = slo.objective.sign
    best = max(range(len(points)), key=lambda i: sign * scores[i])
    worst = min(range(len(points)), key=lambda i: sign * scores[i])
    if best != len(points) - 1:
        raise RuntimeError(
            f"{points[best]} scores {scores[best]}, above the stated optimum: fix STATED_OPTIMUM"
        )
    span = scores[best] - scores[worst]
    return {
        "points_measured": len(points),
        "grid_per_knob": GRID,
        "best": {"params": points[best], "objective": scores[best]},
        "worst": {"params": points[worst], "objective": scores[worst]},
        "target_share_of_range": TARGET_SHARE,
        "target": scores[best] - TARGET_SHARE * span,
    }


class ChildCpu:
    """CPU seconds of this process's children whose command line holds `marker`, read from
    /proc every CPU_EVERY_S while they live: a child's last reading counts (its last CPU_EVERY_S
    before exiting may be missed)."""

    def __init__(self, marker: bytes) -> None:
        self.marker = marker
        self.ticks: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="bench-child-cpu")

    def __enter__(self) -> ChildCpu:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def seconds(self) -> float:
        return sum(self.ticks.values()) / os.sysconf("SC_CLK_TCK")

    def _watch(self) -> None:
        while not self._stop.wait(CPU_EVERY_S):
            for children in Path("/proc/self/task").glob("*/children"):
                for pid in children.read_text().split():
                    try:
                        if self.marker not in Path(f"/proc/{pid}/cmdline").read_bytes():
                            continue
                        # utime and stime: fields 14 and 15, counted after the command's ")".
                        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                    except OSError:  # it exited between the listing and the read
                        continue
                    self.ticks[pid] = int(fields[11]) + int(fields[12])


def cpu_seconds(who: int) -> float:
    ru = resource.getrusage(who)
    return ru.ru_utime + ru.ru_stime


def series_count(registry: CollectorRegistry) -> dict[str, int]:
    """The samples an exporter of this registry serves: all of them, and the knobs' own."""
    samples = [s for m in registry.collect() for s in m.samples]
    return {"all": len(samples), "knob": sum(s.name.startswith("xtune_knob_") for s in samples)}


def fleet_run(root: Path, hosts: int, per_host: int, measure_s: float, target: float) -> dict[str, Any]:
    """One run on `hosts` hosts: its trials per hour, time to the target, CPU and store rows."""
    slo = load(SLO, {"MEASURE_S": str(measure_s), "BUDGET": str(hosts * per_host)})
    starts: list[float] = []
    ends: list[float] = []
    reached: dict[str, float] = {}
    lock = threading.Lock()
    t0 = 0.0
    ax = ChildCpu(b"xtune.policies.bo")
    ax_start: list[float] = []  # the worker's CPU until the first trial: its start (Ax, torch)

    def progress(_host: str, event: str, data: dict[str, Any]) -> None:
        now = time.monotonic()
        with lock:
            if event == "trial":
                starts.append(now)
                if not ax_start:
                    ax_start.append(ax.seconds)
            elif event == "trial_done":
                ends.append(now)
                objective = data["result"].summary.objective
                if not reached and slo.objective.sign * (objective - target) >= 0:
                    reached.update(seconds=now - t0, trials=len(ends))

    with SimulatedFleet(root, hosts) as fleet:
        store = Store(f"sqlite:///{root}/trials.db")
        metrics = Metrics(slo.name)
        hosts_file = load_hosts(fleet.hosts_file)
        with ax:
            cpu0 = cpu_seconds(resource.RUSAGE_SELF)
            t0 = time.monotonic()
            result = run_fleet(slo, hosts_file, store, metrics, progress)
            wall = time.monotonic() - t0
            coordinator_cpu = cpu_seconds(resource.RUSAGE_SELF) - cpu0
    failed = [r.error for r in result.hosts if r.error]
    if failed:
        raise RuntimeError(f"a host left the run: {failed}")
    eid = result.experiment_id
    completed = sum(t.status == "completed" for t in store.trials(eid))
    rows = sum(
        len(rows)
        for rows in (store.trials(eid), store.measurements(eid), store.decisions(eid), store.rollbacks(eid))
    )
    store.engine.dispose()
    trials_cpu = coordinator_cpu + ax.seconds - ax_start[0]
    return {
        "trials_per_hour": completed * 3600 / (max(ends) - min(starts)),
        "seconds_to_target": reached.get("seconds"),
        "trials_to_target": reached.get("trials"),
        "run_s": wall,
        "trials": completed,
        "store_rows_per_trial": rows / completed,
        "cpu_s": {"coordinator": coordinator_cpu, "ax_worker": ax.seconds, "ax_worker_start": ax_start[0]},
        # The worker's start is a cost per run, not per trial: left out of these two.
        "cpu_s_per_trial": trials_cpu / completed,
        "cpu_s_per_host_second": trials_cpu / (wall * hosts),
        "series": series_count(metrics.registry),
        "store": (f"sqlite:///{root}/trials.db", eid),
    }


def store_writes(root: Path, samples: int) -> dict[str, Any]:
    """add_trial and add_measurement, one writer, on SQLite and PostgreSQL in turn."""
    ops = ("add_trial", "add_measurement")
    with temporary_cluster() as cluster:
        stores = {
            "sqlite": Store(f"sqlite:///{root}/store.db"),
            "postgresql": Store(cluster.create_database("bench_fleet")),
        }
        try:
            runs = {name: s.new_experiment("bench-fleet-store", {}) for name, s in stores.items()}
            times: dict[str, dict[str, list[float]]] = {name: {op: [] for op in ops} for name in stores}
            for i in range(samples):
                params = {"somaxconn": 128 + i, "fin_timeout": 20}
                for name, store in stores.items():
                    t = time.time()
                    trial = StoredTrial(i, "bo@h1", params, "completed", -1.5, 0.0, {"slo": {}, "windows": 1})
                    t0 = time.perf_counter()
                    store.add_trial(runs[name], trial, t, t)
                    t1 = time.perf_counter()
                    store.add_measurement(runs[name], "measure", -1.5, {}, params, i)
                    t2 = time.perf_counter()
                    times[name]["add_trial"].append((t1 - t0) * 1e6)
                    times[name]["add_measurement"].append((t2 - t1) * 1e6)
        finally:
            for store in stores.values():
                store.engine.dispose()
    out: dict[str, Any] = {"samples": samples, "unit": "us", "writers": 1}
    for name, by_op in times.items():
        out[name] = {
            op: {
                "p50": quantile_ci(xs, 0.5),
                "p99": quantile_ci(xs, 0.99),
                "mean": statistics.fmean(xs),
                "writes_per_s": 1e6 / statistics.fmean(xs),
            }
            for op, xs in by_op.items()
        }
    return out


def ax_batch(store_at: tuple[str, int], pending: int) -> dict[str, Any]:
    """Ax's time per suggestion with 1 .. `pending` suggestions pending, given a run's trials.
    Ax's first suggestion after trials are attached is its initialization step (Sobol, no model):
    it is asked first and stays pending, its time given apart."""
    url, run = store_at
    store = Store(url)
    warm = store.trials(run)
    exp = store.experiment(run)
    store.engine.dispose()
    assert exp is not None and exp.policy_state is not None  # the run made its policy
    slo = load(SLO, {"MEASURE_S": "1", "BUDGET": str(pending + 1)})
    policy = BoPolicy(slo, {int(i): float(b) for i, b in exp.policy_state["bounds"].items()}, warm)
    try:
        for _ in range(pending + 1):
            policy.suggest()
    finally:
        policy.close()
    first, *seconds = policy.suggest_seconds
    fit = statistics.linear_regression(range(1, pending + 1), seconds) if pending > 1 else None
    return {
        "data_trials": policy.warm_started,
        "initialization_s": first,
        "pending": list(range(1, pending + 1)),
        "seconds": seconds,
        "fit_s_per_pending": fit.slope if fit else None,
        "fit_s_at_0": fit.intercept if fit else None,
    }


def at_scale(result: dict[str, Any], hosts: int) -> dict[str, Any]:
    """What each measured figure allows at `hosts` hosts, on paper; every input is a figure of
    `result`, each output is said with the arithmetic in its name."""
    counts = sorted(result["trials_per_hour"], key=int)
    trial_s = 3600 / result["trials_per_hour"][counts[0]]["mean"]  # one host's trial, end to end
    largest = result["coordinator_cpu"][counts[-1]]
    writes = largest["store_rows_per_trial"]["mean"]
    demand = hosts * writes / trial_s
    store: dict[str, Any] = {"writes_per_trial": writes, "trial_s": trial_s, "writes_per_s_needed": demand}
    for backend in ("sqlite", "postgresql"):
        by_op = result["store_writes"][backend]
        p99 = max(v["p99"]["value"] for v in by_op.values())
        mean = statistics.fmean(v["mean"] for v in by_op.values())
        store[backend] = {
            "p99_us": p99,
            "writes_per_s_at_p99": 1e6 / p99,
            "hosts_one_writer_at_p99": 1e6 / p99 * trial_s / writes,
            "writes_per_s_at_mean": 1e6 / mean,
            "hosts_one_writer_at_mean": 1e6 / mean * trial_s / writes,
        }
    fan = result["signals_fan_in"]
    frames_per_s = hosts * FRAME_HZ
    signals = {
        "cpu_us_per_frame": fan["cpu_us_per_frame"],
        "frames_per_s": frames_per_s,
        "cores": frames_per_s * fan["cpu_us_per_frame"] / 1e6,
        # A Python subscriber's reader threads share one interpreter lock: one core at most.
        "hosts_per_subscriber_process": 1e6 / (fan["cpu_us_per_frame"] * FRAME_HZ),
    }
    series = result["prometheus_series_per_host"]
    prometheus = {
        "scrape_series_per_target": SCRAPE_SERIES,
        "series_per_host": series["all"] + SCRAPE_SERIES,
        "series": hosts * (series["all"] + SCRAPE_SERIES),
    }
    coordinator = {
        "from_hosts": int(counts[-1]),
        "cpu_s_per_trial": largest["cpu_s_per_trial"]["mean"],
        "coordinator_cpu_s_per_trial": largest["coordinator_cpu_s_per_trial"]["mean"],
        "ax_cpu_s_per_trial": largest["ax_cpu_s_per_trial"]["mean"],
        "cores": hosts / trial_s * largest["cpu_s_per_trial"]["mean"],
        "coordinator_process_cores": hosts / trial_s * largest["coordinator_cpu_s_per_trial"]["mean"],
        "ax_worker_cores": hosts / trial_s * largest["ax_cpu_s_per_trial"]["mean"],
    }
    ax = result["ax_suggestion"]
    most = ax["seconds"][-1]  # with the most suggestions pending that were measured
    suggestion: dict[str, Any] = {
        "pending": ax["pending"][-1],
        "s_per_suggestion": most,
        # Hosts one worker keeps in trials at that rate: one suggestion per host per trial.
        "hosts_one_worker": trial_s / most,
        "suggestions_per_s_needed": hosts / trial_s,
    }
    # A line through the measured times, carried past them: only where they grow with pending.
    growing = ax["fit_s_per_pending"] is not None and ax["fit_s_per_pending"] > 0
    at = ax["fit_s_at_0"] + ax["fit_s_per_pending"] * (hosts - 1) if growing else None
    suggestion["extrapolated_s_at_hosts_pending"] = at
    suggestion["extrapolated_worker_s_per_round"] = hosts * at if at is not None else None
    return {
        "hosts": hosts,
        "trial_s": trial_s,
        "store": store,
        "signals": signals,
        "prometheus": prometheus,
        "coordinator_cpu": coordinator,
        "ax_suggestion": suggestion,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--trials-per-host", type=int, default=6)
    ap.add_argument("--measure-s", type=float, default=1.0)
    ap.add_argument("--samples", type=int, default=2000)
    ap.add_argument("--fan-in-s", type=float, default=10.0)
    ap.add_argument("--store-samples", type=int, default=1000, help="writes of each kind per store")
    ap.add_argument("--ax-pending", type=int, default=32, help="suggestions asked for without completing")
    ap.add_argument(
        "--quick",
        action="store_true",
        help="a short check of the code: 1 repetition, 1 and 2 hosts, few samples",
    )
    ap.add_argument("--out", type=Path, help="write here instead of experiments/results/fleet.json")
    args = ap.parse_args()
    host_counts: tuple[int, ...] = HOST_COUNTS
    fan_in_hosts = FAN_IN_HOSTS
    if args.quick:
        args.reps, args.trials_per_host, args.samples, args.fan_in_s = 1, 4, 200, 2.0
        args.store_samples, args.ax_pending = 100, 4
        host_counts, fan_in_hosts = (1, 2), 2
        args.out = args.out or Path(tempfile.gettempdir()) / "fleet-quick.json"
    started = time.time()
    slo = load(SLO, {"MEASURE_S": "0", "BUDGET": "1"})
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        land = landscape(slo)
        print(f"landscape: best {land['best']['objective']:.3f}, target {land['target']:.3f}", flush=True)
        rtt = round_trips(root / "rtt", args.samples)
        signals = fan_in(root / "fan-in", fan_in_hosts, args.fan_in_s)
        print(f"fan-in: {fan_in_hosts} hosts, p99 {signals['p99']['value']:.0f} us", flush=True)
        writes = store_writes(root, args.store_samples)
        p99s = {b: f"{writes[b]['add_trial']['p99']['value']:.0f} us" for b in ("sqlite", "postgresql")}
        print(f"store: add_trial p99 {p99s}", flush=True)
        runs: dict[int, list[dict[str, Any]]] = {n: [] for n in host_counts}
        for rep in range(args.reps):  # interleaved: drift on the shared host hits every count alike
            for n in host_counts:
                run = fleet_run(root / f"r{rep}-{n}", n, args.trials_per_host, args.measure_s, land["target"])
                runs[n].append(run)
                print(f"rep {rep}: {n} hosts: {run['trials_per_hour']:.0f} trials/h,"
                      f" target after {run['seconds_to_target']} s, {run['cpu_s_per_trial']:.2f} CPU s/trial",
                      flush=True)  # fmt: skip
        ax = ax_batch(runs[host_counts[-1]][-1]["store"], args.ax_pending)
        print(f"ax: {ax['seconds']}", flush=True)
    one = statistics.mean(r["trials_per_hour"] for r in runs[host_counts[0]]) / host_counts[0]
    scaling, to_target, cpu = {}, {}, {}
    for n in host_counts:
        rates = [r["trials_per_hour"] for r in runs[n]]
        stats = mean_ci95(rates)
        scaling[str(n)] = {**stats, "runs": rates, "over_n_times_one_host": stats["mean"] / (n * one)}
        hits = [r for r in runs[n] if r["seconds_to_target"] is not None]
        to_target[str(n)] = {
            "reached": len(hits),
            "runs": len(runs[n]),
            "seconds": mean_ci95([r["seconds_to_target"] for r in hits]),
            "trials": mean_ci95([r["trials_to_target"] for r in hits]),
            "seconds_runs": [r["seconds_to_target"] for r in runs[n]],
        }
        cpu[str(n)] = {
            "cpu_s_per_trial": mean_ci95([r["cpu_s_per_trial"] for r in runs[n]]),
            "coordinator_cpu_s_per_trial": mean_ci95(
                [r["cpu_s"]["coordinator"] / r["trials"] for r in runs[n]]
            ),
            "ax_cpu_s_per_trial": mean_ci95(
                [(r["cpu_s"]["ax_worker"] - r["cpu_s"]["ax_worker_start"]) / r["trials"] for r in runs[n]]
            ),
            "ax_start_cpu_s": mean_ci95([r["cpu_s"]["ax_worker_start"] for r in runs[n]]),
            "cpu_s_per_host_second": mean_ci95([r["cpu_s_per_host_second"] for r in runs[n]]),
            "store_rows_per_trial": mean_ci95([r["store_rows_per_trial"] for r in runs[n]]),
            "runs": [{k: r[k] for k in ("cpu_s", "trials", "run_s")} for r in runs[n]],
        }
    result: dict[str, Any] = {
        "workload": {
            "slo": "experiments/fleet/sysctl-score.yaml",
            "measure_s": args.measure_s,
            "trials_per_host": args.trials_per_host,
            "windows_per_trial": 1,
            "policy": "bo (Ax), one suggestion per host in flight",
            "hosts": "network namespaces on this machine, each its own xrtd + xrtd-bridge over a veth",
            "quick": args.quick,
        },
        "landscape": land,
        "trials_per_hour": scaling,
        "time_to_target": to_target,
        "coordinator_cpu": cpu,
        "prometheus_series_per_host": runs[host_counts[0]][0]["series"] if host_counts[0] == 1 else None,
        "set_commit_round_trip": rtt,
        "signals_fan_in": signals,
        "store_writes": writes,
        "ax_suggestion": ax,
    }
    result["at_1000_hosts"] = at_scale(result, AT_SCALE)
    result["runtime_s"] = time.time() - started
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
        "tuner/xtune/policies/bo.py",
        "tuner/xtune/tuning/loop.py",
        "tuner/xtune/tuning/bench_loop.py",
        "tuner/xtune/tuning/metrics.py",
        "tuner/xtune/trials/store.py",
        "tuner/xtune/testing/fleet.py",
        "tuner/xtune/testing/postgres.py",
        "tuner/xtune/signals/frames.py",
        "tuner/xtune/signals/curve.py",
        "include/xtune/signal.h",
        # xobserve, for the fan-in: observers/ without its README (as the observers benchmark).
        *sorted(f"observers/{p.name}" for p in (paths.ROOT / "observers").iterdir() if p.name != "README.md"),
    ]
    if args.out is None:
        print(write_result("fleet", result, sources))
    else:
        args.out.write_text(json.dumps({**result, "provenance": provenance(sources)}, indent=1) + "\n")
        print(args.out)


if __name__ == "__main__":
    main()
