"""The agent image on this host: xrtd in a container tunes the sysctls of the container's network
namespace through a control socket mounted from the host, and its journal restores them after the
container is killed; xobserve in a container publishes frames the host reads."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from xtune.knobs.table import KnobClient, KnobTable
from xtune.signals.frames import ShmFrameReader
from xtune.testing.observe import bpf_ids_alive, bpf_ids_of
from xtune.testing.xrtd import sysctl_in

KNOBS = [  # name, sysctl (a field of it in brackets), min, max
    ("somaxconn", "net.core.somaxconn", 128, 65535),
    ("rmem_default", "net.ipv4.tcp_rmem[1]", 4096, 1 << 24),
]


def read_knobs(netns: str) -> dict[str, int]:
    values = {}
    for name, key, _, _ in KNOBS:
        text = sysctl_in(netns, key.split("[")[0])
        field = int(key[-2]) if key.endswith("]") else 0
        values[name] = int(text.split()[field])
    return values


def wait_for(path: Path, what: str, logs) -> None:
    deadline = time.monotonic() + 30
    while not path.exists():
        assert time.monotonic() < deadline, f"{what} did not appear within 30 s: {logs()}"
        time.sleep(0.05)


def test_xrtd_in_container_tunes_its_netns_and_the_journal_restores_after_kill(
    agent_image, containers, netns, shm_name, tmp_path
):
    run_dir, state = tmp_path / "run", tmp_path / "state"
    run_dir.mkdir()
    state.mkdir()
    socket = run_dir / "xrtd.sock"
    shm = shm_name("xtknobs-test")

    def start_xrtd() -> str:
        name = containers.run(
            "--privileged",
            "--network", f"ns:/run/netns/{netns}",
            "--volume", f"{run_dir}:/run/xtune",
            "--volume", f"{state}:/var/lib/xtune",
            "--volume", "/dev/shm:/dev/shm",
            agent_image,
            "xrtd", "--socket", "/run/xtune/xrtd.sock", "--state-dir", "/var/lib/xtune", "--shm", shm,
        )  # fmt: skip
        wait_for(socket, "xrtd's socket", lambda: containers.logs(name))
        return name

    defaults = read_knobs(netns)
    first = start_xrtd()
    # The container's network namespace is the test's, not the host's.
    container_ns = os.stat(f"/proc/{containers.pid(first)}/ns/net").st_ino
    assert container_ns == os.stat(f"/run/netns/{netns}").st_ino != os.stat("/proc/self/ns/net").st_ino

    changed = {name: value // 2 if value // 2 >= lo else value * 2 for (name, _, lo, _), value in
               zip(KNOBS, defaults.values(), strict=True)}  # fmt: skip
    with KnobClient(socket) as client:
        for name, key, lo, hi in KNOBS:
            knob = client.register(name, "sysctl", key, min=lo, max=hi)
            assert knob["original"] == defaults[name]
            assert client.set(name, changed[name], reason="agent image test")["applied"] == changed[name]
        assert read_knobs(netns) == changed
        # The knob table in the host's /dev/shm is the container's: a write there is applied too.
        slot = client.get("somaxconn")["slot"]
        with KnobTable(shm) as table:
            gen = table.write_desired(slot, changed["somaxconn"] + 1, ring=True)
            assert table.wait_applied(slot, gen, timeout=10).applied == changed["somaxconn"] + 1
    changed["somaxconn"] += 1
    assert read_knobs(netns) == changed

    assert containers.kill(first) == 137  # SIGKILL: xrtd restored nothing
    assert read_knobs(netns) == changed
    journal = [json.loads(line) for line in (state / "journal").read_text().splitlines()]
    assert {r["op"] for r in journal} >= {"arm", "set"}

    socket.unlink()  # the killed xrtd's; the next one makes its own
    second = start_xrtd()  # replays the journal before it opens its socket
    assert read_knobs(netns) == defaults
    assert "journal replay after a crash" in (state / "audit.log").read_text()
    assert containers.stop(second) == 0
    # The fresh journal holds only the registrations, which the restarted xrtd kept.
    ops = [json.loads(line)["op"] for line in (state / "journal").read_text().splitlines()]
    assert ops == ["start"] + ["register"] * len(KNOBS)


def test_xobserve_in_container_publishes_frames_to_the_host(agent_image, containers, shm_name):
    ring = shm_name("xt-test-obs")
    name = containers.run(
        "--privileged",
        "--pid", "host",  # the ring names its producer by PID; readers check it is alive
        "--network", "none",
        "--volume", "/sys/fs/bpf:/sys/fs/bpf",
        "--volume", "/sys/kernel/tracing:/sys/kernel/tracing",
        "--volume", "/dev/shm:/dev/shm",
        agent_image,
        "xobserve", "--shm", ring, "--families", "sched,softirq", "--window-ms", "10",
    )  # fmt: skip
    wait_for(Path(f"/dev/shm/{ring}"), "xobserve's ring", lambda: containers.logs(name))
    pid = containers.pid(name)
    with ShmFrameReader(ring) as reader:
        frame = reader.poll(10)
        assert frame is not None, f"no frame within 10 s: {containers.logs(name)}"
        assert reader.producer_pid == pid and reader.producer_alive()
    assert frame.window_ns > 0 and frame.values["sched.switches"] > 0
    assert "softirq.net_rx.count" in frame.values
    held = bpf_ids_of(pid)
    assert held, "xobserve holds no BPF program or link"
    assert containers.stop(name) == 0
    assert bpf_ids_alive(held) == set()
