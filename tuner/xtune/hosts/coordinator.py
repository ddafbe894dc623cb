"""One tuning run on several hosts at once: `xtune run FILE --hosts HOSTS`.

Each host gets the loop's own trial path (`BenchRunner`: apply as one xrtd transaction, settle,
measure the benchmark, guard, store) with an `Actuator` whose xrtd client is a `BridgeClient`
to that host's bridge, so the host keeps its own lease. One policy serves every host: each host's
thread asks it for the next trial while the others' are still running (Ax then generates an arm
that takes the pending ones into account), so N hosts run N trials in parallel. Trials go into one
run (experiment) of the store, their policy named `<policy>@<host>`.

A host whose bridge or xrtd is lost fails its trial with the reason and leaves the run; the others
go on. A coordinator that dies stops heartbeating: every host's xrtd restores its knobs when the
lease runs out (one second). `resume=RUN` continues such a run: the policy is rebuilt from what the
store holds (the SLO bounds it was made with, then every stored trial attached in index order) and
only the rest of the budget is suggested; trials in flight when the coordinator died were never
stored, so they are suggested again rather than lost.

Given `HostExporters`, each host's trials go to its own exporter (the `host` label comes from the
Prometheus file-SD file that lists them, see exporters.py). A host's exporter is withdrawn when
the host leaves the run, and each one at the end, before the host's knobs are kept or restored.
"""

from __future__ import annotations

import contextlib
import functools
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from xtune.config.hosts import Host, HostsFile
from xtune.config.schema import SloFile
from xtune.hosts.bridge import BridgeClient
from xtune.hosts.exporters import HostExporters
from xtune.knobs.actuator import Actuator
from xtune.knobs.table import KnobError
from xtune.policies import make_policy
from xtune.policies.base import Outcome, TrialPolicy
from xtune.signals.curve import ClientKeys, CurveError
from xtune.trials.store import Store, StoredTrial
from xtune.tuning.bench_loop import BenchRunner, NoFrames
from xtune.tuning.loop import MAX_FAILURES_IN_A_ROW, Summary, TrialFailed, TrialResult
from xtune.tuning.metrics import Metrics

LEASE_MS = 1000
BRIDGE_TIMEOUT_S = 5.0  # xrtd answers at once; a host silent this long is lost

# (host, event, data): the loop's progress events, with the host's name.
FleetProgress = Callable[[str, str, dict[str, Any]], None]


class FleetError(RuntimeError):
    """The run cannot go on: no host could start; the message gives each host's reason."""


@dataclass
class HostRun:
    host: Host
    runner: HostRunner | None = None
    trials: list[TrialResult] = field(default_factory=list)
    error: str | None = None  # why the host left the run
    withdraw: Callable[[], None] = lambda: None  # stops exporting the host's series


@dataclass
class FleetResult:
    experiment_id: int
    hosts: list[HostRun]
    best: dict[str, Any] | None
    seconds: float
    attached: int = 0  # stored trials a resumed run gave its policy as data

    @property
    def trials(self) -> list[TrialResult]:
        return [t for h in self.hosts for t in h.trials]


class HostRunner(BenchRunner):
    """The loop's trial path on one host; a trial during which the host's lease was lost fails."""

    def measure(self, n: int, phase: str, trial: int | None = None, guarded: bool = False) -> Any:
        measured = super().measure(n, phase, trial, guarded)
        client = self.actuator.client
        lost = client.lease_error
        if lost is not None:
            raise KnobError(f"lease lost while measuring: {lost}")
        if not client.status()["lease"]["held"]:  # KnobError if the host is gone
            raise KnobError("lease lost while measuring: xrtd holds none of this client's (xrtd restarted?)")
        return measured


class _SharedPolicy:
    """The one policy of the run, asked from every host's thread. Store indices are the policy's
    plus `offset`: a resumed Ax experiment numbers its new trials after the attached ones, and
    the store's must not repeat those of the trials stored before."""

    def __init__(self, inner: TrialPolicy, offset: int = 0) -> None:
        self.inner = inner
        self.offset = offset
        self.cond = threading.Condition()
        self.in_flight = 0

    def suggest(self) -> tuple[int, dict[str, Any]] | None:
        with self.cond:
            while True:
                try:
                    suggestion = self.inner.suggest()
                except RuntimeError as e:
                    # Ax's first (Sobol) trials are all out and none has data yet: wait for one.
                    if "DataRequiredError" not in str(e) or self.in_flight == 0:
                        raise
                    self.cond.wait()
                    continue
                if suggestion is None:
                    return None
                self.in_flight += 1
                return suggestion[0] + self.offset, suggestion[1]

    def done(self, complete: Callable[[], None] | None = None) -> None:
        """A trial in flight ended (told to the policy when `complete` is given). It counts as
        ended even when telling fails: hosts waiting for data must not wait for it forever."""
        with self.cond:
            try:
                if complete is not None:
                    complete()
            finally:
                self.in_flight -= 1
                self.cond.notify_all()


