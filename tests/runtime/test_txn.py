"""Transactions: all knobs of a transaction apply, or none does."""

import json

import pytest
from xtune.knobs.table import KnobError
from xtune.testing.xrtd import sysctl_in

KEYS = ("net.ipv4.tcp_fin_timeout", "net.core.somaxconn", "net.ipv4.ip_local_port_range")


def register_three(c, ns):
    c.register("fin", "sysctl", "net.ipv4.tcp_fin_timeout", min=5, max=120, netns=ns)
    c.register("somaxconn", "sysctl", "net.core.somaxconn", min=128, max=65535, netns=ns)
    c.register("port_lo", "sysctl", "net.ipv4.ip_local_port_range[0]", min=1024, max=65535, netns=ns)


def test_commit_applies_all(xrtd, netns):
    c = xrtd.client()
    register_three(c, f"/run/netns/{netns}")
    with c.transaction():
        c.set("fin", 33, reason="txn")
        c.set("somaxconn", 777, reason="txn")
        c.set("port_lo", 20000, reason="txn")
        assert sysctl_in(netns, "net.core.somaxconn") != "777"  # queued, not applied yet
    assert sysctl_in(netns, "net.ipv4.tcp_fin_timeout") == "33"
    assert sysctl_in(netns, "net.core.somaxconn") == "777"
    assert sysctl_in(netns, "net.ipv4.ip_local_port_range").split()[0] == "20000"


def test_last_knob_failing_leaves_all_at_old_values(xrtd, netns):
    c = xrtd.client()
    register_three(c, f"/run/netns/{netns}")
    before = {k: sysctl_in(netns, k) for k in KEYS}
    high = int(before["net.ipv4.ip_local_port_range"].split()[1])
    c.begin()
    c.set("fin", 44)
    c.set("somaxconn", 999)
    c.set("port_lo", high + 1)  # within the knob's bounds, but the kernel refuses low > high
    with pytest.raises(
        KnobError, match=r"transaction \d+ not applied: .*ip_local_port_range.*Invalid argument"
    ):
        c.commit()
    assert {k: sysctl_in(netns, k) for k in KEYS} == before
    ops = [json.loads(r) for r in xrtd.journal()]
    assert [r["what"] for r in ops if r["op"] == "txn"] == ["begin", "abort"]
    # The two applied knobs were journaled, applied, then put back and journaled as restored.
    assert sorted(r["knob"] for r in ops if r["op"] == "restored") == ["fin", "somaxconn"]
    assert "transaction failed" in xrtd.audit()


def test_out_of_bounds_set_is_refused_when_queued(xrtd, netns):
    c = xrtd.client()
    register_three(c, f"/run/netns/{netns}")
    c.begin()
    c.set("fin", 10)
    with pytest.raises(KnobError, match="out of bounds"):
        c.set("somaxconn", 5)
    c.abort()
    assert sysctl_in(netns, "net.ipv4.tcp_fin_timeout") != "10"


def test_client_gone_mid_transaction_applies_nothing(xrtd, netns):
    c = xrtd.client()
    register_three(c, f"/run/netns/{netns}")
    before = {k: sysctl_in(netns, k) for k in KEYS}
    c.begin()
    c.set("fin", 50)
    c.set("somaxconn", 4321)
    c.close()
    other = xrtd.client()
    assert other.get("fin")["armed"] is False
    assert {k: sysctl_in(netns, k) for k in KEYS} == before
