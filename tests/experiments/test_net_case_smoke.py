"""The network case for a few seconds: the shaped path comes up (a router namespace with tbf on
its egress toward the client), iperf3's bulk and sockperf's requests run together under two
contenders applied through xrtd in the server namespace (defaults, the sysctl paper's Table IV:
its send-buffer cap and window scaling off); both tools give figures, the server namespace's
values are read back equal to its defaults before it goes, the host's TCP sysctls are untouched,
and no namespace of the path is left. Every contender of the case sets only sysctls the server
namespace holds; TuneD's host-wide rows are listed as not applied."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from cases import net
from cases.case import Place
from cases.profiles import in_namespace
from cases.run import contenders_of, host_values, run_case
from cases.shaped import ShapedPath

HOST_KEYS = ["net.ipv4.tcp_wmem", "net.ipv4.tcp_rmem", "net.ipv4.tcp_window_scaling"]


def namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True)
    return {line.split()[0] for line in out.stdout.splitlines() if line.strip()}


def test_shaped_path_has_its_bottleneck_on_the_router() -> None:
    before = namespaces()
    with ShapedPath() as path:
        qdisc = subprocess.run(["tc", "-n", path.router, "qdisc", "show", "dev", path.bottleneck_dev],
                               capture_output=True, text=True, check=True).stdout  # fmt: skip
        assert "tbf" in qdisc, qdisc
        ping = ["ip", "netns", "exec", path.client, "python3", "-c",
                f"import socket; socket.create_connection(('{path.server_addr}', 9), 2)"]  # fmt: skip
        # Refused (nothing listens on port 9) proves the route: a dead path would time out.
        assert "ConnectionRefusedError" in subprocess.run(ping, capture_output=True, text=True).stderr
    assert namespaces() == before


@pytest.mark.timeout(120)
def test_net_case_two_contenders_restores_the_namespace_and_the_host() -> None:
    for tool in ("iperf3", "sockperf", "tc"):
        assert shutil.which(tool), f"{tool} is missing: `make setup` installs scripts/apt-packages.txt"
    before, spaces = host_values(HOST_KEYS), namespaces()
    out = run_case(net.CASE, reps=1, budget=1, quick=True, log=lambda _m: None,
                   only={"defaults", "paper-web-static"})  # fmt: skip
    assert set(out["contenders"]) == {"defaults", "paper-web-static"}
    paper = out["contenders"]["paper-web-static"]
    assert paper["values"]["net.ipv4.tcp_wmem[2]"] == 262144
    assert paper["values"]["net.ipv4.tcp_window_scaling"] == 0
    for c in out["contenders"].values():
        assert c["failed_runs"] == 0 and c["objective"]["mean"] > 0 and c["p99_ms"]["mean"] > 0
        run = c["runs"]
        assert len(run) == 1 and run[0] > 0
    assert out["host_restored"] and out["place_restored"]
    assert host_values(HOST_KEYS) == before
    assert namespaces() == spaces


def test_net_case_contenders_set_only_the_server_namespace() -> None:
    with ShapedPath() as path:
        contenders, missing = contenders_of(net.CASE, Place({}, netns=path.server))
        for c in contenders:
            outside = [t for t in c.settings if not in_namespace(t, path.server)]
            assert not outside, (c.name, outside)
        left_out = {
            str(n["key"]) for c in contenders for n in c.not_applicable if "host-wide" in str(n["reason"])
        }
        # network-latency's busy polling and every profile's vm.* rows are the host's.
        assert {"net.core.busy_read", "net.core.busy_poll", "vm.swappiness"} <= left_out, left_out
        assert any(m.startswith("tuned-latency-performance:") for m in missing), missing
