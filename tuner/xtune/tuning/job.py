"""One tuning run wired from an SLO file: what `xtune run` and both phases of `xtune demo` share.

`run_job` builds the parts (xrtd actuator, frame reader, workload, progress console, and the
Runner, or the BenchRunner when the file's windows are benchmark runs), runs the file's policy,
closes them, and keeps the run's units with it in the store. The `FinishedRun` it returns prints the
before/after table and writes the report.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from xtune import paths
from xtune.config.schema import SloFile
from xtune.knobs.actuator import Actuator
from xtune.policies import make_policy
from xtune.signals.frames import FrameReader, ShmFrameReader, ZmqFrameReader
from xtune.trials.report import write_report
from xtune.trials.store import Store
from xtune.tuning.console import Progress, RunUnits, before_after
from xtune.tuning.loop import Runner, RunResult
from xtune.tuning.metrics import Metrics
from xtune.tuning.workload import Workload


@dataclass
class FinishedRun:
    """A finished tuning run: its result, the units of its figures and the store it is in."""

    result: RunResult
    units: RunUnits
    store: Store

    def print_table(self, console: Console) -> None:
        """The before/after table."""
        before_after(self.result, console, self.units)

    def write_report(self, out: Path, console: Console) -> Path:
        """Plots and index.html in `out`; prints where."""
        report = write_report(self.store, self.result.experiment_id, out)
        console.print(f"report: {report}")
        return report


def run_job(
    slo: SloFile,
    store: Store,
    metrics: Metrics,
    console: Console,
    xrtd_socket: str = "",
    signals_shm: str = "",
    warm: bool = False,
) -> FinishedRun:
    """Run the tuning job `slo` describes and close everything it started, `metrics` included.

    `xrtd_socket` defaults to the file's, else the system's; `signals_shm` to the file's signal
    source (its ZeroMQ address when it has one). With `warm`, the policy starts from the stored
    trials of earlier runs with the file's name."""
    actuator = Actuator(xrtd_socket or slo.xrtd_socket or paths.XRTD_SOCKET, slo.knobs)
    workload = Workload(slo.workload) if slo.workload else None
    reader: FrameReader
    if slo.benchmark is not None:  # windows are benchmark runs, not observer frames
        from xtune.tuning.bench_loop import BenchRunner, NoFrames

        reader = NoFrames()
        progress = Progress(console, slo)
        runner: Runner = BenchRunner(slo, actuator, reader, store, metrics, workload, progress)
    else:
        if signals_shm:
            reader = ShmFrameReader(signals_shm)
        elif slo.signals.zmq:
            reader = ZmqFrameReader(slo.signals.zmq)
        else:
            reader = ShmFrameReader(slo.signals.shm)
        progress = Progress(console, slo, reader)
        runner = Runner(slo, actuator, reader, store, metrics, workload, progress)
    try:
        trials = store.trials(name=slo.name) if warm else None
        if slo.benchmark is not None:
            result = runner.run(lambda bounds: make_policy(slo, bounds, trials))
        else:
            result = runner.run(lambda bounds: make_policy(slo, bounds, trials))
    finally:
        runner.close()
        reader.close()
        metrics.close()
    progress.units.record(store, result.experiment_id)
    return FinishedRun(result, progress.units, store)