class _HostPolicy(TrialPolicy):
    """A host's view of the shared policy: the host's name in the store."""

    def __init__(self, shared: _SharedPolicy, host: str) -> None:
        self.shared = shared
        self.name = f"{shared.inner.name}@{host}"

    def suggest(self) -> tuple[int, dict[str, Any]] | None:
        return self.shared.suggest()

    def complete(self, index: int, params: dict[str, Any], outcome: Outcome) -> None:
        inner = self.shared.inner
        self.shared.done(lambda: inner.complete(index - self.shared.offset, params, outcome))

    def fail(self, index: int, reason: str) -> None:
        inner = self.shared.inner
        self.shared.done(lambda: inner.fail(index - self.shared.offset, reason))


def host_slo(slo: SloFile, host: Host) -> SloFile:
    """The file as one host runs it: its benchmark inside the host's namespace, if it has one."""
    if slo.benchmark is None:
        raise ValueError(f"{slo.name}: a run on several hosts measures with a `benchmark` (none in the file)")
    if host.netns is None:
        return slo
    return slo.model_copy(update={"benchmark": slo.benchmark.model_copy(update={"netns": host.netns})})


def run_fleet(
    slo: SloFile,
    hosts: HostsFile,
    store: Store,
    metrics: HostExporters | Metrics,
    progress: FleetProgress | None = None,
    resume: int | None = None,
) -> FleetResult:
    """Baseline on every host, trials on all of them in parallel until the policy is done, then
    each host's knobs kept or restored as the file says. `resume` continues that run of the store
    instead of starting one. Raises FleetError if no host starts or the run cannot be resumed.

    `metrics`: `HostExporters` gives each host its own exporter, listed for Prometheus; a single
    `Metrics` gets every host's series, which nothing then tells apart (for callers that do not
    export them)."""
    started = time.monotonic()
    report = progress or (lambda _host, _event, _data: None)
    config = {**slo.model_dump(mode="json"), "hosts": [h.name for h in hosts.hosts]}
    if resume is None:
        experiment_id, stored = store.new_experiment(slo.name, config), []
    else:
        experiment_id, stored = resume, resumable(store, resume, slo, config)
    runs = [HostRun(h) for h in hosts.hosts]

    def start(run: HostRun) -> None:
        name = run.host.name
        try:
            keys = ClientKeys.load(run.host.keys)
            hslo = host_slo(slo, run.host)
            if isinstance(metrics, HostExporters):
                host_metrics = metrics.serve(name, experiment_id)
                run.withdraw = functools.partial(metrics.withdraw, name)
            else:
                host_metrics = metrics
            actuator = Actuator(
                run.host.bridge,
                hslo.knobs,
                LEASE_MS,
                connect=lambda client: BridgeClient(run.host.bridge, keys, BRIDGE_TIMEOUT_S, client),
            )
        except (KnobError, CurveError, OSError) as e:
            _leave(run, f"host {name}: {e}", report)
            return
        run.runner = HostRunner(
            hslo, actuator, NoFrames(), store, host_metrics, None,
            lambda event, data: report(name, event, data), experiment_id,
        )  # fmt: skip
        try:
            run.runner.baseline()
        except (KnobError, OSError, RuntimeError) as e:
            _leave(run, f"host {name}: baseline: {e}", report)

    _each(runs, start)
    live = [r for r in runs if r.runner is not None and r.error is None]
    if not live:
        raise FleetError("no host could start: " + "; ".join(r.error or "" for r in runs))
    assert live[0].runner is not None
    state = store.experiment(experiment_id).policy_state  # type: ignore[union-attr]
    if state is None:  # a new run, or one killed before its policy was made
        state = {"bounds": {str(i): b.bound for i, b in enumerate(live[0].runner.guard.baseline)}}
        store.update_experiment(experiment_id, policy_state=state)
    bounds = {int(i): float(b) for i, b in state["bounds"].items()}
    rest: dict[str, Any] = {"budget": slo.policy.budget - len(stored)}
    if stored and slo.policy.seed is not None:
        # Attached trials do not advance Ax's Sobol sequence: from the run's own seed it would
        # draw the points already measured again. Another seed, as deterministic, does not.
        rest["seed"] = slo.policy.seed + len(stored)
    policy_slo = slo.model_copy(update={"policy": slo.policy.model_copy(update=rest)})
    inner = make_policy(policy_slo, bounds, sorted(stored, key=lambda t: t.index))
    offset = 0
    if stored:  # the attached trials took the policy's first indices
        offset = max(t.index for t in stored) + 1 - inner.warm_started  # type: ignore[attr-defined]
    policy = inner
    shared = _SharedPolicy(policy, offset)
    try:
        _each(live, lambda run: _trials(run, _HostPolicy(shared, run.host.name), report))
    finally:
        policy.close()
    runner = live[0].runner
    best = runner.best(_as_results(runner, stored, bounds) + [t for r in runs for t in r.trials])
    for run in runs:
        run.withdraw()  # before its knobs change: what was exported no longer holds
        if run.runner is not None:
            with contextlib.suppress(KnobError, OSError):
                run.runner.close()
    store.update_experiment(
        experiment_id,
        result={"best": best, "hosts": {r.host.name: r.error for r in runs}},
    )
    attached = getattr(inner, "warm_started", 0)
    return FleetResult(experiment_id, runs, best, time.monotonic() - started, attached)


