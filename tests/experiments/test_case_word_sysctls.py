"""Sysctls that hold a word (the congestion control): read as the word, and refused, with that
reason, to a profile that gives numbers for them (not as a key this kernel lacks). Reads the host's
values only."""

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
