"""sysctl backend in a throwaway network namespace: set, read back, table writes, restore on exit."""

import pytest
from xtune.host.netns import sysctl
from xtune.knobs.table import KnobError
from xtune.testing.xrtd import sysctl_in


def test_set_reads_back_and_sigterm_restores(xrtd, netns):
    ns = f"/run/netns/{netns}"
    before = sysctl_in(netns, "net.core.somaxconn")
    rmem_before = sysctl_in(netns, "net.ipv4.tcp_rmem").split()
    c = xrtd.client()
    k = c.register("somaxconn", "sysctl", "net.core.somaxconn", min=128, max=65535, netns=ns)
    assert k["original"] == int(before) and k["state"] == "registered"
    c.register("rmem_default", "sysctl", "net.ipv4.tcp_rmem[1]", min=4096, max=1 << 24, netns=ns)

    k = c.set("somaxconn", 1234, reason="test: deeper accept queue")
    assert k["applied"] == 1234 and k["state"] == "applied" and k["armed"]
    assert sysctl_in(netns, "net.core.somaxconn") == "1234"
    c.set("rmem_default", 262144, reason="test: bigger default buffer")
    after = sysctl_in(netns, "net.ipv4.tcp_rmem").split()
    assert after == [rmem_before[0], "262144", rmem_before[2]]  # only the one field changed

    audit = xrtd.audit()
    assert (
        f"knob=somaxconn backend=sysctl target=net.core.somaxconn netns={ns} {before} -> 1234 applied"
        in audit
    )
    assert 'reason="test: deeper accept queue"' in audit

    assert xrtd.stop() == 0
    assert sysctl_in(netns, "net.core.somaxconn") == before
    assert sysctl_in(netns, "net.ipv4.tcp_rmem").split() == rmem_before
    assert "xrtd exiting" in xrtd.audit()


def test_table_write_applies_without_a_request(xrtd, netns):
    """The tuner's path: write desired into shared memory; xrtd applies and publishes applied."""
    c = xrtd.client()
    k = c.register(
        "somaxconn", "sysctl", "net.core.somaxconn", min=128, max=65535, netns=f"/run/netns/{netns}"
    )
    with c.table() as table:
        assert table.index("somaxconn") == k["slot"]
        gen = table.write_desired(k["slot"], 2048)
        view = table.wait_applied(k["slot"], gen, timeout=5)
        assert (view.applied, view.state) == (2048, "applied")
        assert sysctl_in(netns, "net.core.somaxconn") == "2048"

        gen = table.write_desired(k["slot"], 3072, ring=True)  # doorbell + FUTEX_WAKE
        assert table.wait_applied(k["slot"], gen, timeout=5).applied == 3072

        gen = table.write_desired(k["slot"], 10)  # below min: refused, never applied
        view = table.wait_applied(k["slot"], gen, timeout=5)
        assert (view.applied, view.state, view.error) == (3072, "refused", 34)  # ERANGE
    assert sysctl_in(netns, "net.core.somaxconn") == "3072"
    assert "3072 -> 10 refused via=table" in xrtd.audit()


def test_enum_sysctl_and_step(xrtd, netns):
    c = xrtd.client()
    ns = f"/run/netns/{netns}"
    before = sysctl_in(netns, "net.ipv4.tcp_congestion_control")
    k = c.register("cc", "sysctl", "net.ipv4.tcp_congestion_control", enum=["reno", "cubic", "bbr"], netns=ns)
    assert k["type"] == "enum" and k["text"] == before
    assert c.set("cc", "reno")["text"] == "reno"
    assert sysctl_in(netns, "net.ipv4.tcp_congestion_control") == "reno"
    assert c.set("cc", 2)["text"] == "bbr"
    with pytest.raises(KnobError, match="not one of the knob's enum values"):
        c.set("cc", "vegas")

    c.register("fin", "sysctl", "net.ipv4.tcp_fin_timeout", min=10, max=120, step=10, netns=ns)
    c.set("fin", 40)
    with pytest.raises(KnobError, match="multiple of step 10"):
        c.set("fin", 45)
    assert sysctl_in(netns, "net.ipv4.tcp_fin_timeout") == "40"
    c.rollback(["cc"], reason="test rollback")
    assert sysctl_in(netns, "net.ipv4.tcp_congestion_control") == before
    assert c.get("cc")["state"] == "rolled_back"


def test_two_values_the_kernel_keeps_one_of_are_refused_naming_both(xrtd):
    """vm.dirty_bytes and vm.dirty_ratio: writing either zeroes the other, so both cannot be in
    force; a set that would leave the other knob moved fails with both names and changes nothing."""
    keys = ("vm.dirty_bytes", "vm.dirty_ratio")
    before = {k: sysctl(None, k) for k in keys}
    if before["vm.dirty_bytes"] != "0":
        pytest.skip("this host sets vm.dirty_bytes (the ratio is not in force)")
    c = xrtd.client()
    c.register("dirty_ratio", "sysctl", "vm.dirty_ratio", min=1, max=100)
    c.register("dirty_bytes", "sysctl", "vm.dirty_bytes", min=0, max=1 << 40)
    with pytest.raises(KnobError, match="dirty_bytes = 268435456 and dirty_ratio = .* cannot hold together"):
        c.set("dirty_bytes", 256 << 20)
    assert {k: sysctl(None, k) for k in keys} == before
    assert c.get("dirty_ratio")["applied"] == int(before["vm.dirty_ratio"])
    assert xrtd.stop() == 0
    assert {k: sysctl(None, k) for k in keys} == before
