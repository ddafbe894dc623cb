"""`xtune observe`, `xtune record`, `xtune replay`: the signal plane from the command line."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.live import Live
from rich.table import Table

from xtune import paths
from xtune.signals.curve import ClientKeys, CurveError
from xtune.signals.frames import (
    FRAME_REPLAYED,
    Catalog,
    Frame,
    FrameError,
    FrameReader,
    ShmFrameReader,
    ShmFrameWriter,
    ZmqFramePublisher,
    ZmqFrameReader,
    frame_header,
    with_flags,
)
from xtune.signals.recording import RecordingError, RecordingReader, RecordingWriter, RecordType
from xtune.tuning.terminal import make_console

app = typer.Typer()
console = make_console()  # ASCII only where the terminal cannot show more

ZmqOpt = Annotated[str | None, typer.Option("--zmq", help="read from this ZeroMQ endpoint")]
ShmOpt = Annotated[str | None, typer.Option("--shm", help="read from /dev/shm/NAME (the default source)")]
CurveOpt = Annotated[
    Path | None,
    typer.Option("--zmq-curve", help="with --zmq: CURVE keys in DIR (client.key, client.pub, server.pub)"),
]


def _fail(message: str, code: int = 2) -> typer.Exit:
    typer.echo(f"xtune: error: {message}", err=True)
    return typer.Exit(code)


def open_reader(zmq: str | None, shm: str | None, zmq_curve: Path | None = None) -> FrameReader:
    """The frame source the options name: ZeroMQ if --zmq (with CURVE if --zmq-curve), else the
    shared-memory ring."""
    if zmq and shm:
        raise _fail("give --zmq or --shm, not both")
    if zmq_curve and not zmq:
        raise _fail("--zmq-curve goes with --zmq ENDPOINT")
    try:
        if zmq:
            return ZmqFrameReader(zmq, curve=ClientKeys.load(zmq_curve) if zmq_curve else None)
        return ShmFrameReader(shm or paths.SIGNALS_SHM)
    except (CurveError, FileNotFoundError, FrameError) as e:
        raise _fail(str(e), 1) from e


def _poll(reader: FrameReader, timeout: float | None) -> Frame | None:
    """reader.poll, with a refused CURVE handshake as a clear error instead of a traceback."""
    try:
        return reader.poll(timeout)
    except CurveError as e:
        raise _fail(str(e), 1) from e


def _table(frame: Frame, reader: FrameReader, match: str) -> Table:
    catalog = reader.catalog
    s = reader.stats
    title = (
        f"seq {frame.seq}  window {frame.window_ns / 1e6:.2f} ms  frames {s.frames}  lost {s.lost}  "
        f"producer dropped {frame.dropped}  pmu: {catalog.pmu if catalog else '?'}"
    )
    table = Table(title=title, title_justify="left")
    for col in ("signal", "value", "unit", "kind"):
        table.add_column(col, justify="right" if col == "value" else "left")
    for name, value in frame.values.items():
        if match and not name.startswith(match):
            continue
        info = catalog.by_name.get(name) if catalog else None
        shown = "-" if name in frame.empty else f"{value:,.3f}".rstrip("0").rstrip(".")
        table.add_row(name, shown, info.unit if info else "", info.kind if info else "")
    return table


@app.command()
def observe(
    zmq: ZmqOpt = None,
    shm: ShmOpt = None,
    zmq_curve: CurveOpt = None,
    match: Annotated[str, typer.Option(help="only signals whose name starts with this")] = "",
    refresh: Annotated[float, typer.Option(help="seconds between screen updates")] = 0.5,
    once: Annotated[bool, typer.Option(help="print one frame's table and exit")] = False,
) -> None:
    """Show the live signals of a running xobserve in the terminal."""
    with open_reader(zmq, shm, zmq_curve) as reader:
        frame = _poll(reader, 5.0)
        if frame is None:
            raise _fail("no frame within 5 s: is xobserve running?", 1)
        if once:
            console.print(_table(frame, reader, match))
            return
        last = 0.0
        with Live(_table(frame, reader, match), console=console, auto_refresh=False) as live:
            try:
                while (frame := _poll(reader, None)) is not None:
                    if time.monotonic() - last >= refresh:
                        live.update(_table(frame, reader, match), refresh=True)
                        last = time.monotonic()
            except KeyboardInterrupt:
                pass


@app.command()
def record(
    path: Annotated[Path, typer.Argument(help="recording file (appended to if it exists)")],
    zmq: ZmqOpt = None,
    shm: ShmOpt = None,
    zmq_curve: CurveOpt = None,
    duration: Annotated[float | None, typer.Option(help="stop after this many seconds")] = None,
    frames: Annotated[int | None, typer.Option(help="stop after this many frames")] = None,
    idle: Annotated[float, typer.Option(help="stop after this many seconds without a frame")] = 0.0,
) -> None:
    """Record the catalog and every frame of a running xobserve (or replay) to a file."""
    try:
        writer = RecordingWriter(path)
    except (RecordingError, OSError) as e:
        raise _fail(str(e)) from e
    deadline = time.monotonic() + duration if duration else None
    count = 0
    with writer, open_reader(zmq, shm, zmq_curve) as reader:
        try:
            while frames is None or count < frames:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    break
                wait = min(x for x in (left, idle or None, 0.5) if x is not None)
                started = time.monotonic()
                frame = _poll(reader, wait)
                if frame is None:
                    if idle and count and time.monotonic() - started >= idle:
                        break
                    continue
                writer.append_frame_of(frame.raw, reader.catalog)
                count += 1
        except KeyboardInterrupt:
            pass
    s = reader.stats
    console.print(f"recorded {count} frames to {path}; lost {s.lost}, producer dropped {s.producer_dropped}")


@app.command()
def replay(
    path: Annotated[Path, typer.Argument(help="recording to republish")],
    zmq: Annotated[str | None, typer.Option("--zmq", help="publish on this ZeroMQ endpoint")] = None,
    shm: Annotated[str | None, typer.Option("--shm", help="publish to /dev/shm/NAME")] = None,
    fast: Annotated[bool, typer.Option(help="as fast as possible instead of the original pace")] = False,
    wait: Annotated[float, typer.Option(help="seconds to wait for a ZeroMQ subscriber")] = 10.0,
    policy: Annotated[
        Path | None, typer.Option(help="instead: run the frames through this tree model, compare decisions")
    ] = None,
    hold: Annotated[int, typer.Option(help="with --policy: the hysteresis the recording ran with")] = 1,
) -> None:
    """Republish a recording's frames (flagged as replayed) at the original pace or as fast as possible.

    With --policy, publish nothing: feed the frames to the model offline and report whether its
    decisions are identical to the recorded ones (exit 1 and the differences if not)."""
    if policy is not None:
        _replay_policy(path, policy, hold)
        return
    if not zmq and not shm:
        raise _fail("give --zmq ENDPOINT and/or --shm NAME to publish to")
    try:
        reader = RecordingReader(path)
    except (RecordingError, OSError) as e:
        raise _fail(str(e)) from e
    zpub: ZmqFramePublisher | None = None
    ring: ShmFrameWriter | None = None
    first: tuple[int, float] | None = None
    count = 0
    try:
        for rec in reader.records():
            if rec.type == RecordType.CATALOG:
                Catalog.from_json(rec.payload)  # refuse a bad catalog before publishing it
                if zmq and zpub is None:
                    zpub = ZmqFramePublisher(zmq, rec.payload)
                    if not zpub.wait_subscriber(wait):
                        raise _fail(f"no subscriber on {zmq} within {wait} s", 1)
                elif zpub:
                    zpub.set_catalog(rec.payload)
                if shm and ring is None:
                    ring = ShmFrameWriter(shm, rec.payload)
                elif ring:
                    ring.set_catalog(rec.payload)
            elif rec.type == RecordType.FRAME:
                if zpub is None and ring is None:
                    raise _fail(f"{path}: frame at offset {rec.offset} comes before any catalog")
                end_ns = frame_header(rec.payload)[2]
                if not fast:
                    if first is None:
                        first = (end_ns, time.monotonic())
                    delay = first[1] + (end_ns - first[0]) / 1e9 - time.monotonic()
                    if delay > 0:
                        time.sleep(delay)
                frame = with_flags(rec.payload, FRAME_REPLAYED)
                if ring:
                    ring.publish(frame)
                if zpub:
                    zpub.publish(frame)
                count += 1
    except (RecordingError, FrameError) as e:
        raise _fail(str(e)) from e
    except KeyboardInterrupt:
        pass
    finally:
        if zpub:
            zpub.close()
        if ring:
            ring.close()
    console.print(f"replayed {count} frames from {path}")


def _replay_policy(path: Path, model_path: Path, hold: int) -> None:
    from xtune.learning.replay import replay_policy
    from xtune.policies.tree import TreeModel

    try:
        result = replay_policy(path, TreeModel.load(model_path), hold)
    except (RecordingError, FrameError, ValueError, OSError) as e:
        raise _fail(str(e)) from e
    if result.identical:
        console.print(f"identical: {len(result.recorded)} decisions over {result.frames} frames of {path}")
        return
    console.print(f"{len(result.differences)} differences over {result.frames} frames of {path}:")
    for line in result.differences[:50]:
        console.print(f"  {line}")
    raise typer.Exit(1)
