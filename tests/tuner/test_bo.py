"""BO on a real workload in network namespaces improves its objective within its budget."""

from __future__ import annotations

from pathlib import Path

from conftest import HERE, Lab
from xtune.config import load
from xtune.knobs.actuator import Actuator
from xtune.policies import make_policy
from xtune.signals.frames import ShmFrameReader
from xtune.trials.store import Store
from xtune.tuning.loop import Runner
from xtune.tuning.metrics import Metrics
from xtune.tuning.workload import Workload


def test_bo_improves_p99_rtt_and_keeps_throughput(lab: Lab, tmp_path: Path) -> None:
    slo = load(HERE / "slo_good/bufferbloat-bo.yaml", lab.variables())
    store = Store(f"sqlite:///{tmp_path / 'trials.db'}")
    actuator = Actuator(lab.svc.xrtd_socket, slo.knobs)
    reader = ShmFrameReader(slo.signals.shm)
    assert slo.workload is not None
    # The host's own limits, as a fresh namespace inherits them: what the tuner must find and restore.
    rcv_max = int(lab.net.sysctl(lab.net.receiver, "net.ipv4.tcp_rmem").split()[2])
    snd_max = int(lab.net.sysctl(lab.net.sender, "net.ipv4.tcp_wmem").split()[2])
    runner = Runner(slo, actuator, reader, store, Metrics(slo.name), Workload(slo.workload))
    try:
        result = runner.run(lambda bounds: make_policy(slo, bounds))
    finally:
        runner.close()
        reader.close()
    assert result.original == {"rcv_buf_max": rcv_max, "snd_buf_max": snd_max}
    assert len(result.trials) == slo.policy.budget
    assert result.best is not None and result.after is not None
    assert result.after.objective < 0.7 * result.before.objective, (result.before, result.after)
    throughput_before, throughput_after = result.before.slo[0][0], result.after.slo[0][0]
    assert throughput_after >= 0.9 * throughput_before
    stored = store.trials(result.experiment_id)
    assert [t.params for t in stored] == [t.params for t in result.trials]
    # on_exit: restore (the default): the receiver's limit is back at the original.
    assert int(lab.net.sysctl(lab.net.receiver, "net.ipv4.tcp_rmem").split()[2]) == rcv_max