def resumable(store: Store, run: int, slo: SloFile, config: dict[str, Any]) -> list[StoredTrial]:
    """The stored trials of `run`, which must be an unfinished run of this very file with budget
    left; FleetError says what differs otherwise."""
    exp = store.experiment(run)
    if exp is None:
        raise FleetError(f"cannot resume run {run}: no such run in {store.url}")
    if exp.result is not None:
        raise FleetError(f"cannot resume run {run}: it ended (its result is stored)")
    if slo.policy.kind != "bo":
        raise FleetError(
            f"cannot resume run {run}: policy {slo.policy.kind!r} would suggest its first trials again;"
            " only `bo` rebuilds its state from the stored trials"
        )
    if exp.name != slo.name:
        raise FleetError(f"cannot resume run {run}: it is experiment {exp.name!r}, the file is {slo.name!r}")
    differ = sorted(k for k in config.keys() | exp.config.keys() if config.get(k) != exp.config.get(k))
    if differ:
        raise FleetError(
            f"cannot resume run {run}: the file or hosts differ from the run's in {', '.join(differ)}"
        )
    stored = store.trials(run)
    if len(stored) >= slo.policy.budget:
        raise FleetError(f"cannot resume run {run}: its budget of {slo.policy.budget} trials is spent")
    return stored


def _as_results(runner: HostRunner, stored: list[StoredTrial], bounds: dict[int, float]) -> list[TrialResult]:
    """The trials a resumed run stored before, as results: its best is chosen among them too, each
    judged by the SLO bounds it was measured under (the run's, kept in the store)."""
    out = []
    for t in stored:
        if t.objective is None:  # failed: no measurement
            continue
        slo = {i: (math.nan, math.nan) for i in range(len(runner.lines))}
        for i, mean_sem in t.metrics.get("slo", {}).items():
            slo[int(i)] = tuple(math.nan if v is None else float(v) for v in mean_sem)  # type: ignore[assignment]
        sem = math.nan if t.objective_sem is None else t.objective_sem
        summary = Summary(t.objective, sem, slo, int(t.metrics.get("windows", 0)))
        kept = t.status == "completed"  # else the guard rolled it back
        out.append(
            TrialResult(
                t.index, t.params, summary, kept, not kept, meets_slo=kept and _holds(runner, summary, bounds)
            )
        )
    return out


def _holds(runner: HostRunner, summary: Summary, bounds: dict[int, float]) -> bool:
    for i, line in enumerate(runner.lines):
        mean = summary.slo[i][0]
        if not math.isnan(mean) and i in bounds and not line.holds(mean, bounds[i]):
            return False
    return True


def _each(runs: list[HostRun], fn: Callable[[HostRun], None]) -> None:
    threads = [threading.Thread(target=fn, args=(r,), name=f"xtune-{r.host.name}") for r in runs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _leave(run: HostRun, reason: str, report: FleetProgress) -> None:
    run.error = reason
    run.withdraw()
    report(run.host.name, "failed", {"reason": reason})


def _trials(run: HostRun, policy: _HostPolicy, report: FleetProgress) -> None:
    """Trials on one host until the policy has none left or the host is lost."""
    runner = run.runner
    assert runner is not None
    failures = 0
    try:
        while (suggestion := policy.suggest()) is not None:
            index, params = suggestion
            began = time.time()
            try:
                done = runner.trial(policy, index, params)
            except TrialFailed as e:  # this trial only: the host answered
                runner.failed(policy, index, params, f"host {run.host.name}: {e}", began)
                failures += 1
                if failures == MAX_FAILURES_IN_A_ROW:
                    _leave(
                        run, f"host {run.host.name}: {failures} trials in a row failed, the last: {e}", report
                    )
                    return
                continue
            except Exception as e:  # noqa: BLE001 - any other failure ends this host's run, with its reason
                reason = f"host {run.host.name}: {e}"
                try:
                    runner.store.add_trial(
                        runner.experiment_id,
                        StoredTrial(index, policy.name, params, "failed", None, None, {"error": reason}),
                        began,
                        time.time(),
                    )
                    runner.metrics.trials.labels(runner.metrics.experiment, "failed").inc()
                finally:  # Ax hears of it, and hosts waiting for data stop counting on it
                    policy.fail(index, reason)
                _leave(run, reason, report)
                return
            failures = 0
            run.trials.append(done)
            policy.complete(index, params, done.outcome())
    except Exception as e:  # noqa: BLE001 - the policy or the store failed: this host stops, with the reason
        _leave(run, f"host {run.host.name}: {e}", report)
