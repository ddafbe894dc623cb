"""The run loop for SLO files with a `benchmark`: each measurement window is one benchmark run.

The trial path is `loop.Runner`'s (baseline, apply through xrtd, settle, measure with the guard,
the best values measured again, restore on exit); only where windows come from differs: the
benchmark's command is run and its output parsed (`xtune.tuning.benchmark`) instead of observer frames
folded. A trial is `policy.windows` runs, each stored as a measurement of the trial; its
objective is their mean, and the standard error of that mean is the noise the optimizer is told
(the mean, not the median: the error of a mean of a few runs is known, the median's of two or three
is not, and the guard judges each run on its own, so an outlier run is caught there). A run whose
metric is missing fails its trial (stored as `failed`, not shown to the optimizer as a number), the
runs before it stored; in the baseline it stops the run with the reason.
"""

from __future__ import annotations

import time
from typing import Any

from xtune.policies.base import TrialPolicy
from xtune.signals.frames import Frame, FrameReader
from xtune.signals.window import Window
from xtune.tuning.benchmark import MetricMissing, run_benchmark
from xtune.tuning.loop import Runner, TrialFailed, TrialResult


class NoFrames(FrameReader):
    """The frame path's source when windows come from a benchmark: it never yields a frame."""

    def poll(self, timeout: float | None = None) -> Frame | None:
        time.sleep(timeout or 0.2)
        return None

    def close(self) -> None:
        pass


class BenchRunner(Runner):
    def next_window(self, timeout: float = 10.0) -> Window:
        assert self.slo.benchmark is not None
        run = run_benchmark(self.slo.benchmark)
        self._windows = getattr(self, "_windows", 0) + 1
        return Window(self._windows, run.start_ns, run.end_ns, 0, 0, run.values)

    def settle(self) -> None:
        if self.workload is not None and self.slo.workload and self.slo.workload.restart_on_change:
            self.workload.restart()
        time.sleep(self.slo.policy.settle_ms / 1000)

    def trial(self, policy: TrialPolicy, index: int, params: dict[str, Any]) -> TrialResult:
        try:
            return super().trial(policy, index, params)
        except MetricMissing as e:
            raise TrialFailed(str(e)) from e
