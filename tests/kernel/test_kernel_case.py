"""The kernel case's loop in a QEMU guest (kmod/guest/case/smoke.sh): a tree compiled to shell
(a hand-made one: the slow disk's reads wait long, the fast one's do not) reads the disks' 0.5 s
windows and retunes BLK_MAX_REQUEST_COUNT through xsie.ko, changing value when the load moves
from one disk to the other; the plug flushes at the value in effect at the end."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from xtune.policies.tree import TreeModel
from xtune.policies.tree_shell import shell_source
from xtune.testing import kernel_guest

SLOW, FAST, FALLBACK = 8, 64, 32
# lat_us <= 1500: the fast disk (about 250 us here, above 300 us on a host twice as slow); the
# slow disk's reads complete after 2 ms (smoke.sh) and wait 4-6 ms behind each other. The guard
# admits any window (an idle one reads 0 reads/s).
MODEL = TreeModel(
    features=["ios_per_s", "lat_us", "queue_milli"],
    knobs=["BLK_MAX_REQUEST_COUNT"],
    classes=[[FAST], [SLOW], [FALLBACK]],
    nodes=[[1, 1500.0, 1, 2, 0], [-1, 0.0, -1, -1, 0], [-1, 0.0, -1, -1, 1]],
    card={"depth": 1, "leaves": 2},
    guard={"ranges": [[0, 1e9], [0, 1e9], [0, 1e9]], "fallback": 2},
)


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> str:
    if not shutil.which("qemu-system-x86_64"):
        pytest.skip("qemu-system-x86_64 is missing (Debian package qemu-system-x86)")
    policy = Path(tmp_path_factory.mktemp("case"), "policy.sh")
    policy.write_text(shell_source(MODEL, MODEL.features))
    text, _ = kernel_guest.run_script("case/smoke", ["BLK_MAX_REQUEST_COUNT"], [policy], timeout_s=300)
    return text


def in_effect(console: str, start: str, end: str) -> list[int]:
    """The values in effect in the policy's windows that ended between two phase marks."""
    mark = {m[1]: int(m[2]) for m in re.finditer(r"^XSIE-PHASE (\w+) (\d+)", console, re.M)}
    rows = re.findall(r"^XSIE-DECISION smoke (\d+) \d+ \d+ \d+ \d+ (\d+)", console, re.M)
    return [int(v) for t, v in rows if mark[start] < int(t) <= mark[end]]


def test_policy_follows_the_load(console: str) -> None:
    slow, fast = in_effect(console, "slow", "fast"), in_effect(console, "fast", "end")
    windows = re.findall(r"^XSIE-DECISION smoke .*", console, re.M)
    assert slow and slow[-1] == SLOW, f"slow phase: {slow}; windows (ns reads/s lat_us ...): {windows}"
    assert fast and fast[-1] == FAST, f"fast phase: {fast}; windows (ns reads/s lat_us ...): {windows}"


def test_plug_flushes_at_the_last_value(console: str) -> None:
    assert re.search(r"^XSIE-DEPTH (\d+)", console, re.M)[1] == str(FAST)


def test_guest_never_oopses(console: str) -> None:
    bad = re.findall(r".*(?:Oops|BUG:|WARNING:|general protection|kernel panic).*", console)
    assert not bad, bad[:20]
