"""xcubic: real TCP flows between two namespaces over veth; HyStart knobs change behaviour live."""

import json
import subprocess

import pytest
from xtune import paths
from xtune.testing.netpair import BulkPath, unique_tag

FLOW_BYTES = 3_000_000


def show(pin):
    out = subprocess.run(
        [str(paths.binary("xcubic")), "show", "--pin", pin], check=True, capture_output=True, text=True
    ).stdout
    return json.loads(out)


def ops_map_id(pin):
    out = subprocess.run(
        ["bpftool", "-j", "map", "show", "pinned", f"{pin}/ops"], check=True, capture_output=True, text=True
    ).stdout
    return json.loads(out)["id"]


@pytest.fixture
def pair():
    with BulkPath(unique_tag()) as p:
        yield p


def run(pair, pin, n=2):
    """n xcubic flows; the change in xcubic's counters they caused."""
    s0 = show(pin)["stats"]
    flows = pair.flows("xcubic", FLOW_BYTES, n)
    s1 = show(pin)["stats"]
    delta = {k: s1[k] - s0[k] for k in s0 if k != "last_exit_cwnd"}
    assert delta["flows"] == n
    return delta, flows


def test_registered_and_selectable_per_socket_and_globally(xcubic, xrtd, pair):
    assert "xcubic" in open("/proc/sys/net/ipv4/tcp_available_congestion_control").read().split()
    delta, flows = run(pair, xcubic, 1)
    assert flows[0].cc == "xcubic" and flows[0].mbps > 1

    # Globally, through xrtd: the namespace's default congestion control as an enum knob.
    c = xrtd.client()
    c.register(
        "cc",
        "sysctl",
        "net.ipv4.tcp_congestion_control",
        enum=["cubic", "bbr", "reno", "xcubic"],
        netns=f"/run/netns/{pair.a}",
    )
    c.set("cc", "xcubic", reason="test: global selection")
    before = show(xcubic)["stats"]["flows"]
    flow = pair.flows("default", FLOW_BYTES)[0]
    assert flow.cc == "xcubic"
    assert show(xcubic)["stats"]["flows"] == before + 1


def test_hystart_knobs_change_behaviour_without_reload(xcubic, xrtd, pair):
    c = xrtd.client()
    params = f"{xcubic}/params"
    lw = c.register("low_window", "bpf", f"{params}:hystart_low_window", min=2, max=1 << 20)
    assert lw["original"] == 16  # CUBIC's default, read from the map through its BTF
    c.register("detect", "bpf", f"{params}:hystart_detect", min=0, max=3)
    c.register("delay_min", "bpf", f"{params}:hystart_delay_min_us", min=1000, max=100000)
    c.register("delay_max", "bpf", f"{params}:hystart_delay_max_us", min=1000, max=100000)
    map_id = ops_map_id(xcubic)

    # Defaults: HyStart ends slow start in every flow (the bottleneck queue makes it fire).
    base, _ = run(pair, xcubic)
    assert base["hystart_train_exits"] + base["hystart_delay_exits"] == 2

    # Raise the low window through the shared table (the tuner's no-syscall path): HyStart never runs.
    with c.table() as table:
        gen = table.write_desired(lw["slot"], 100000, ring=True)
        assert table.wait_applied(lw["slot"], gen, timeout=5).state == "applied"
    assert show(xcubic)["params"]["hystart_low_window"] == 100000
    off, _ = run(pair, xcubic)
    assert off["hystart_train_exits"] + off["hystart_delay_exits"] == 0

    # Delay detection only, with the kernel's 4 ms threshold clamp: it fires, and the cwnd at exit is counted.
    with c.transaction():
        c.set("low_window", 16, reason="test")
        c.set("detect", 2, reason="test: delay-increase detection only")
    delay, _ = run(pair, xcubic)
    assert delay["hystart_delay_exits"] == 2 and delay["hystart_train_exits"] == 0
    assert delay["exit_cwnd_sum"] >= 2 * 16

    # A 40 ms threshold is more queueing delay than the bottleneck builds: no exit.
    with c.transaction():
        c.set("delay_max", 80000)
        c.set("delay_min", 40000, reason="test: tolerate 40 ms of queueing")
    late, _ = run(pair, xcubic)
    assert late["hystart_delay_exits"] == 0

    assert ops_map_id(xcubic) == map_id  # the same registered program throughout
    assert xrtd.stop() == 0
    assert show(xcubic)["params"] == {
        **show(xcubic)["params"],
        "hystart_low_window": 16,
        "hystart_detect": 3,
        "hystart_delay_min_us": 4000,
        "hystart_delay_max_us": 16000,
    }


def test_bpf_knob_restored_after_kill9(xcubic, xrtd):
    c = xrtd.client()
    c.register("ack_delta", "bpf", f"{xcubic}/params:hystart_ack_delta_us", min=100, max=10000)
    c.register("beta", "bpf", f"{xcubic}/params:beta", min=512, max=1000)
    c.set("ack_delta", 5000)
    c.set("beta", 900)
    assert (show(xcubic)["params"]["hystart_ack_delta_us"], show(xcubic)["params"]["beta"]) == (5000, 900)
    xrtd.kill9()
    xrtd.start()  # replay finds the map by its pin and the fields by BTF again
    assert (show(xcubic)["params"]["hystart_ack_delta_us"], show(xcubic)["params"]["beta"]) == (2000, 717)


@pytest.mark.parametrize(
    "target,message",
    [
        ("params:no_such_field", "the map's value has no field 'no_such_field'"),
        ("ops:name", "must be an array map"),
        ("nothing:beta", "No such file or directory"),
    ],
)
def test_bad_bpf_targets(xcubic, xrtd, target, message):
    reply = xrtd.client().call_raw(
        json.dumps(
            {
                "op": "register",
                "name": "x",
                "backend": "bpf",
                "target": f"{xcubic}/{target}",
                "min": 0,
                "max": 1,
            }
        ).encode()
    )
    assert reply["ok"] is False and message in reply["error"]
    assert show(xcubic)["params"]["beta"] == 717
