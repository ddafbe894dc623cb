"""The run loop: frames in, windows measured, knobs changed, the guard watching.

Two paths:
  - the frame path (`FramePump`, its own thread) reads every observer frame, appends it to the
    recording, folds it into the current window and, with a `tree` policy, decides and writes
    desired values into the shared knob table. It does a few dictionary updates per frame and
    never waits on the optimizer;
  - the trial path (`Runner.run`, the caller's thread) takes closed windows from a queue:
    baseline, then per trial apply (one xrtd transaction) -> settle -> measure N windows with
    the guard watching -> report to the policy. Ax runs in its own process (policies/bo.py).
"""

from __future__ import annotations

import contextlib
import math
import queue
import statistics
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from xtune.config import expr
from xtune.config.schema import SloFile
from xtune.host.sched import prompt_wakeups
from xtune.knobs.actuator import Actuator
from xtune.knobs.table import KnobRefused
from xtune.policies.base import Outcome, TrialPolicy
from xtune.policies.tree import TreePolicy
from xtune.signals.frames import Frame, FrameReader
from xtune.signals.recording import Decision, KnobChange, RecordingWriter
from xtune.signals.window import Window, WindowAggregator
from xtune.trials.store import Store, StoredTrial
from xtune.tuning.confirm import Confirmation, order
from xtune.tuning.guard import ChangeWatch, Guard, Violation
from xtune.tuning.metrics import Metrics
from xtune.tuning.model_file import ModelFile
from xtune.tuning.workload import Workload


