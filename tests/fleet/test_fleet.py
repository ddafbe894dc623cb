"""Several hosts, each a network namespace with its own xrtd and xrtd-bridge, reached over TCP with
CURVE: refusals, a host lost mid-trial, a coordinator killed with SIGKILL, and a host whose daemons
run from the agent image."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import zmq
from xtune import paths
from xtune.config import load, load_hosts
from xtune.hosts.bridge import BridgeClient
from xtune.hosts.coordinator import run_fleet
from xtune.knobs.table import KnobError
from xtune.signals.curve import ClientKeys
from xtune.signals.frames import ZmqFrameReader
from xtune.testing.fleet import SimulatedFleet
from xtune.testing.images import podman
from xtune.trials.store import Store, StoredTrial
from xtune.tuning.metrics import Metrics

pytestmark = pytest.mark.root
SLO = paths.ROOT / "experiments/fleet/sysctl-score.yaml"
SOMAXCONN = "net.core.somaxconn"


@pytest.fixture
def fleet(tmp_path: Path, bin_dir: Path) -> Iterator[Callable[..., SimulatedFleet]]:
    made: list[SimulatedFleet] = []

    def make(n: int, images: dict[str, str] | None = None) -> SimulatedFleet:
        f = SimulatedFleet(tmp_path, n, images)
        made.append(f)
        return f.__enter__()

    yield make
    for f in made:
        f.close()


def until(what: str, check: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout:g} s: {what}"
        time.sleep(0.05)


def test_a_key_not_authorized_is_refused_and_changes_nothing(fleet, tmp_path: Path) -> None:
    host = fleet(1).hosts[0]
    before = host.sysctl(SOMAXCONN)
    public, secret = zmq.curve_keypair()
    stranger = ClientKeys(secret=secret, public=public, server=host.client_keys().server)
    with pytest.raises(KnobError, match="not in the publisher's authorized_clients"):
        BridgeClient(host.bridge, stranger, timeout=5, client="stranger")
    with pytest.raises(KnobError, match="no reply|failed 3 times"):  # the host's own key, wrong server key
        keys = host.client_keys()
        BridgeClient(host.bridge, ClientKeys(keys.secret, keys.public, public), timeout=3, client="x")
    assert "refused ZeroMQ client" in (host.dir / "xrtd-bridge.log").read_text()
    with BridgeClient(host.bridge, host.client_keys()) as own:
        assert own.list() == []  # nothing was registered
    assert host.sysctl(SOMAXCONN) == before


def test_the_bridge_refuses_to_serve_without_curve(fleet, tmp_path: Path) -> None:
    host = fleet(1).hosts[0]
    bridge = str(paths.binary("xrtd-bridge"))
    no_keys = subprocess.run([bridge, "--xrtd-socket", host.socket], capture_output=True, text=True)
    assert no_keys.returncode == 2 and "--keys DIR is required" in no_keys.stderr
    empty = tmp_path / "empty-keys"
    empty.mkdir()
    missing = subprocess.run(
        [bridge, "--xrtd-socket", host.socket, "--keys", str(empty), "--endpoint", "tcp://127.0.0.1:7299"],
        capture_output=True,
        text=True,
    )
    assert missing.returncode == 1 and "server.key" in missing.stderr
    authorized = host.keys_dir / "authorized_clients"
    for mode, why in ((0o620, "mode 0620 is writable by group or others"), (0o600, None)):
        authorized.chmod(mode)
        argv = [bridge, "--xrtd-socket", host.socket, "--keys", str(host.keys_dir), "--endpoint", "tcp://x:1"]
        run = subprocess.run(argv, capture_output=True, text=True)
        if why:  # refused before anything is served
            assert run.returncode == 1 and f"{authorized}: {why}" in run.stderr
        else:  # past the check: the bad endpoint is what fails now
            assert run.returncode == 1 and "writable" not in run.stderr and "cannot serve" in run.stderr
    os.chown(host.keys_dir, 65534, -1)
    try:
        argv = [bridge, "--xrtd-socket", host.socket, "--keys", str(host.keys_dir)]
        run = subprocess.run(argv, capture_output=True, text=True)
        assert run.returncode == 1 and f"{host.keys_dir}: owned by uid 65534" in run.stderr
    finally:
        os.chown(host.keys_dir, 0, -1)


def lose_h2_mid_trial(
    f: SimulatedFleet, tmp_path: Path, budget: int, lose: Callable[[], None]
) -> list[StoredTrial]:
    """Run `budget` trials over the two hosts of `f` and, once h2's first trial has applied its values
    and is measuring (before the trial is stored), `lose` h2. That trial alone fails, naming the host,
    h2 ends with an error and h1 runs the rest of the budget; the run's trials are returned."""
    slo = load(SLO, {"MEASURE_S": "1", "BUDGET": str(budget)})
    store = Store(f"sqlite:///{tmp_path}/trials.db")
    lost: list[int] = []

    def progress(host: str, event: str, data: dict) -> None:
        if host == "h2" and event == "window" and data["phase"] == "measure" and not lost:
            lost.append(data["trial"])
            lose()

    result = run_fleet(slo, load_hosts(f.hosts_file), store, Metrics(slo.name), progress)
    by_host = {r.host.name: r for r in result.hosts}
    assert by_host["h2"].error is not None and "host h2" in by_host["h2"].error
    assert by_host["h1"].error is None
    trials = store.trials(result.experiment_id)
    failed = [t for t in trials if t.status == "failed"]
    assert [t.index for t in failed] == lost and "host h2" in failed[0].metrics["error"]
    assert sum(t.status == "completed" for t in trials) == budget - 1  # the rest of the budget, on h1
    return trials


