"""Recordings: written by xobserve and `xtune record`, replayed byte for byte, appendable."""

import os
import subprocess
import time
from pathlib import Path

import pytest
from xtune import paths
from xtune.host.pmu import pmu_available
from xtune.host.services import free_port
from xtune.signals.frames import FRAME_REPLAYED, Catalog, ShmFrameReader, with_flags
from xtune.signals.recording import (
    FILE_HEADER_SIZE,
    Decision,
    KnobChange,
    RecordingError,
    RecordingReader,
    RecordingWriter,
    RecordType,
)

XTUNE = str(paths.ROOT / ".venv" / "bin" / "xtune")


def record_with_xobserve(xobserve: Path, path: Path, seconds: float = 1.0) -> None:
    outputs = ["--shm", f"xt-test-rec-{os.getpid()}", "--zmq", f"tcp://127.0.0.1:{free_port()}"]
    args = ["--families", "sched,softirq,syscall", "--window-ms", "5", "--duration", str(seconds)]
    subprocess.run(
        [str(xobserve), *args, *outputs, "--record", str(path)], check=True, capture_output=True, timeout=120
    )


def payloads(path: Path, rtype: int) -> list[bytes]:
    return [r.payload for r in RecordingReader(path).records() if r.type == rtype]


def test_recording_round_trips_byte_exact_through_replay(xobserve, tmp_path):
    original, copy = tmp_path / "a.xtrec", tmp_path / "b.xtrec"
    record_with_xobserve(xobserve, original)
    frames = payloads(original, RecordType.FRAME)
    assert len(frames) >= 150
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    recorder = subprocess.Popen(
        [XTUNE, "record", str(copy), "--zmq", endpoint, "--frames", str(len(frames)), "--duration", "60"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    replay = subprocess.run(
        [XTUNE, "replay", str(original), "--zmq", endpoint, "--fast"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert replay.returncode == 0, replay.stdout + replay.stderr
    out, _ = recorder.communicate(timeout=60)
    assert recorder.returncode == 0, out
    assert payloads(copy, RecordType.CATALOG) == payloads(original, RecordType.CATALOG)[:1]
    replayed = payloads(copy, RecordType.FRAME)
    # Identical bytes but for the one flag that says "replayed".
    assert replayed == [with_flags(f, FRAME_REPLAYED) for f in frames]
    assert "lost 0" in out


def test_replay_at_original_pace_through_shm(xobserve, tmp_path):
    original = tmp_path / "a.xtrec"
    record_with_xobserve(xobserve, original, 0.5)
    frames = list(RecordingReader(original).frames())
    name = f"xt-test-replay-{os.getpid()}"
    started = time.monotonic()
    replay = subprocess.Popen(
        [XTUNE, "replay", str(original), "--shm", name], stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 30
        while not Path(f"/dev/shm/{name}").exists():
            assert replay.poll() is None, replay.stderr.read() if replay.stderr else ""
            assert time.monotonic() < deadline
            time.sleep(0.005)
        with ShmFrameReader(name, from_start=True) as reader:
            got = list(reader.frames(timeout=2))
    finally:
        replay.wait(30)
    elapsed = time.monotonic() - started
    span = (frames[-1].window_end_ns - frames[0].window_end_ns) / 1e9
    assert elapsed >= span * 0.9  # paced like the original, not as fast as possible
    assert got and all(f.replayed for f in got)
    by_seq = {f.seq: f for f in frames}
    assert all(f.values == by_seq[f.seq].values for f in got)


def test_knob_changes_and_decisions_append_to_a_recording(xobserve, tmp_path):
    path = tmp_path / "run.xtrec"
    record_with_xobserve(xobserve, path, 0.2)
    n_frames = len(payloads(path, RecordType.FRAME))
    with RecordingWriter(path) as w:
        w.append_knob_change(KnobChange("net.core.somaxconn", "sysctl", 4096, 1024, "trial 3", {"trial": 3}))
        w.append_decision(Decision("bo", {"net.core.somaxconn": 1024}, "expected improvement", 0.93, 3))
    record_with_xobserve(xobserve, path, 0.2)  # xobserve appends after them
    reader = RecordingReader(path)
    types = [r.type for r in reader.records()]
    assert types.count(RecordType.KNOB_CHANGE) == 1 and types.count(RecordType.DECISION) == 1
    assert types.count(RecordType.CATALOG) == 2
    assert types.count(RecordType.FRAME) > n_frames
    (change,) = reader.knob_changes()
    assert (change.knob, change.old, change.new, change.extra) == (
        "net.core.somaxconn",
        4096,
        1024,
        {"trial": 3},
    )
    (decision,) = reader.decisions()
    assert decision.values == {"net.core.somaxconn": 1024} and decision.objective == 0.93
    # Frames after the second catalog decode with it; the sequence restarts with the new run.
    seqs = [f.seq for f in reader.frames()]
    assert seqs.count(1) == 2


def test_torn_tail_is_cut_before_appending(tmp_path):
    path = tmp_path / "torn.xtrec"
    catalog = Catalog([], 10_000_000).to_json()
    with RecordingWriter(path) as w:
        w.append_catalog(catalog)
    good = path.stat().st_size
    with path.open("ab") as f:
        f.write(b"\x02\x00\x00\x00\x40\x00\x00\x00" + b"\x00" * 12)  # a frame record cut short
    with pytest.raises(RecordingError, match="torn record at offset"):
        list(RecordingReader(path).records())
    with RecordingWriter(path) as w:
        w.append_decision(Decision("static", {}, "keep"))
    records = list(RecordingReader(path).records())
    assert [r.type for r in records] == [RecordType.CATALOG, RecordType.DECISION]
    assert records[1].offset == good


def test_live_frames_carry_their_catalog_once_per_change(tmp_path):
    path = tmp_path / "live.xtrec"
    first, same, other = Catalog([], 1_000_000), Catalog([], 1_000_000), Catalog([], 5_000_000)
    with RecordingWriter(path) as w:
        w.append_frame_of(b"f1", first)
        w.append_frame_of(b"f2", first)
        w.append_frame_of(b"f3", same)  # a new object, the same catalog: not written again
        w.append_frame_of(b"f4", other)  # a restarted producer with another window
    kinds = [(r.type, r.payload) for r in RecordingReader(path).records()]
    assert kinds == [
        (RecordType.CATALOG, first.to_json()),
        (RecordType.FRAME, b"f1"),
        (RecordType.FRAME, b"f2"),
        (RecordType.FRAME, b"f3"),
        (RecordType.CATALOG, other.to_json()),
        (RecordType.FRAME, b"f4"),
    ]


def test_recording_is_readable_while_written(xobserve, tmp_path):
    path = tmp_path / "live.xtrec"
    proc = subprocess.Popen(
        [str(xobserve), "--families", "sched", "--window-ms", "10", "--duration", "2", "--record", str(path),
         "--shm", f"xt-test-live-{os.getpid()}", "--zmq", f"tcp://127.0.0.1:{free_port()}"],
        stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        while not path.exists() or path.stat().st_size <= FILE_HEADER_SIZE:
            assert proc.poll() is None
            time.sleep(0.01)
        seen = [f.seq for f in RecordingReader(path).frames(follow=True, idle_timeout=1.0)]
    finally:
        proc.wait(30)
    assert proc.returncode == 0
    assert seen == list(range(1, len(seen) + 1)) and len(seen) >= 100
    assert len(payloads(path, RecordType.CATALOG)) == 1  # not repeated every second like on ZeroMQ


def test_bad_recordings_are_refused_with_file_and_offset(tmp_path):
    bogus = tmp_path / "bogus.xtrec"
    bogus.write_bytes(b"not a recording at all, sorry")
    r = subprocess.run(
        [XTUNE, "replay", str(bogus), "--zmq", "tcp://127.0.0.1:1"], capture_output=True, text=True
    )
    assert r.returncode == 2
    assert "bogus.xtrec: not an xtune recording" in r.stderr
    r = subprocess.run([XTUNE, "record", str(bogus), "--shm", "x"], capture_output=True, text=True)
    assert r.returncode == 2 and "not an xtune recording" in r.stderr
    assert bogus.read_bytes() == b"not a recording at all, sorry"
    r = subprocess.run([XTUNE, "replay", str(bogus)], capture_output=True, text=True)
    assert r.returncode == 2 and "--zmq ENDPOINT and/or --shm NAME" in r.stderr


def test_xobserve_refuses_to_append_to_a_foreign_file(xobserve, tmp_path):
    foreign = tmp_path / "notes.txt"
    foreign.write_text("my notes\n")
    r = subprocess.run(
        [str(xobserve), "--families", "sched", "--duration", "0.1", "--record", str(foreign),
         "--shm", f"xt-test-foreign-{os.getpid()}", "--zmq", f"tcp://127.0.0.1:{free_port()}"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 1
    assert "notes.txt is not an xtune recording" in r.stderr
    assert foreign.read_text() == "my notes\n"
    assert not Path(f"/dev/shm/xt-test-foreign-{os.getpid()}").exists()  # the ring it opened is gone


def test_xtune_observe_shows_the_live_signals(start_observer):
    obs = start_observer("--families", "sched,pmu", "--window-ms", "20")
    r = subprocess.run(
        [XTUNE, "observe", "--shm", obs.shm, "--once", "--match", "sched."],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert "sched.switches" in r.stdout and "pmu.page_faults" not in r.stdout
    assert ("pmu: unavailable" in r.stdout) != pmu_available()[0]
    r = subprocess.run(
        [XTUNE, "observe", "--shm", "xt-test-nowhere", "--once"], capture_output=True, text=True
    )
    assert r.returncode == 1 and "no frame ring" in r.stderr