class FramePump(threading.Thread):
    """The frame path: one frame in, at most a few microseconds of work, never a wait."""

    def __init__(
        self,
        reader: FrameReader,
        window_ns: int,
        metrics: Metrics,
        recorder: RecordingWriter | None = None,
        tree: TreePolicy | None = None,
        actuator: Actuator | None = None,
        rt_priority: int = 0,
    ) -> None:
        super().__init__(name="xtune-frames", daemon=True)
        self.rt_priority = rt_priority  # SCHED_FIFO for the pump thread, 0 = a short slice
        self.reader = reader
        self.agg = WindowAggregator(window_ns)
        self.windows: queue.Queue[Window] = queue.Queue()
        self.metrics = metrics
        self.recorder = recorder
        self.tree = tree
        self.tree_paused_until = 0.0
        self.actuator = actuator
        self.latencies: deque[float] = deque(maxlen=100_000)  # seconds per frame, for the benchmark
        # ns from a frame's window close to the pump taking it: where the loop stalls, for the benchmark
        self.lags: deque[int] = deque(maxlen=100_000)
        self.decisions = 0
        self.error: BaseException | None = None
        self._halt = threading.Event()
        self._reset = threading.Event()
        self._last: dict[str, int] | None = None
        self._next_tree: tuple[TreePolicy, str] | None = None
        self.swaps = 0
        self._chosen: dict[str, int] | None = None
        self._catalog_seen: object = None
        self._lost_seen = 0
        self.sched_note: str | None = None

    def _decide(self, frame: Frame, paused: bool) -> None:
        """The tree sees every frame, so its state (hysteresis, fallback) evolves the same whether or
        not its choice may be applied; each change of its choice is recorded with its inputs and
        whether it was applied, which is what `xtune replay --policy` reproduces."""
        assert self.tree is not None and self.actuator is not None
        tree = self.tree
        decision = tree.decide(frame.values, frame.empty)
        apply = not paused and decision != self._last
        if apply:
            self.actuator.write_desired(decision)
            self._last = decision
            self.decisions += 1
        if (apply or decision != self._chosen) and self.recorder is not None:
            inputs = dict(zip(tree.model.features, tree.inputs, strict=True))
            extra = {
                "seq": frame.seq,
                "frame_end_ns": frame.window_end_ns,
                "decided_ns": time.monotonic_ns(),  # CLOCK_MONOTONIC, as the frame's clock
                "inputs": inputs,
                "applied": apply,
            }
            self.recorder.append_decision(Decision("tree", dict(decision), tree.reason, extra=extra))
        self._chosen = decision

    def swap(self, policy: TreePolicy, reason: str) -> None:
        """Replace the running tree at the next frame, handing over its state; no frame is skipped.

        The new model is loaded and compiled by the caller, off the frame path.
        """
        if self.tree is None:
            raise ValueError("no tree policy is running")
        if policy.model.knobs != self.tree.model.knobs:
            raise ValueError(f"model decides {policy.model.knobs}, the running one {self.tree.model.knobs}")
        self._next_tree = (policy, reason)

    def _swap(self, seq: int) -> None:
        """The swap, before the frame `seq` is recorded and decided: the recording holds the new
        model there, so a replay switches models at the same frame."""
        assert self.tree is not None and self._next_tree is not None
        policy, reason = self._next_tree
        policy.take_over(self.tree)
        self.tree, self._next_tree = policy, None
        self.swaps += 1
        if self.recorder is not None:
            extra = {"seq": seq, "model": policy.model.to_doc()}
            self.recorder.append_decision(Decision("swap", {}, reason, extra=extra))

    def reset(self, timeout: float = 5.0) -> None:
        """Start a fresh window at the next frame; drop the windows closed before it."""
        self._reset.set()
        deadline = time.monotonic() + timeout
        while self._reset.is_set() and self.is_alive() and time.monotonic() < deadline:
            time.sleep(0.001)

    def stop(self) -> None:
        self._halt.set()
        self.join(5)

    def run(self) -> None:
        try:
            self._run()
        except BaseException as e:  # reported to the trial path, which stops the run
            self.error = e

    def _run(self) -> None:
        # Each frame is a wake-up on the tick -> effect path; None or why the default stays.
        self.sched_note = prompt_wakeups(fifo_priority=self.rt_priority)
        m, exp = self.metrics, self.metrics.experiment
        frames_total = m.frames.labels(exp)
        gaps_total = m.frame_gaps.labels(exp)
        latency = m.loop_latency.labels(exp)
        while not self._halt.is_set():
            frame = self.reader.poll(0.2)
            if frame is None:
                continue
            t0 = time.perf_counter()
            self.lags.append(time.monotonic_ns() - frame.window_end_ns)
            if self.reader.catalog is not self._catalog_seen:
                self._catalog_seen = self.agg.catalog = self.reader.catalog
            if self._reset.is_set():
                self.agg.reset()
                while not self.windows.empty():
                    self.windows.get_nowait()
                self._reset.clear()
            if self._next_tree is not None:
                self._swap(frame.seq)
            if self.recorder is not None:
                self.recorder.append_frame_of(frame.raw, self.reader.catalog)
            if self.tree is not None and self.actuator is not None:
                self._decide(frame, paused=t0 < self.tree_paused_until)
            window = self.agg.add(frame)
            if window is not None:
                self.windows.put(window)
            lost = self.reader.stats.lost
            if lost != self._lost_seen:
                gaps_total.inc(lost - self._lost_seen)
                self._lost_seen = lost
            frames_total.inc()
            dt = time.perf_counter() - t0
            latency.observe(dt)
            self.latencies.append(dt)