def test_a_host_killed_mid_trial_fails_that_trial_and_the_others_go_on(fleet, tmp_path: Path) -> None:
    f = fleet(2)
    h1, h2 = f.hosts
    original = h2.sysctl(SOMAXCONN)
    trials = lose_h2_mid_trial(f, tmp_path, 5, h2.kill)
    assert all(t.policy == "bo@h1" for t in trials if t.status == "completed")
    assert h1.sysctl(SOMAXCONN) == original  # restored at the end of the run
    h2.start()  # xrtd's journal replay on the next start puts back whatever the dead one changed
    assert h2.sysctl(SOMAXCONN) == original


def test_a_partitioned_host_restores_its_knobs_and_the_others_go_on(fleet, tmp_path: Path) -> None:
    f = fleet(2)
    h2 = f.hosts[1]
    original = h2.sysctl(SOMAXCONN)
    during: list[str] = []

    def cut() -> None:  # h2's link goes dark, both ways
        during.append(h2.sysctl(SOMAXCONN))
        h2.partition()

    lose_h2_mid_trial(f, tmp_path, 4, cut)
    assert during[0] != original  # the trial's own value was in place when the link went dark
    # Nothing reached h2 since the cut, yet its own xrtd put its value back when the lease ran out.
    until("h2 restored", lambda: h2.sysctl(SOMAXCONN) == original, timeout=10)
    assert "lease expired" in (h2.dir / "state" / "audit.log").read_text()
    until(
        "h2's bridge dropping its silent client",
        lambda: "silent past the heartbeat" in (h2.dir / "xrtd-bridge.log").read_text(),
        timeout=10,
    )
    h2.heal()
    with BridgeClient(h2.bridge, h2.client_keys(), timeout=5) as again:  # the link is what failed
        assert sorted(k["name"] for k in again.list()) == ["fin_timeout", "somaxconn"]
    assert h2.sysctl(SOMAXCONN) == original


def coordinator(
    f: SimulatedFleet, db: str, budget: int, *extra: str, measure_s: int = 1, output: int = subprocess.PIPE
) -> subprocess.Popen[bytes]:
    """`xtune run` of the fleet's SLO over the hosts of `f`, its output (stdout and stderr) to `output`."""
    return subprocess.Popen(
        [
            str(paths.ROOT / ".venv/bin/xtune"), "run", str(SLO), "--hosts", str(f.hosts_file), "--db", db,
            "--metrics-addr", "127.0.0.1:0", "--var", f"MEASURE_S={measure_s}", "--var", f"BUDGET={budget}",
            *extra,
        ],
        stdout=output,
        stderr=subprocess.STDOUT,
    )  # fmt: skip


def test_a_coordinator_killed_leaves_every_host_restored_within_its_lease(fleet, tmp_path: Path) -> None:
    f = fleet(2)
    original = [(h.sysctl(SOMAXCONN), h.sysctl("net.ipv4.tcp_fin_timeout")) for h in f.hosts]
    run = coordinator(f, f"sqlite:///{tmp_path}/trials.db", 40, measure_s=2, output=subprocess.DEVNULL)
    try:
        # Both hosts in a trial: each has values that are not its own.
        until(
            "a trial on every host",
            lambda: all(h.sysctl(SOMAXCONN) != o[0] for h, o in zip(f.hosts, original, strict=True)),
            90,
        )
    finally:
        os.kill(run.pid, signal.SIGKILL)
        run.wait()
    for host, (somaxconn, fin_timeout) in zip(f.hosts, original, strict=True):
        until(f"{host.name} restored", lambda h=host, v=somaxconn: h.sysctl(SOMAXCONN) == v, timeout=10)
        assert host.sysctl("net.ipv4.tcp_fin_timeout") == fin_timeout
        assert "lease expired" in (host.dir / "state" / "audit.log").read_text()


