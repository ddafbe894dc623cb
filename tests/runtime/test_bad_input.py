"""Every bad input gets an error reply naming the problem, and nothing changes on the host."""

import json

import pytest
from xtune.testing.xrtd import sysctl_in

SOMAXCONN = {
    "name": "somaxconn",
    "backend": "sysctl",
    "target": "net.core.somaxconn",
    "min": 128,
    "max": 65535,
}

BAD_REQUESTS = [
    (b"{", "malformed JSON at byte 1"),
    (b'{"op":"set","name":"somaxconn","value":5', "malformed JSON"),
    (b'{"op":"get","name":"somaxconn"} trailing', "trailing characters"),
    (b'{"op":"status"}\0{"op":"set","name":"somaxconn","value":9000}', "request contains a NUL byte at 15"),
    (b"[1,2]", "must be a JSON object, not array"),
    (b'{"op":"get","name":"\\u0000"}', "unsupported \\u escape"),
    (b'{"op":"get","name":' + b"[" * 20 + b"]" * 20 + b"}", "nested too deeply"),
    (b'{"op":"get","name":"somaxconn",}', "expected a member name"),
    (b'{"name":"somaxconn"}', "missing field 'op'"),
    (b'{"op":42}', "field 'op' must be a string"),
    (b'{"op":"frobnicate"}', "unknown op 'frobnicate'"),
    (b'{"op":"get","name":"somaxconn","colour":"red"}', "get: unknown field 'colour'"),
    (b'{"op":"get","name":"nosuchknob"}', "unknown knob 'nosuchknob'"),
    (b'{"op":"set","name":"somaxconn"}', "missing field 'value'"),
    (b'{"op":"set","name":"somaxconn","value":"lots"}', "must be an integer, not string"),
    (b'{"op":"set","name":"somaxconn","value":1.5}', "must be an integer, not number"),
    (b'{"op":"set","name":"somaxconn","value":99999999999999999999}', "out of 64-bit range"),
    (b'{"op":"set","name":"somaxconn","value":100}', "value 100 out of bounds [128, 65535]"),
    (b'{"op":"set","name":"somaxconn","value":70000}', "out of bounds"),
    (b'{"op":"set","name":"somaxconn","value":1000,"reason":7}', "field 'reason' must be a string"),
    (b'{"op":"commit"}', "no transaction is open"),
    (b'{"op":"abort"}', "no transaction is open"),
    (b'{"op":"heartbeat","lease_ms":0}', "lease_ms 0 out of"),
    (b'{"op":"heartbeat","lease_ms":"soon"}', "must be an integer"),
    (b'{"op":"rollback","to":"yesterday"}', "'to' must be 'original' or 'good'"),
    (b'{"op":"rollback","names":["ghost"]}', "unknown knob 'ghost'"),
    (b'{"op":"keep","names":"somaxconn"}', "must be a list of knob names"),
    (b'{"op":"hello"}', "hello: missing field 'client'"),
    (b'{"op":"hello","client":"tuner one"}', "hello: client 'tuner one' must be 1..63 characters"),
]


def reg(**over):
    return json.dumps({"op": "register", **{**SOMAXCONN, **over}}).encode()


