"""Restart: xrtd keeps its registrations over a restart (same state dir), each at its original
after replay; a registration whose target is gone is dropped with an audit line, not a failed start."""

import json
import os
import subprocess

from xtune.knobs.table import KnobError, KnobTable
from xtune.testing.xrtd import sysctl_in

# What a restarted xrtd must give back exactly as registered.
REGISTRATION = ("backend", "target", "netns", "slot", "type", "min", "max", "step", "enum")


def journal_ops(x):
    return [json.loads(r)["op"] for r in x.journal()]


def test_kill9_restart_keeps_registrations_at_their_originals(xrtd, netns):
    ns = f"/run/netns/{netns}"
    keys = ("net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_congestion_control", "net.ipv4.tcp_rmem")
    before = {key: sysctl_in(netns, key) for key in keys}
    c = xrtd.client()
    c.register("fin", "sysctl", "net.ipv4.tcp_fin_timeout", min=5, max=120, netns=ns)
    c.register("gone", "sysctl", "net.core.somaxconn", min=128, max=65535, netns=ns)
    cc = before["net.ipv4.tcp_congestion_control"]
    c.register("cc", "sysctl", "net.ipv4.tcp_congestion_control", enum=["reno", cc], netns=ns)
    c.register("rmem", "sysctl", "net.ipv4.tcp_rmem[1]", min=4096, max=1 << 24, step=4096, netns=ns)
    c.unregister("gone")  # unregistered: stays gone
    registered = {k["name"]: k for k in c.list()}
    c.set("fin", 17)
    c.set("cc", "reno")
    with c.table() as table:
        slot = registered["rmem"]["slot"]
        table.wait_applied(slot, table.write_desired(slot, 65536, ring=True), timeout=10)
    assert {key: sysctl_in(netns, key) for key in keys} != before

    xrtd.kill9()
    xrtd.start()
    c = xrtd.client()
    after = {k["name"]: k for k in c.list()}
    assert set(after) == {"fin", "cc", "rmem"}
    for name, k in after.items():
        assert {f: k[f] for f in REGISTRATION} == {f: registered[name][f] for f in REGISTRATION}, name
        assert k["applied"] == k["original"] == registered[name]["original"], name
        assert (k["armed"], k["kept"], k["state"]) == (False, False, "registered"), name
    assert {key: sysctl_in(netns, key) for key in keys} == before  # replay put the originals back
    assert journal_ops(xrtd) == ["start", "register", "register", "register"]
    audit = xrtd.audit()
    assert "journal replay after a crash" in audit
    assert audit.count("registration-restored via=restart") == 3
    with KnobTable(c.status()["shm"]) as table:  # the same slots in the new table
        assert {name: table.index(name) for name in after} == {n: k["slot"] for n, k in after.items()}

    # The registrations work as before: set, a tuner registering the same knob again gets it back
    # (a different registration under the name is refused), SIGTERM restores.
    c.set("fin", 33)
    assert c.register("fin", "sysctl", "net.ipv4.tcp_fin_timeout", min=5, max=120, netns=ns)["applied"] == 33
    try:
        c.register("fin", "sysctl", "net.ipv4.tcp_fin_timeout", min=5, max=60, netns=ns)
        raise AssertionError("a different registration under the same name was accepted")
    except KnobError as exc:
        assert "already exists with another" in str(exc)
    assert sysctl_in(netns, "net.ipv4.tcp_fin_timeout") == "33"
    assert xrtd.stop() == 0
    assert {key: sysctl_in(netns, key) for key in keys} == before
    xrtd.start()  # after a clean exit too
    assert sorted(k["name"] for k in xrtd.client().list()) == ["cc", "fin", "rmem"]


def test_registration_in_a_deleted_netns_is_dropped(xrtd, netns):
    gone = f"xt-gone-{os.getpid()}-{os.urandom(3).hex()}"
    subprocess.run(["ip", "netns", "add", gone], check=True)
    try:
        c = xrtd.client()
        c.register("stays", "sysctl", "net.core.somaxconn", min=128, max=65535, netns=f"/run/netns/{netns}")
        c.register("lost", "sysctl", "net.core.somaxconn", min=128, max=65535, netns=f"/run/netns/{gone}")
        xrtd.kill9()
    finally:
        subprocess.run(["ip", "netns", "del", gone], check=True)
    xrtd.start()  # starts, without the registration whose target is gone
    assert [k["name"] for k in xrtd.client().list()] == ["stays"]
    dropped = [line for line in xrtd.audit().splitlines() if "knob=lost " in line]
    assert len(dropped) == 1
    assert "registration-dropped via=restart" in dropped[0]
    assert f"/run/netns/{gone}: No such file or directory" in dropped[0]
    assert journal_ops(xrtd) == ["start", "register"]


def test_changed_knob_whose_sysfs_target_vanished_is_dropped(xrtd_factory):
    dev = f"xtr{os.urandom(3).hex()}"
    x = xrtd_factory("--allow", "sysfs:/sys/class/net/xtr*/tx_queue_len")
    subprocess.run(["ip", "link", "add", dev, "type", "veth", "peer", "name", f"{dev}p"], check=True)
    try:
        c = x.client()
        c.register("txq", "sysfs", f"/sys/class/net/{dev}/tx_queue_len", min=1, max=100000)
        c.set("txq", 4321)
        x.kill9()
    finally:
        subprocess.run(["ip", "link", "del", dev], check=True)
    x.start()
    assert x.client().list() == []
    lines = [line for line in x.audit().splitlines() if "knob=txq " in line]
    assert "restore-failed via=replay" in lines[-2]
    assert "registration-dropped via=restart" in lines[-1]
    assert "its original could not be put back" in lines[-1] and "No such file or directory" in lines[-1]
    assert journal_ops(x) == ["start"]