@dataclass
class Summary:
    """Mean and standard error over windows: the objective and each SLO line's left side.

    A standard error from one window is unknown (NaN), never 0: a policy told 0 would fit that one
    run as exact. `with_noise_floor` gives it the baseline's spread."""

    objective: float
    objective_sem: float
    slo: dict[int, tuple[float, float]]
    windows: int
    slo_windows: dict[int, int] = field(default_factory=dict)  # windows that gave each line a value

    @classmethod
    def of(cls, rows: list[tuple[float, list[float | None]]], n_lines: int) -> Summary:
        def mean_sem(xs: list[float]) -> tuple[float, float]:
            if not xs:
                return math.nan, math.nan
            sem = statistics.stdev(xs) / math.sqrt(len(xs)) if len(xs) > 1 else math.nan
            return statistics.fmean(xs), sem

        obj, sem = mean_sem([r[0] for r in rows])
        slo, counts = {}, {}
        for i in range(n_lines):
            xs = [x for r in rows if (x := r[1][i]) is not None]
            slo[i], counts[i] = mean_sem(xs), len(xs)
        return cls(obj, sem, slo, len(rows), counts)

    def with_noise_floor(self, baseline: Summary) -> Summary:
        """These means with standard errors no smaller than the baseline's window-to-window spread
        allows for as many windows: a trial of one window gets the baseline's spread, one of two
        lucky close windows no more certainty than the host's noise gives. Errors stay unknown when
        the baseline has fewer than two windows (no spread to read)."""

        def sem(own: float, n: int, base: float, m: int) -> float:
            if m < 2 or not math.isfinite(base) or n < 1:
                return math.nan
            floor = base * math.sqrt(m) / math.sqrt(n)  # the baseline's per-window spread, n windows
            return max(own, floor) if math.isfinite(own) else floor

        b = baseline
        nan = (math.nan, math.nan)
        slo = {
            i: (v[0], sem(v[1], self.slo_windows.get(i, self.windows), b.slo.get(i, nan)[1],
                          b.slo_windows.get(i, b.windows)))
            for i, v in self.slo.items()
        }  # fmt: skip
        obj_sem = sem(self.objective_sem, self.windows, b.objective_sem, b.windows)
        return Summary(self.objective, obj_sem, slo, self.windows, dict(self.slo_windows))


# Trials that fail one after another say something is wrong beyond their values (a target process
# gone, a benchmark that no longer runs): the run stops with the last reason instead of spending
# its budget on failures.
MAX_FAILURES_IN_A_ROW = 3
# How often a tree run looks for a replaced model file (one stat per look).
MODEL_LOOK_S = 0.5


class TrialFailed(RuntimeError):
    """A trial gave no measurement, but the run can go on (e.g. its benchmark printed no metric):
    it is stored as failed and the policy hears of it as a failure, never as a number."""


@dataclass
class TrialResult:
    index: int
    params: dict[str, Any]
    summary: Summary
    feasible: bool
    rolled_back: bool
    violations: list[Violation] = field(default_factory=list)
    windows_to_rollback: int | None = None
    meets_slo: bool = False  # not rolled back, and the means over its windows meet every SLO line

    def outcome(self) -> Outcome:
        """What the policy is told of this trial."""
        s = self.summary
        slo = {i: (m, _finite(sem)) for i, (m, sem) in s.slo.items() if not math.isnan(m)}
        return Outcome(s.objective, _finite(s.objective_sem), slo, self.feasible)


@dataclass
class RunResult:
    experiment_id: int
    original: dict[str, Any]
    before: Summary
    after: Summary | None
    best: dict[str, Any] | None
    trials: list[TrialResult]
    rollbacks: int
    suggest_seconds: list[float]
    lines: list[str]
    objective_text: str
    sign: float
    # Set when the best trial, measured again, was no better than the start: the original values
    # were put back (a tuner must never leave the system worse than it found it).
    kept_original: str | None = None
    final: dict[str, Any] = field(default_factory=dict)  # the knobs' values when the run ended
    # The start's values measured in turns with the best (confirm.py): what the gain is against.
    start_again: Summary | None = None

    def after_values(self) -> dict[str, Any]:
        """Each knob's value at the end: what the host holds, whichever way the run ended."""
        best = self.best or {}
        return {name: self.final.get(name, best.get(name, value)) for name, value in self.original.items()}

    @property
    def gain(self) -> float | None:
        """Relative improvement of the objective, after vs the start's values measured in turns with
        them (vs the baseline when they were not; positive = better)."""
        base = self.start_again or self.before
        if self.after is None or not base.objective:
            return None
        return self.sign * (self.after.objective - base.objective) / abs(base.objective)


ProgressFn = Callable[[str, dict[str, Any]], None]