def test_a_killed_coordinator_resumed_ends_with_the_full_budget(fleet, store_url: str) -> None:
    f = fleet(2)
    original = [h.sysctl(SOMAXCONN) for h in f.hosts]
    db, budget = store_url, 7
    first = coordinator(f, db, budget)
    store = Store(db)
    try:
        until("3 trials stored", lambda: len(store.trials()) >= 3, 120)
    finally:
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
    (run,) = store.experiments()
    before = store.trials(run.id)
    assert run.policy_state is not None and len(before) < budget
    for host, somaxconn in zip(f.hosts, original, strict=True):
        until(f"{host.name} restored", lambda h=host, v=somaxconn: h.sysctl(SOMAXCONN) == v, timeout=10)
    resumed = coordinator(f, db, budget, "--resume", str(run.id))
    out, _ = resumed.communicate(timeout=180)
    assert resumed.returncode == 0, out.decode()
    attached = sum(t.status == "completed" for t in before)
    assert f"resumed run {run.id}: {attached} stored trials given to the policy as data" in out.decode()
    after = store.trials(run.id)
    assert after[: len(before)] == before  # nothing stored before was lost or changed
    assert len(after) == budget and all(t.status == "completed" for t in after)
    assert len({t.index for t in after}) == budget  # no index twice
    assert min(t.index for t in after[len(before) :]) > max(t.index for t in before)
    measured = [t.params for t in before]
    assert not [t.params for t in after[len(before) :] if t.params in measured], [t.params for t in after]
    assert len(store.experiments()) == 1  # continued, not a second run
    ended = store.experiment(run.id)  # the best is chosen among the trials of both coordinators
    assert ended is not None and ended.result is not None
    assert ended.result["best"] == max(after, key=lambda t: t.objective or -math.inf).params
    assert [h.sysctl(SOMAXCONN) for h in f.hosts] == original
    again = coordinator(f, db, budget, "--resume", str(run.id))
    out, _ = again.communicate(timeout=60)
    assert again.returncode == 1 and f"cannot resume run {run.id}: it ended" in out.decode()


def test_a_host_running_the_agent_image_is_tuned_and_restored(
    fleet, agent_image: str, tmp_path: Path
) -> None:
    f = fleet(2, {"h2": agent_image})
    h2 = f.hosts[1]
    signals = ZmqFrameReader(h2.observe("--families", "sched", "--window-ms", "10"), curve=h2.client_keys())
    try:  # h2's xobserve publishes over CURVE/TCP from its namespace, as a machine's would
        frame = signals.poll(30)
    finally:
        signals.close()
    assert frame is not None and frame.values["sched.switches"] > 0
    for daemon in ("xobserve", "xrtd", "xrtd-bridge"):  # h2's daemons are the image's, in h2's namespace
        image, pid = podman(
            "inspect", "--format", "{{.Image}} {{.State.Pid}}", h2.container(daemon)
        ).stdout.split()
        assert image == agent_image.removeprefix("sha256:")
        assert os.stat(f"/proc/{pid}/ns/net").st_ino == os.stat(f"/run/netns/{h2.netns}").st_ino
    knobs = (SOMAXCONN, "net.ipv4.tcp_fin_timeout")
    original = [{key: h.sysctl(key) for key in knobs} for h in f.hosts]
    db = f"sqlite:///{tmp_path}/trials.db"
    run = coordinator(f, db, 4)
    seen: list[str] = []  # somaxconn in h2's namespace while a trial runs there

    def h2_in_a_trial() -> bool:
        value = h2.sysctl(SOMAXCONN)
        if value != original[1][SOMAXCONN]:
            seen.append(value)
        return bool(seen) or run.poll() is not None

    try:
        until("h2 in a trial", h2_in_a_trial, 60)
        out, _ = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 0, out.decode()
    on_h2 = [t for t in Store(db).trials() if t.policy == "bo@h2"]
    assert on_h2 and all(t.status == "completed" for t in on_h2), on_h2
    assert seen and int(seen[0]) in {int(t.params["somaxconn"]) for t in on_h2}
    audit = (h2.dir / "state" / "audit.log").read_text()  # written by the xrtd of the image
    assert f"target={SOMAXCONN} " in audit and f"-> {seen[0]} applied" in audit
    assert f"-> {original[1][SOMAXCONN]} restored" in audit
    assert [{key: h.sysctl(key) for key in knobs} for h in f.hosts] == original  # restored at the end


OWN_A_FLEET = """
import sys, time
from pathlib import Path
from xtune.testing.fleet import SimulatedFleet
from xtune.testing.postgres import Cluster
with SimulatedFleet(Path(sys.argv[1]), 1) as f:
    print(f.hosts[0].netns, f.hosts[0].xrtd.pid, f.hosts[0].bridge_proc.pid, flush=True)
    time.sleep(600)
"""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_fleet_owner_ended_by_a_signal_leaves_no_namespace_or_daemon(
    tmp_path: Path, bin_dir, signum
) -> None:
    owner = subprocess.Popen(
        [str(paths.ROOT / ".venv/bin/python"), "-c", OWN_A_FLEET, str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert owner.stdout is not None
    name, *pids = owner.stdout.readline().split()
    owner.send_signal(signum)
    assert owner.wait(timeout=60) == -signum  # it still dies of the signal
    assert name not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()
