"""Shared memory and ZeroMQ deliver the same frames; losses are counted, never silent."""

import os
import subprocess
import threading
import time

from xtune.signals.frames import (
    Catalog,
    ShmFrameReader,
    ShmFrameWriter,
    SignalInfo,
    ZmqFrameReader,
    encode_frame,
)


def test_shm_and_zmq_consumers_see_identical_frames(start_observer):
    obs = start_observer("--families", "sched,softirq,syscall,pmu", "--window-ms", "2")
    got: dict[str, list] = {}

    def read(name: str, reader) -> None:
        with reader:
            frames = [reader.poll(5) for _ in range(400)]
            got[name] = [frames, reader.stats]

    threads = [
        threading.Thread(target=read, args=("zmq", ZmqFrameReader(obs.zmq))),
        threading.Thread(target=read, args=("shm", ShmFrameReader(obs.shm))),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for name, (frames, stats) in got.items():
        assert all(frames), f"{name}: a poll timed out"
        seqs = [f.seq for f in frames]
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), f"{name}: not consecutive"
        assert stats.lost == 0 and stats.frames == 400
    zmq = {f.seq: f for f in got["zmq"][0]}
    common = [f for f in got["shm"][0] if f.seq in zmq]
    assert len(common) >= 200
    for f in common:
        assert f.raw == zmq[f.seq].raw
        assert f.values == zmq[f.seq].values
    catalog = got["shm"][0][0]
    assert "sched.runq_latency.p99" in catalog.values


def test_shm_overrun_is_detected_and_counted(start_observer):
    obs = start_observer("--families", "sched", "--window-ms", "1", "--shm-slots", "8")
    with ShmFrameReader(obs.shm) as reader:
        first = reader.poll(5)
        time.sleep(0.2)  # about 200 frames into an 8-slot ring
        after = [reader.poll(5) for _ in range(3)]
        assert reader.stats.overruns >= 1
        assert reader.stats.lost >= 150
        # Resynchronised: what follows is consecutive and newer than what was lost.
        assert after[0].seq > first.seq + 150
        assert [f.seq for f in after] == list(range(after[0].seq, after[0].seq + 3))
        assert reader.stats.lost == after[0].seq - first.seq - 1


def test_shm_reader_skips_to_the_present(start_observer):
    """After a pause, skip_to_latest drops the frames published meanwhile: the next frame read is
    one the producer publishes after the call, not a frame of the past."""
    obs = start_observer("--families", "sched", "--window-ms", "1")
    with ShmFrameReader(obs.shm) as reader:
        first = reader.poll(5)
        time.sleep(0.1)
        dropped = reader.skip_to_latest()
        head = reader.head
        nxt = reader.poll(5)
        assert dropped >= 50
        assert nxt.seq > head >= first.seq + 50
        assert reader.stats.lost == 0  # skipped on purpose, not lost to an overrun


def test_zmq_subscriber_gets_the_catalog_on_joining(start_observer):
    obs = start_observer("--families", "sched", "--window-ms", "1000")
    time.sleep(0.3)
    with ZmqFrameReader(obs.zmq) as reader:
        frame = reader.poll(3)  # the first window closes within 1 s; the catalog came on subscribing
        assert frame is not None and reader.catalog is not None
        assert "sched.switches" in frame.values


def test_shm_reader_follows_a_restarted_producer(start_observer, xobserve):
    first = start_observer("--families", "sched", "--window-ms", "2")
    with ShmFrameReader(first.shm) as reader:
        assert reader.poll(5) is not None
        first.stop()
        left = list(reader.frames(timeout=0.3))  # what it published before it stopped
        assert all(f.seq > 1 for f in left) and not reader.producer_alive()
        again = subprocess.Popen(
            [str(xobserve), "--families", "sched", "--window-ms", "2", "--shm", first.shm, "--zmq", first.zmq]
        )
        try:
            frame = reader.poll(30)
            assert frame is not None and frame.seq < 100  # the new run, from its start
            assert reader.stats.restarts == 1 and reader.producer_alive()
        finally:
            again.terminate()
            again.wait(30)


def test_a_stalled_zmq_subscriber_costs_counted_drops_not_silent_ones(xobserve, tmp_path):
    import zmq

    endpoint = f"ipc://{tmp_path}/signals.sock"  # small socket buffers: a stall shows in seconds
    shm = f"xt-test-stall-{os.getpid()}"
    proc = subprocess.Popen(
        [
            str(xobserve),
            "--families",
            "sched",
            "--window-ms",
            "1",
            "--shm",
            shm,
            "--zmq",
            endpoint,
            "--zmq-hwm",
            "20",
        ]
    )
    stalled = zmq.Context.instance().socket(zmq.SUB)
    try:
        stalled.setsockopt(zmq.RCVHWM, 1)
        stalled.setsockopt(zmq.SUBSCRIBE, b"")
        stalled.connect(endpoint)  # ...and never reads
        deadline = time.monotonic() + 30
        while not os.path.exists(f"/dev/shm/{shm}"):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)
        with ShmFrameReader(shm) as reader:
            frame = reader.poll(5)
            while frame is not None and frame.dropped == 0 and time.monotonic() < deadline:
                frame = reader.poll(5)
            assert frame is not None and frame.dropped > 0  # exported in every frame...
            follow = [reader.poll(5) for _ in range(20)]
            # ...while the ring keeps delivering every frame.
            assert all(follow) and [f.seq for f in follow] == list(range(frame.seq + 1, frame.seq + 21))
    finally:
        stalled.close(linger=0)
        proc.terminate()
        proc.wait(30)


def test_shm_reader_sleeps_until_the_producer_wakes_it():
    """Between frames the reader sleeps in FUTEX_WAIT on the ring's head (no spinning, no naps):
    a frame published a second later is returned, and the reader used almost no CPU meanwhile."""
    catalog = Catalog([SignalInfo(1, "t.x", "n", "gauge", "test")], 1_000_000_000)
    name = f"xt-test-futex-{os.getpid()}"
    writer = ShmFrameWriter(name, catalog.to_json())
    try:
        writer.publish(encode_frame(1, 0, 1_000_000_000, [(1, 0, 1.0)]))
        with ShmFrameReader(name) as reader:
            got: dict[str, object] = {}

            def read() -> None:
                cpu = time.thread_time()
                got["frame"] = reader.poll(10)
                got["cpu"] = time.thread_time() - cpu

            t = threading.Thread(target=read)
            t.start()
            time.sleep(1.0)
            writer.publish(encode_frame(2, 1_000_000_000, 2_000_000_000, [(1, 0, 2.0)]))
            t.join(10)
        frame = got["frame"]
        assert frame is not None and frame.seq == 2 and frame.values == {"t.x": 2.0}  # type: ignore[attr-defined]
        assert got["cpu"] < 0.05, f"the reader used {got['cpu']:.3f} s of CPU waiting for one frame"
    finally:
        writer.close()
