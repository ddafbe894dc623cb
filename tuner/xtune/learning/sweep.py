"""`xtune sweep`: record a knob's landscape, every value under every load regime, for training.

For each regime (a load command) and each value of the knob, in an order shuffled per round so
that drift in the host does not line up with the values, the value is applied through xrtd (a
transaction, read back), the frames of a settling period are dropped, and the frames of the next
`seconds` are recorded after a DECISION record `sweep {knob: value}` with `extra.regime`. That is
the format `xtune train --objective ... --throughput ...` reads (regimes.py). The knob goes back
to its original value when the sweep ends, on every exit path.
"""

from __future__ import annotations

import random
import shlex
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from xtune.knobs.actuator import Actuator
from xtune.signals.frames import FrameReader
from xtune.signals.recording import Decision, RecordingWriter


def parse_regimes(specs: Sequence[str]) -> dict[str, list[str]]:
    """NAME=COMMAND pairs (the command split like a shell would, without running one)."""
    regimes: dict[str, list[str]] = {}
    for spec in specs:
        name, sep, command = spec.partition("=")
        if not sep or not name or not command.strip():
            raise ValueError(f"regime {spec!r}: expected NAME=COMMAND")
        if name in regimes:
            raise ValueError(f"regime {name!r} is given twice")
        regimes[name] = shlex.split(command)
    return regimes


def record_sweep(
    actuator: Actuator,
    reader: FrameReader,
    knob: str,
    values: Sequence[int],
    regimes: dict[str, list[str]],
    out: str | Path,
    seconds: float,
    settle: float = 0.5,
    rounds: int = 1,
    seed: int = 0,
    progress: Callable[[str], None] = lambda _line: None,
) -> int:
    """Record the sweep into `out`; returns the number of frames recorded."""
    if not values or not regimes:
        raise ValueError("a sweep needs at least one value and one regime")
    rng = random.Random(seed)
    frames = 0
    with RecordingWriter(out) as rec:
        for r in range(rounds):
            for name, command in regimes.items():
                load = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                try:
                    for value in rng.sample(list(values), len(values)):
                        applied = actuator.apply({knob: value}, f"sweep {name} round {r}")
                        _drain(reader, settle)
                        if load.poll() is not None:
                            err = load.stderr.read().decode(errors="replace") if load.stderr else ""
                            raise RuntimeError(f"regime {name}: load exited {load.returncode}: {err.strip()}")
                        rec.append_decision(
                            Decision(
                                "sweep",
                                {knob: value},
                                "sweep",
                                extra={"regime": name, "applied": applied[knob]},
                            )
                        )
                        deadline = time.monotonic() + seconds
                        while (left := deadline - time.monotonic()) > 0:
                            frame = reader.poll(min(left, 0.5))
                            if frame is None:
                                continue
                            rec.append_frame_of(frame.raw, reader.catalog)
                            frames += 1
                        progress(f"{name}: {knob} = {value}")
                finally:
                    load.terminate()
                    try:
                        load.wait(5)
                    except subprocess.TimeoutExpired:
                        load.kill()
                        load.wait()
    return frames


def _drain(reader: FrameReader, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        reader.poll(min(left, 0.1))
