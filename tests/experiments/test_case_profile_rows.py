"""Profile rows the cases cannot apply, each with its reason: a sysctl that holds a word (the
congestion control) given numbers (not listed as a key this kernel lacks), and the dirty-page
pairs the kernel keeps one of (a bytes value whose original 0 could not be written back, a ratio of
0 that would leave no threshold). Reads the host's values only."""

from __future__ import annotations

from cases.profiles import Contender, add, scope
from xtune.host.netns import sysctl

KEY = "net.ipv4.tcp_congestion_control"


def test_a_word_sysctl_reads_as_its_word() -> None:
    where = scope(KEY, None)
    assert where is not None
    assert where.fields == [sysctl(None, KEY)]
    assert isinstance(where.fields[0], str)


def test_a_number_for_a_word_sysctl_is_not_applicable() -> None:
    c = Contender("profile", "test")
    add(c, KEY, [3], None)
    assert c.settings == {}
    assert "holds words" in str(c.not_applicable[0]["reason"])


def test_a_dirty_bytes_row_the_host_cannot_get_back_is_not_applicable() -> None:
    # TuneD's postgresql profile: the ratios at 0, then the bytes values that take over from them.
    c = Contender("profile", "test")
    for key, value in [
        ("vm.dirty_ratio", 0),
        ("vm.dirty_bytes", 536870912),
        ("vm.dirty_background_ratio", 5),
    ]:
        add(c, key, [value], None)
    reasons = {str(n["key"]): str(n["reason"]) for n in c.not_applicable}
    assert "written after it" in reasons["vm.dirty_ratio"]
    if sysctl(None, "vm.dirty_bytes") == "0":  # the host's ratio is in force (the kernel's default)
        assert "could not be put back" in reasons["vm.dirty_bytes"]
    assert c.settings == {"vm.dirty_background_ratio": 5} | (
        {} if "vm.dirty_bytes" in reasons else {"vm.dirty_bytes": 536870912}
    )
