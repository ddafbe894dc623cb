"""The guard rolls a harmful value back within its promised windows, and records it."""

from __future__ import annotations

from pathlib import Path

from conftest import Lab
from xtune.config import load_text
from xtune.config.expr import parse_slo
from xtune.config.schema import Guard as GuardConfig
from xtune.knobs.actuator import Actuator
from xtune.policies import make_policy
from xtune.signals.frames import ShmFrameReader
from xtune.trials.store import Store
from xtune.tuning.guard import ChangeWatch, Guard
from xtune.tuning.loop import Runner
from xtune.tuning.metrics import Metrics
from xtune.tuning.workload import Workload

HARMFUL = """
name: guard-harmful
objective: {minimize: p99(tcp.srtt)}
slo: ["p99(tcp.srtt) <= 2 * baseline"]
knobs:
  - {name: rcv_buf_max, backend: sysctl, target: "net.ipv4.tcp_rmem[2]", netns: "${RECEIVER_NETNS}",
     range: [8192, 33554432], default: 65536}
  - {name: snd_buf_max, backend: sysctl, target: "net.ipv4.tcp_wmem[2]", netns: "${SENDER_NETNS}",
     range: [8192, 33554432], default: 65536}
policy:
  kind: static
  profile: {rcv_buf_max: 33554432, snd_buf_max: 33554432}
  window_ms: 500
  settle_ms: 1000
  windows: 6
  baseline_windows: 4
guard: {watch_windows: 3, violations: 2}
signals: {shm: "${SHM}"}
workload:
  command: ["${BULK}", --server-netns, "${RECEIVER_NETNS}", --client-netns, "${SENDER_NETNS}",
            --addr, "${RECEIVER_ADDR}"]
  restart_on_change: true
"""


def test_guard_rolls_back_bufferbloat(lab: Lab, tmp_path: Path) -> None:
    slo = load_text(HARMFUL, "harmful.yaml", lab.variables())
    store = Store(f"sqlite:///{tmp_path / 'trials.db'}")
    actuator = Actuator(lab.svc.xrtd_socket, slo.knobs)
    reader = ShmFrameReader(slo.signals.shm)
    assert slo.workload is not None
    metrics = Metrics(slo.name)
    runner = Runner(slo, actuator, reader, store, metrics, Workload(slo.workload))
    try:
        result = runner.run(lambda bounds: make_policy(slo, bounds))
        (trial,) = result.trials
        assert trial.rolled_back and not trial.feasible, (runner.guard.baseline, trial.summary)
        assert trial.windows_to_rollback is not None and trial.windows_to_rollback <= slo.guard.watch_windows
        # Back at the last good values, in the kernel of each namespace, while xrtd still runs.
        assert actuator.current == {"rcv_buf_max": 65536, "snd_buf_max": 65536}
        assert lab.net.sysctl(lab.net.receiver, "net.ipv4.tcp_rmem").split()[2] == "65536"
        assert lab.net.sysctl(lab.net.sender, "net.ipv4.tcp_wmem").split()[2] == "65536"
    finally:
        runner.close()
        reader.close()
    (rollback,) = store.rollbacks(result.experiment_id)
    assert rollback.bad == {"rcv_buf_max": 33554432, "snd_buf_max": 33554432}
    assert rollback.restored == {"rcv_buf_max": 65536, "snd_buf_max": 65536}
    assert "p99(tcp.srtt) <= 2 * baseline" in rollback.reason
    (stored,) = store.trials(result.experiment_id)
    assert stored.status == "infeasible"
    assert result.best is None  # nothing feasible to keep
    assert metrics.rollbacks.labels(slo.name)._value.get() == 1
    # The knob gauges say what the host holds after the rollback, not the values rolled back.
    for knob in ("rcv_buf_max", "snd_buf_max"):
        assert metrics.knob_applied.labels(slo.name, knob)._value.get() == 65536


def test_guard_logic_noise_and_count() -> None:
    """Unit: slack from the baseline's noise; `violations` bad windows trip; a good one resets."""
    guard = Guard(
        [parse_slo("lat <= 1.5 * baseline")], GuardConfig(watch_windows=3, violations=2, tolerance=3)
    )
    guard.set_baseline([{"lat": v} for v in (10.0, 12.0, 10.0, 12.0, 90.0)])  # one stray window
    (base,) = guard.baseline
    assert base.median == 12.0 and base.bound == 18.0 and abs(base.slack - 3 * 1.4826 * 2) < 1e-9
    guard.watch()
    assert guard.observe({"lat": 19.0}) is None  # within bound + slack
    assert guard.observe({"lat": 30.0}) is None  # first bad window
    tripped = guard.observe({"lat": 31.0})
    assert tripped and tripped[0].value == 31.0
    assert guard.observe({"other": 1.0}) is None  # a window without the signal is not judged


def test_a_tree_change_that_held_through_its_watch_becomes_the_last_good_values() -> None:
    """Unit, tree mode: each change is watched like a trial; once it held for the whole watch it is
    where a later breach rolls back to, and a change that breaks the SLO during its watch is not."""
    guard = Guard([parse_slo("lat <= 2 * baseline")], GuardConfig(watch_windows=3, violations=2))
    guard.set_baseline([{"lat": 10.0}] * 5)
    watch = ChangeWatch(guard, {"batch": 64})
    ok, bad = {"lat": 10.0}, {"lat": 100.0}
    assert watch.observe({"batch": 64}, ok) == ("", [])  # the baseline's values are good already
    seen = [watch.observe({"batch": 16}, ok)[0] for _ in range(4)]
    assert seen == ["", "", "good", ""]  # good once, the window its watch ends
    assert watch.observe({"batch": 8}, ok)[0] == ""
    kind, violations = watch.observe({"batch": 8}, bad)
    assert kind == "" and not violations  # one bad window of the two that trip
    kind, violations = watch.observe({"batch": 8}, bad)
    assert kind == "trip" and violations[0].value == 100.0 and not watch.settled
    # Rolled back to 16: watched again as a change, and good again once it holds.
    assert [watch.observe({"batch": 16}, ok)[0] for _ in range(3)] == ["", "", "good"]
