"""Lease: a tuner that stops heartbeating has its values reverted within the lease time."""

import time

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
