"""ZeroMQ with CURVE: the right keys get the ring's frames, wrong ones get nothing and the reason;
private secret keys, and frames in clear only on loopback unless asked."""

import dataclasses
import subprocess
from pathlib import Path

import pytest
import zmq
from xtune import paths
from xtune.host.services import free_port
from xtune.signals.curve import ClientKeys, CurveError
from xtune.signals.frames import ShmFrameReader, ZmqFrameReader

XTUNE = str(paths.ROOT / ".venv" / "bin" / "xtune")
KEY_FILES = ["authorized_clients", "client.key", "client.pub", "server.key", "server.pub"]


def keygen(xobserve: Path, directory: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(xobserve), "--zmq-keygen", str(directory)], capture_output=True, text=True, timeout=30
    )


@pytest.fixture
def keys(xobserve, tmp_path) -> Path:
    d = tmp_path / "keys"
    assert keygen(xobserve, d).returncode == 0
    return d


def test_keygen_writes_private_z85_keys_once(xobserve, tmp_path):
    d = tmp_path / "state" / "keys"
    d.parent.mkdir()
    first = keygen(xobserve, d)
    assert first.returncode == 0, first.stderr
    assert sorted(p.name for p in d.iterdir()) == KEY_FILES
    assert d.stat().st_mode & 0o777 == 0o700
    for p in d.iterdir():
        assert p.stat().st_mode & 0o777 == 0o600, p
    before = {p.name: p.read_text() for p in d.iterdir()}
    again = keygen(xobserve, d)
    assert again.returncode == 0 and "kept" in again.stdout and "created" not in again.stdout
    assert {p.name: p.read_text() for p in d.iterdir()} == before
    client = ClientKeys.load(d)
    assert zmq.curve_public(client.secret) == client.public
    assert before["authorized_clients"].split() == [client.public.decode(), "client"]


def test_right_keys_get_the_rings_frames(start_observer, keys):
    obs = start_observer("--families", "sched", "--window-ms", "2", "--zmq-curve", str(keys))
    with ZmqFrameReader(obs.zmq, curve=ClientKeys.load(keys)) as reader:
        frames = [reader.poll(5) for _ in range(100)]
        assert all(frames) and reader.stats.lost == 0
    zmq_raw = {f.seq: f.raw for f in frames if f is not None}
    # The ring still holds those frames (1024 slots of 2 ms): read it from its oldest.
    shm_raw = {}
    with ShmFrameReader(obs.shm, from_start=True) as reader:
        while max(shm_raw, default=0) < max(zmq_raw):
            f = reader.poll(5)
            assert f is not None
            shm_raw[f.seq] = f.raw
    assert {seq: shm_raw.get(seq) for seq in zmq_raw} == zmq_raw


def test_wrong_keys_get_no_frame_and_the_reason(start_observer, keys, xobserve, tmp_path):
    obs = start_observer("--families", "sched", "--window-ms", "2", "--zmq-curve", str(keys))
    right = ClientKeys.load(keys)
    stranger = tmp_path / "stranger"
    assert keygen(xobserve, stranger).returncode == 0
    wrong_client = dataclasses.replace(ClientKeys.load(stranger), server=right.server)
    with ZmqFrameReader(obs.zmq, curve=wrong_client) as reader:
        with pytest.raises(CurveError, match="is not in the publisher's authorized_clients"):
            reader.poll(5)
        assert reader.stats.frames == 0
    assert f"CURVE key {wrong_client.public.decode()} is not in authorized_clients" in obs.errors()

    with ZmqFrameReader(obs.zmq, curve=dataclasses.replace(right, server=wrong_client.public)) as reader:
        with pytest.raises(CurveError, match="server.pub does not match"):
            reader.poll(5)
    # A subscriber in clear is not let in either; the publisher still serves the right key.
    with ZmqFrameReader(obs.zmq) as reader:
        assert reader.poll(0.5) is None
    with ZmqFrameReader(obs.zmq, curve=right) as reader:
        assert reader.poll(5) is not None


def test_curve_subscriber_to_a_publisher_in_clear_is_told(start_observer, keys):
    obs = start_observer("--families", "sched", "--window-ms", "2")
    with ZmqFrameReader(obs.zmq, curve=ClientKeys.load(keys)) as reader:
        with pytest.raises(CurveError, match="without --zmq-curve"):
            reader.poll(5)


def test_readable_secret_keys_are_refused(xobserve, keys):
    (keys / "server.key").chmod(0o640)
    r = subprocess.run(
        [str(xobserve), "--families", "sched", "--shm", "xt-test-curve-refused"]
        + ["--zmq", f"tcp://127.0.0.1:{free_port()}", "--zmq-curve", str(keys)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 1
    assert f"{keys}/server.key: secret key readable by group or others (mode 0640)" in r.stderr
    assert not Path("/dev/shm/xt-test-curve-refused").exists()
    (keys / "client.key").chmod(0o604)
    with pytest.raises(CurveError, match="client.key: secret key readable by group or others"):
        ClientKeys.load(keys)


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.1", "*", "[::]"])
def test_non_loopback_in_clear_is_refused(xobserve, host):
    r = subprocess.run(
        [str(xobserve), "--zmq", f"tcp://{host}:{free_port()}", "--duration", "0.1"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 2
    assert "is not a loopback address: give --zmq-curve DIR" in r.stderr
    assert "--zmq-insecure" in r.stderr


def test_xtune_observe_with_curve(start_observer, keys, xobserve, tmp_path):
    obs = start_observer("--families", "sched", "--window-ms", "2", "--zmq-curve", str(keys))
    stranger = tmp_path / "stranger"
    assert keygen(xobserve, stranger).returncode == 0
    (stranger / "server.pub").write_text((keys / "server.pub").read_text())

    def observe(curve: Path) -> subprocess.CompletedProcess[str]:
        cmd = [XTUNE, "observe", "--zmq", obs.zmq, "--zmq-curve", str(curve), "--once", "--match", "sched."]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30)

    ok = observe(keys)
    assert ok.returncode == 0, ok.stderr
    assert "sched.switches" in ok.stdout
    refused = observe(stranger)
    assert refused.returncode == 1
    assert "refused this subscriber's CURVE key" in refused.stderr
    assert "Traceback" not in refused.stderr
