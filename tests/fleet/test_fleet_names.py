"""Two fleets made by one process share no name: a fleet's veths outlive its namespaces for a
moment, so the next fleet of the same test run must not reuse them (nor namespaces, shm, subnets)."""

from __future__ import annotations

from pathlib import Path

from xtune.testing.fleet import SimulatedFleet


def names(fleet: SimulatedFleet) -> set[str]:
    """Every name a fleet's hosts would create on the machine (nothing is created here)."""
    out: set[str] = set()
    for h in fleet.hosts:
        out |= {h.netns, h.shm, h._signals_shm, h.addr, *h._veth}
    return out


def test_two_fleets_in_one_process_share_no_name(tmp_path: Path) -> None:
    first = SimulatedFleet(tmp_path / "a", 3)
    second = SimulatedFleet(tmp_path / "b", 3)
    assert not names(first) & names(second)
    assert all(len(dev) <= 15 for f in (first, second) for h in f.hosts for dev in h._veth[:2])