class Runner:
    def __init__(
        self,
        slo: SloFile,
        actuator: Actuator,
        reader: FrameReader,
        store: Store,
        metrics: Metrics,
        workload: Workload | None = None,
        progress: ProgressFn | None = None,
        experiment_id: int | None = None,
    ) -> None:
        """`experiment_id`: a run in the store to add to (a coordinator's, shared by its hosts)."""
        self.slo = slo
        self.actuator = actuator
        self.reader = reader
        self.store = store
        self.metrics = metrics
        self.workload = workload
        self.progress = progress or (lambda _event, _data: None)
        self.objective = expr.parse(slo.objective.expression)
        self.lines = slo.comparisons()
        self.guard = Guard(self.lines, slo.guard)
        self.recorder = RecordingWriter(slo.record.path) if slo.record else None
        self.tree = None
        if slo.policy.kind == "tree":
            from xtune.policies.tree import TreeModel

            self.tree = TreePolicy(TreeModel.load(str(slo.policy.model)), slo.policy.hold)
        self.pump = FramePump(
            reader, slo.policy.window_ms * 1_000_000, metrics, self.recorder, self.tree, actuator
        )
        if experiment_id is None:
            experiment_id = store.new_experiment(slo.name, slo.model_dump(mode="json"))
        self.experiment_id = experiment_id
        self._last_window_t = 0.0
        self.noise: Summary | None = None  # the baseline: its spread is the floor of trials' errors

    # -- windows -------------------------------------------------------------------------------

    def next_window(self, timeout: float = 10.0) -> Window:
        deadline = time.monotonic() + timeout
        while True:
            if self.pump.error is not None:
                raise RuntimeError(f"frame path failed: {self.pump.error}") from self.pump.error
            try:
                return self.pump.windows.get(timeout=0.2)
            except queue.Empty:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"no observer frames for {timeout:.0f} s (is xobserve running?)"
                    ) from None

    def evaluate(self, values: dict[str, float]) -> tuple[float | None, list[float | None]]:
        """Objective and each SLO line's left side (None where a signal is missing)."""
        try:
            obj: float | None = expr.evaluate(self.objective, values)
        except expr.MissingSignal:
            obj = None
        lhs: list[float | None] = []
        for line in self.lines:
            try:
                lhs.append(expr.evaluate(line.left, values))
            except expr.MissingSignal:
                lhs.append(None)
        return obj, lhs

    def _record_window(
        self, phase: str, values: dict[str, float], trial: int | None
    ) -> tuple[float | None, list]:
        obj, lhs = self.evaluate(values)
        margins = self.guard.margins(values) if self.guard.baseline else {}
        self.metrics.window(obj, margins)
        self.store.add_measurement(
            self.experiment_id, phase, obj, margins, dict(self.actuator.current), trial
        )
        self.progress("window", {"phase": phase, "objective": obj, "margins": margins, "trial": trial})
        return obj, lhs

    def measure(
        self, n: int, phase: str, trial: int | None = None, guarded: bool = False
    ) -> tuple[Summary, list]:
        """Collect n windows (with a usable objective); with `guarded`, stop when the guard trips."""
        rows, tripped = self._collect(n, phase, trial, guarded)
        return Summary.of(rows, len(self.lines)), tripped

    def _collect(
        self, n: int, phase: str, trial: int | None, guarded: bool = False
    ) -> tuple[list[tuple[float, list[float | None]]], list]:
        """measure()'s windows: (objective, SLO left sides) of each, and the guard's violations."""
        rows: list[tuple[float, list[float | None]]] = []
        tripped: list[Violation] = []
        seen = 0
        while len(rows) < n:
            window = self.next_window()
            seen += 1
            obj, lhs = self._record_window(phase, window.values, trial)
            if obj is not None:
                rows.append((obj, lhs))
            if guarded:
                bad = self.guard.observe(window.values)
                if bad and self.slo.guard.action == "rollback":
                    tripped = bad
                    break
                if bad:
                    self.progress("warn", {"violations": bad, "trial": trial})
            if seen > 4 * n + 10:
                raise RuntimeError(
                    f"the objective {self.slo.objective.expression!r} had no value in {seen} windows"
                )
        self._seen = seen
        return rows, tripped

    def settle(self) -> None:
        if self.workload is not None and self.slo.workload and self.slo.workload.restart_on_change:
            self.workload.restart()
        time.sleep(self.slo.policy.settle_ms / 1000)
        self.pump.reset()

    # -- changes ---------------------------------------------------------------------------------

    def apply(self, params: dict[str, Any], reason: str, policy: str, trial: int | None) -> None:
        old = dict(self.actuator.current)
        applied = self.actuator.apply(params, reason)
        self.store.add_decision(self.experiment_id, policy, params, reason)
        self._gauge_knobs(applied, params)
        if self.recorder is not None:
            self.recorder.append_decision(Decision(policy, dict(params), reason, trial=trial))
            for name, value in applied.items():
                if old.get(name) != value:
                    knob = self.slo.knob(name)
                    self.recorder.append_knob_change(
                        KnobChange(name, knob.backend, old.get(name), value, reason)
                    )

    def _gauge_knobs(self, applied: dict[str, Any], desired: dict[str, Any] | None = None) -> None:
        """The knob gauges after a change: whatever made it (a trial, a rollback, the tree)."""
        for name, value in applied.items():
            want = (desired or {}).get(name, value)
            self.metrics.knob(name, float(want) if isinstance(want, (int, float)) else 0.0, float(value))

    def trial(self, policy: TrialPolicy, index: int, params: dict[str, Any]) -> TrialResult:
        if self.noise is None:  # nothing is applied: its error needs the baseline's spread
            raise RuntimeError("a trial was asked for before the baseline was measured")
        started = time.time()
        n = max(self.slo.policy.windows, self.slo.guard.watch_windows)
        self.progress("trial", {"index": index, "params": params, "windows": n})
        try:
            self.apply(params, f"{policy.name} trial {index}", policy.name, index)
        except KnobRefused as e:  # xrtd judged these values: its transaction changed nothing
            raise TrialFailed(f"values refused: {e}") from e
        self.settle()
        self.guard.watch()
        summary, bad = self.measure(n, "measure", index, guarded=True)
        summary = summary.with_noise_floor(self.noise)
        result = TrialResult(index, dict(self.actuator.current), summary, not bad, bool(bad), bad)
        if bad:
            reason = "; ".join(
                f"{v.line}: {v.value:.4g} vs bound {v.bound:.4g} (+/- {v.slack:.3g})" for v in bad
            )
            restored = self.actuator.rollback(f"guard: {reason}")
            self._gauge_knobs(restored)
            result.windows_to_rollback = self._seen
            self.store.add_rollback(self.experiment_id, index, reason, result.params, restored, self._seen)
            self.metrics.rollbacks.labels(self.metrics.experiment).inc()
            self.progress("rollback", {"index": index, "reason": reason, "windows": self._seen})
            self.settle()
        elif self._holds(summary):
            result.meets_slo = True
            self.actuator.mark_good()
        status = "completed" if result.feasible else "infeasible"
        self.metrics.trials.labels(self.metrics.experiment, status).inc()
        self.store.add_trial(
            self.experiment_id,
            StoredTrial(
                index,
                policy.name,
                result.params,
                status,
                _finite(summary.objective),
                _finite(summary.objective_sem),
                {"slo": {str(i): list(v) for i, v in summary.slo.items()}, "windows": summary.windows},
            ),
            started,
            time.time(),
        )
        self.progress("trial_done", {"result": result})
        return result

    def failed(
        self, policy: TrialPolicy, index: int, params: dict[str, Any], reason: str, began: float
    ) -> None:
        """Store a trial that gave no measurement, with its reason, and tell the policy."""
        self.store.add_trial(
            self.experiment_id,
            StoredTrial(index, policy.name, params, "failed", None, None, {"error": reason}),
            began,
            time.time(),
        )
        self.metrics.trials.labels(self.metrics.experiment, "failed").inc()
        self.progress("failed", {"index": index, "reason": reason})
        policy.fail(index, reason)

    def _holds(self, summary: Summary) -> bool:
        """Do the trial's means meet every SLO line (with the baseline-resolved bounds)?"""
        for i, (line, base) in enumerate(zip(self.lines, self.guard.baseline, strict=True)):
            mean = summary.slo[i][0]
            if not math.isnan(mean) and not line.holds(mean, base.bound):
                return False
        return True

    # -- the run ---------------------------------------------------------------------------------

    def baseline(self) -> Summary:
        """Measure the starting point (the values found on the system, or the file's defaults)."""
        start = {k.name: k.default for k in self.slo.knobs if k.default is not None}
        if start:
            self.apply(start, "defaults from the SLO file", "default", None)
        self.settle()
        rows: list[dict[str, float]] = []
        kept: list[tuple[float, list[float | None]]] = []
        while len(kept) < self.slo.policy.baseline_windows:
            window = self.next_window()
            obj, lhs = self._record_window("baseline", window.values, None)
            rows.append(window.values)
            if obj is not None:
                kept.append((obj, lhs))
        self.guard.set_baseline(rows)
        self.actuator.mark_good()
        summary = self.noise = Summary.of(kept, len(self.lines))
        self.store.update_experiment(
            self.experiment_id,
            baseline={
                "values": dict(self.actuator.current),
                "objective": summary.objective,
                "bounds": [b.bound for b in self.guard.baseline],
                "slack": [b.slack for b in self.guard.baseline],
            },
        )
        self.progress("baseline", {"summary": summary, "guard": self.guard.baseline})
        return summary

    def run(self, policy_factory: Callable[[dict[int, float]], TrialPolicy] | None = None) -> RunResult:
        """Baseline, then trials (or per-window tree decisions), then the best values measured."""
        if self.workload is not None:
            self.workload.start()
        self.pump.tree_paused_until = math.inf  # the baseline is measured at the starting values
        self.pump.start()
        original = dict(self.actuator.current)
        before = self.baseline()
        start = dict(self.actuator.current)  # what the baseline measured (the file's defaults, if any)
        self.pump.tree_paused_until = 0.0
        trials: list[TrialResult] = []
        suggest_seconds: list[float] = []
        best: dict[str, Any] | None = None
        after: Summary | None = None
        kept_original: str | None = None
        candidate: dict[str, Any] | None = None  # the best trial's values, kept or not
        confirmation: Confirmation | None = None
        start_again: Summary | None = None
        if self.tree is not None:
            after = self._run_tree()
        else:
            assert policy_factory is not None
            policy = policy_factory({i: b.bound for i, b in enumerate(self.guard.baseline)})
            failures = 0
            try:
                while (suggestion := policy.suggest()) is not None:
                    index, params = suggestion
                    began = time.time()
                    try:
                        done = self.trial(policy, index, params)
                    except TrialFailed as e:  # this trial only; a lost xrtd or observer ends the run
                        self.failed(policy, index, params, str(e), began)
                        failures += 1
                        if failures == MAX_FAILURES_IN_A_ROW:
                            raise RuntimeError(
                                f"{failures} trials in a row failed, the last: {e}; the run stops"
                            ) from e
                        continue
                    failures = 0
                    trials.append(done)
                    policy.complete(index, params, done.outcome())
                suggest_seconds = list(getattr(policy, "suggest_seconds", []))
            finally:
                policy.close()
            best = candidate = self.best(trials)
            if best is None:
                kept_original = "no trial met the SLO: the start's values are kept"
                self._back_to_start(start, original, kept_original)
            else:
                after, start_again, confirmation, kept_original = self._confirm(best, start, original)
                if kept_original is not None:
                    self._back_to_start(start, original, kept_original)
                    after, best = None, None
        result = RunResult(
            self.experiment_id,
            original,
            before,
            after,
            best,
            trials,
            sum(t.rolled_back for t in trials),
            suggest_seconds,
            [line.text for line in self.lines],
            self.slo.objective.expression,
            self.slo.objective.sign,
            kept_original,
            dict(self.actuator.current),
            start_again if after is not None else None,
        )
        self.store.update_experiment(
            self.experiment_id,
            result={
                "best": best,
                "candidate": candidate,
                "before": before.objective,
                "start_again": start_again.objective if start_again and after else None,
                "after": after.objective if after else None,
                "gain": result.gain,
                "kept_original": kept_original,
                "confirmation": confirmation.as_dict() if confirmation else None,
            },
        )
        return result

    def _confirm(
        self, best: dict[str, Any], start: dict[str, Any], original: dict[str, Any]
    ) -> tuple[Summary, Summary, Confirmation | None, str | None]:
        """The best values and the start's measured in turns (confirm.py), the best's windows
        guarded. Returns the best's and the start's windows over every pair, the comparison (None
        when the guard tripped) and why the start's values are kept (None when the best stay)."""
        policy = self.slo.policy
        self._to_start(start, original, "the start's values, measured beside the best")
        self.actuator.mark_good()  # a trip while the best are measured goes back to the start
        windows = policy.confirm_windows or policy.windows
        means: dict[str, list[float]] = {"start": [], "best": []}
        rows: list[tuple[float, list[float | None]]] = []
        start_rows: list[tuple[float, list[float | None]]] = []
        for pair in range(policy.confirm_pairs):
            for which in order(pair):
                if which == "best":
                    self.apply(best, "best trial", "final", None)
                    self.settle()
                    self.guard.watch()
                    got, bad = self._collect(windows, "final", None, guarded=True)
                    if bad:
                        broke = "the best values broke the SLO when measured again"
                        self._gauge_knobs(self.actuator.rollback(f"guard: {broke}"))
                        kept = f"{broke}: the start's values are kept"
                        summary = Summary.of(rows + got, len(self.lines))
                        return summary, Summary.of(start_rows, len(self.lines)), None, kept
                    rows += got
                else:
                    if pair:  # the first pair begins where _to_start left the knobs
                        self._to_start(start, original, "the start's values, measured beside the best")
                    self.settle()
                    got, _ = self._collect(windows, "confirm", None)
                    start_rows += got
                means[which].append(Summary.of(got, len(self.lines)).objective)
        confirmation = Confirmation(
            means["start"], means["best"], self.slo.objective.sign, policy.confirm_confidence
        )
        summaries = Summary.of(rows, len(self.lines)), Summary.of(start_rows, len(self.lines))
        if not confirmation.holds:
            return *summaries, confirmation, confirmation.why_not(best)
        if any(self.actuator.current.get(k) != v for k, v in best.items()):  # ended at the start
            self.apply(best, "best trial, confirmed", "final", None)
        self.actuator.mark_good()  # they held the SLO through every guarded turn
        return *summaries, confirmation, None

    def _back_to_start(self, start: dict[str, Any], original: dict[str, Any], reason: str) -> None:
        """Put back the values the baseline measured, and make them what a lease expiry returns to."""
        self.progress("kept", {"reason": reason})
        self._to_start(start, original, f"final: {reason}")
        self.actuator.mark_good()

    def _to_start(self, start: dict[str, Any], original: dict[str, Any], reason: str) -> None:
        """Set the values the baseline measured: those found on the system put back as found (they
        may lie outside the knobs' ranges), then the file's defaults that differ from them."""
        self._gauge_knobs(self.actuator.restore_original(reason))
        self.store.add_decision(self.experiment_id, "final", original, reason)
        defaults = {k: v for k, v in start.items() if original.get(k) != v}
        if defaults:
            self.apply(defaults, reason, "final", None)

    def _run_tree(self) -> Summary:
        """Per-window decisions for `budget` windows of wall time, the guard watching every change.

        The tree decides on the frame path; this loop only measures and guards, and may fall
        behind at 1 ms windows, so the run lasts budget × window_ms of time, not of windows read.
        A change that held the SLO through its watch becomes the last good values; a breach rolls
        back there. A replaced model file is swapped in live (tuning/model_file.py).
        """
        assert self.tree is not None and self.slo.policy.model is not None
        rows: list[tuple[float, list[float | None]]] = []
        watch = ChangeWatch(self.guard, dict(self.actuator.current))
        model_file = ModelFile(self.slo.policy.model)
        next_look = 0.0
        deadline = time.monotonic() + self.slo.policy.budget * self.slo.policy.window_ms / 1000
        while (now := time.monotonic()) < deadline:
            if now >= next_look:
                next_look = now + MODEL_LOOK_S
                if model_file.replaced():
                    self._swap_model(model_file)
            window = self.next_window()
            obj, lhs = self._record_window("measure", window.values, None)
            if obj is not None:
                rows.append((obj, lhs))
            changed = self.actuator.current != watch.values
            kind, bad = watch.observe(self.actuator.current, window.values)
            if changed:  # a tree decision (written on the frame path, which keeps no gauges)
                self._gauge_knobs(self.actuator.read_applied(), watch.values)
            if kind == "good" and self.actuator.read_applied() == watch.values:
                self.actuator.mark_good()
                if self.actuator.read_applied() != watch.values:  # the tree moved on meanwhile
                    watch.settled = False
            elif kind == "trip" and self.slo.guard.action == "rollback":
                # Hold the tree off while the restored values settle.
                pause = (self.slo.guard.watch_windows * self.slo.policy.window_ms) / 1000
                self.pump.tree_paused_until = time.perf_counter() + pause
                restored = self.actuator.rollback("guard: tree decision broke the SLO")
                self._gauge_knobs(restored)
                reason = "; ".join(v.line for v in bad)
                self.store.add_rollback(self.experiment_id, None, reason, watch.values, restored, 0)
                self.metrics.rollbacks.labels(self.metrics.experiment).inc()
                self.progress("rollback", {"index": None, "reason": reason, "windows": None})
            elif kind == "trip":
                self.progress("warn", {"violations": bad, "trial": None})
        return Summary.of(rows, len(self.lines))

    def _swap_model(self, model_file: ModelFile) -> None:
        """Load the replaced model off the frame path and hand it to the pump; a file that does not
        load (or decides other knobs) is refused and the running model stays."""
        assert self.tree is not None
        old = model_file.digest
        try:
            policy = TreePolicy(model_file.load(), self.tree.hold)
            reason = f"model {model_file.path} replaced: {old} -> {model_file.digest}"
            self.pump.swap(policy, reason)
        except ValueError as e:
            reason = f"model {model_file.path} replaced but refused, {old} stays: {e}"
            self.progress("swap", {"reason": reason, "refused": True})
            self.store.add_decision(self.experiment_id, "swap", {}, reason)
            return
        self.progress("swap", {"reason": reason, "refused": False})
        self.store.add_decision(self.experiment_id, "swap", {}, reason)

    def best(self, trials: list[TrialResult]) -> dict[str, Any] | None:
        """The trial with the best measured objective among those that met the SLO."""
        sign = self.slo.objective.sign
        ok = [t for t in trials if t.meets_slo and not math.isnan(t.summary.objective)]
        if not ok:
            return None
        return max(ok, key=lambda t: sign * t.summary.objective).params

    def close(self, restore: bool | None = None) -> None:
        """Stop everything; keep or restore the knob values (default: as the file says).

        Every step runs even when an earlier one fails (the first error is raised at the end).
        """
        keep = self.slo.guard.on_exit == "keep" if restore is None else not restore
        with contextlib.ExitStack() as steps:  # callbacks run last-registered first
            steps.callback(self.actuator.close, restore=not keep)
            if self.recorder is not None:
                steps.callback(self.recorder.close)
            if self.workload is not None:
                steps.callback(self.workload.close)
            if self.pump.is_alive():
                steps.callback(self.pump.stop)


def _finite(x: float | None) -> float | None:
    return None if x is None or math.isnan(x) or math.isinf(x) else x
