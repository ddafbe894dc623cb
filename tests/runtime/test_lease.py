"""Lease: a tuner that stops heartbeating has its values reverted within the lease time."""

import time

from xtune.knobs.table import KnobClient
from xtune.testing.xrtd import sysctl_in

LEASE_MS = 200


def wait_for(pred, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return time.monotonic()
        time.sleep(0.005)
    return None


def test_expiry_restores_originals(xrtd_factory, netns):
    x = xrtd_factory("--lease-action", "original")
    c = x.client()
    before = sysctl_in(netns, "net.core.somaxconn")
    c.register("somaxconn", "sysctl", "net.core.somaxconn", min=128, max=65535, netns=f"/run/netns/{netns}")
    c.start_lease(period=0.05, lease_ms=LEASE_MS)
    c.set("somaxconn", 3000, reason="lease test")
    time.sleep(3 * LEASE_MS / 1000)  # heartbeats keep it
    assert sysctl_in(netns, "net.core.somaxconn") == "3000"
    assert c.status()["lease"]["held"]

    c.stop_lease(release=False)  # the tuner hangs: no more heartbeats
    stopped = time.monotonic()
    restored = wait_for(lambda: sysctl_in(netns, "net.core.somaxconn") == before, timeout=5)
    assert restored is not None, "value not reverted after the lease expired"
    # Reverted once the lease ran out: not before the last heartbeat's deadline, well within 1 s after.
    assert restored - stopped < LEASE_MS / 1000 + 1.0
    st = c.status()
    assert st["lease"]["expiries"] == 1 and not st["lease"]["held"]
    assert "lease expired" in x.audit()
    assert c.get("somaxconn")["state"] == "rolled_back"


def test_expiry_restores_last_known_good(xrtd, netns):
    c = xrtd.client()
    c.register("somaxconn", "sysctl", "net.core.somaxconn", min=128, max=65535, netns=f"/run/netns/{netns}")
    c.heartbeat(lease_ms=LEASE_MS)
    c.set("somaxconn", 1500)
    c.good(["somaxconn"])
    c.set("somaxconn", 2500)  # the tuner tries something, then dies
    assert wait_for(lambda: sysctl_in(netns, "net.core.somaxconn") == "1500", timeout=5) is not None
    assert c.get("somaxconn")["applied"] == 1500


def test_release_ends_lease_without_revert(xrtd, netns):
    c = xrtd.client()
    c.register("somaxconn", "sysctl", "net.core.somaxconn", min=128, max=65535, netns=f"/run/netns/{netns}")
    c.heartbeat(lease_ms=LEASE_MS)
    c.set("somaxconn", 1600)
    c.release()
    time.sleep(2 * LEASE_MS / 1000)
    assert sysctl_in(netns, "net.core.somaxconn") == "1600"
    assert c.status()["lease"]["expiries"] == 0


def test_each_client_has_its_own_lease(xrtd, netns):
    """Two named clients with leases: the one that stops heartbeating loses only its own knobs."""
    ns = f"/run/netns/{netns}"
    a = KnobClient(xrtd.socket, client="tuner-a")
    b = KnobClient(xrtd.socket, client="tuner-b")
    try:
        fin_before = sysctl_in(netns, "net.ipv4.tcp_fin_timeout")
        a.register("fin", "sysctl", "net.ipv4.tcp_fin_timeout", min=5, max=120, netns=ns)
        b.register("somaxconn", "sysctl", "net.core.somaxconn", min=128, max=65535, netns=ns)
        a.start_lease(period=0.05, lease_ms=1000)
        b.start_lease(period=0.05, lease_ms=10000)  # long: b's lease is never at stake here
        a.set("fin", 17)
        b.set("somaxconn", 3000)
        leases = {lease["client"]: lease for lease in a.status()["leases"]}
        assert leases["tuner-a"]["held"] and leases["tuner-a"]["knobs"] == ["fin"]
        assert leases["tuner-b"]["held"] and leases["tuner-b"]["knobs"] == ["somaxconn"]
        reply = a.call_raw(b'{"op":"hello","client":"tuner-b"}')
        assert "this connection is already client 'tuner-a'" in reply["error"]

        a.stop_lease(release=False)  # tuner a hangs
        assert (
            wait_for(lambda: sysctl_in(netns, "net.ipv4.tcp_fin_timeout") == fin_before, timeout=5)
            is not None
        )
        st = b.status()  # answered after the expiry has run to its end
        assert sysctl_in(netns, "net.core.somaxconn") == "3000"
        assert st["lease"] == {
            "held": True,
            "remaining_ms": st["lease"]["remaining_ms"],
            "expiries": 0,
            "action": "good",
        }
        leases = {lease["client"]: lease for lease in st["leases"]}
        assert (leases["tuner-a"]["held"], leases["tuner-a"]["expiries"]) == (False, 1)
        assert (leases["tuner-b"]["held"], leases["tuner-b"]["expiries"]) == (True, 0)
        assert b.get("somaxconn")["state"] == "applied" and a.get("fin")["state"] == "rolled_back"
        audit = xrtd.audit()
        assert "lease expired (client tuner-a)" in audit
        assert not any("knob=somaxconn" in line and "lease expired" in line for line in audit.splitlines())
        b.stop_lease(release=True)
    finally:
        a.close()
        b.close()