BAD_REGISTRATIONS = [
    (reg(name="somaxconn", max=1000), "knob 'somaxconn' already exists with another"),
    (reg(name="again"), "target net.core.somaxconn is already knob 'somaxconn'"),
    (reg(name="bad name!"), "name 'bad name!' must be"),
    (reg(name="x", backend="carrier-pigeon"), "unknown backend 'carrier-pigeon'"),
    (reg(name="x", target="kernel.panic"), "sysctl kernel.panic is not on xrtd's allow-list"),
    (reg(name="x", target="net.core.no_such_key"), "sysctl net.core.no_such_key: No such file"),
    (reg(name="x", target="net/../../etc/passwd"), "not a sysctl key"),
    (reg(name="x", target="net.ipv4.tcp_rmem[99]"), "field must be [0..15]"),
    (reg(name="x", target="net.ipv4.tcp_rmem[5]"), "has 3 fields, no field 5"),
    (
        reg(name="x", target="net.ipv4.tcp_wmem", netns="/run/netns/xtknobs-no-such-ns"),
        "No such file or directory",
    ),
    (reg(name="x", target="net.ipv4.tcp_wmem", netns="/etc/hostname"), "is not a network namespace"),
    (reg(name="x", target="net.ipv4.tcp_wmem[0]", min=10, max=5), "min 10 > max 5"),
    (
        json.dumps(
            {"op": "register", "name": "x", "backend": "sysctl", "target": "net.ipv4.tcp_wmem[0]"}
        ).encode(),
        "integer knobs need min and max",
    ),
    (reg(name="x", target="net.ipv4.tcp_congestion_control", enum=["cubic"]), "enum knobs take no min/max"),
    (reg(name="x", target="net.ipv4.tcp_congestion_control", enum=[]), "'enum' is empty"),
    (reg(name="x", target="net.ipv4.tcp_congestion_control", enum=[1, 2]), "'enum' holds a integer"),
    (reg(name="x", backend="sysfs", target="/etc/passwd"), "must be a normalized path under /sys/"),
    (reg(name="x", backend="sysfs", target="/sys/block/../kernel/x"), "normalized path"),
    (reg(name="x", backend="sysfs", target="/sys/kernel/uevent_helper"), "not on xrtd's allow-list"),
    (reg(name="x", backend="sysfs", target="/sys/block/nosuchdev/queue/nr_requests"), "No such file"),
    (reg(name="x", backend="bpf", target="/tmp/map:field"), "not on xrtd's allow-list"),
    (reg(name="x", backend="bpf", target="/sys/fs/bpf/no-such-map:field"), "No such file"),
    (reg(name="x", backend="bpf", target="/sys/fs/bpf/nofield"), "expected PINNED_MAP:FIELD"),
    (
        reg(name="x", backend="sysfs", target="/sys/block/loop0/queue/nr_requests", netns="/run/netns/x"),
        "netns applies to sysctl knobs only",
    ),
]


@pytest.mark.parametrize("line,message", BAD_REQUESTS + BAD_REGISTRATIONS, ids=lambda v: str(v)[:40])
def test_bad_input_is_refused_and_changes_nothing(xrtd, line, message):
    c = xrtd.client()
    c.register(**SOMAXCONN)
    before = open("/proc/sys/net/core/somaxconn").read()
    reply = c.call_raw(line)
    assert reply["ok"] is False
    assert message in reply["error"]
    assert open("/proc/sys/net/core/somaxconn").read() == before
    k = c.get("somaxconn")
    assert (k["applied"], k["armed"]) == (k["original"], False)
    assert [json.loads(r)["op"] for r in xrtd.journal()] == ["start", "register"]  # nothing else was
    assert c.status()["knobs"] == 1


def test_enum_value_not_in_list_and_too_long_line(xrtd, netns):
    c = xrtd.client()
    before = sysctl_in(netns, "net.ipv4.tcp_congestion_control")
    c.register(
        "cc", "sysctl", "net.ipv4.tcp_congestion_control", enum=["reno", before], netns=f"/run/netns/{netns}"
    )
    reply = c.call_raw(b'{"op":"set","name":"cc","value":"vegas"}')
    assert "'vegas' is not one of the knob's enum values" in reply["error"]
    reply = c.call_raw(b'{"op":"set","name":"cc","value":5}')
    assert "enum index 5 out of range 0..1" in reply["error"]
    assert sysctl_in(netns, "net.ipv4.tcp_congestion_control") == before
    other = xrtd.client()
    reply = other.call_raw(b'{"op":"status","pad":"' + b"x" * 70000 + b'"}')
    assert "longer than 65536 bytes" in reply["error"]
    assert c.status()["knobs"] == 1  # the daemon is still serving
