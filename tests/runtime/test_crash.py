"""Crash safety: kill -9 xrtd (or its client) anywhere; nothing stays changed, the journal holds."""

import json
import random
import subprocess
import sys
import time

from xtune.testing.xrtd import sysctl_in

KNOBS = [  # name, key, min, max
    ("fin", "net.ipv4.tcp_fin_timeout", 5, 120),
    ("somaxconn", "net.core.somaxconn", 128, 65535),
    ("rmem_default", "net.ipv4.tcp_rmem[1]", 4096, 1 << 24),
]

# A tuner that registers the knobs and then changes them as fast as it can: transactions,
# single sets and table writes, in random order.
CLIENT = r"""
import random, sys
from xtune.knobs.table import KnobClient, KnobError
sock, ns = sys.argv[1], sys.argv[2]
knobs = [("fin", 5, 120), ("somaxconn", 128, 65535), ("rmem_default", 4096, 1 << 24)]
c = KnobClient(sock)
table = c.table()
slots = {k["name"]: k["slot"] for k in c.list()}
print("ready", flush=True)
while True:
    r = random.random()
    if r < 0.6:
        with c.transaction():
            for name, lo, hi in knobs:
                c.set(name, random.randint(lo, hi), reason="fault test")
    elif r < 0.8:
        name, lo, hi = random.choice(knobs)
        c.set(name, random.randint(lo, hi), reason="fault test")
    else:
        name, lo, hi = random.choice(knobs)
        table.write_desired(slots[name], random.randint(lo, hi), ring=True)
"""


def read_all(netns):
    return {key: sysctl_in(netns, key.split("[")[0]) for _, key, _, _ in KNOBS}


def register(c, ns):
    for name, key, lo, hi in KNOBS:
        c.register(name, "sysctl", key, min=lo, max=hi, netns=ns)


def check_journal(lines):
    """Every record parses (a torn last line is allowed) and is one this journal writes."""
    for i, line in enumerate(lines):
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            assert i == len(lines) - 1, f"journal line {i + 1} is corrupt: {line!r}"
            continue
        assert rec["op"] in {"start", "register", "unregister", "arm", "set", "restored", "keep", "txn"}, rec


def test_kill9_after_apply_then_restart_restores(xrtd, netns):
    ns = f"/run/netns/{netns}"
    before = read_all(netns)
    c = xrtd.client()
    register(c, ns)
    c.set("fin", 17)
    c.set("somaxconn", 999)
    c.set("rmem_default", 99999)
    assert read_all(netns) != before
    xrtd.kill9()
    assert read_all(netns) != before  # nothing restored them: xrtd died without a word
    check_journal(xrtd.journal())
    xrtd.start()  # replays the journal before it opens its socket
    assert read_all(netns) == before
    # The fresh journal holds only the registrations, which the restarted xrtd kept.
    assert [json.loads(r)["op"] for r in xrtd.journal()] == ["start"] + ["register"] * len(KNOBS)
    assert "journal replay after a crash" in xrtd.audit()


def test_kept_values_survive_exit_and_crash(xrtd, netns):
    ns = f"/run/netns/{netns}"
    c = xrtd.client()
    register(c, ns)
    c.set("fin", 21)
    c.set("somaxconn", 1111)
    c.keep(["fin"])
    xrtd.kill9()
    xrtd.start()
    assert sysctl_in(netns, "net.ipv4.tcp_fin_timeout") == "21"  # kept
    assert sysctl_in(netns, "net.core.somaxconn") != "1111"  # restored


def test_fault_injection_kills_at_random_points(xrtd, netns):
    """60 rounds: kill -9 xrtd or the client at a random moment of a busy tuning loop."""
    ns = f"/run/netns/{netns}"
    before = read_all(netns)
    rng = random.Random(3)
    kinds = {"xrtd": 0, "client": 0}
    dirty = 0  # rounds where knobs were changed at the moment of the kill
    for round_ in range(60):
        c = xrtd.client()
        register(c, ns)  # after a restart xrtd has them: the same registration is answered with its knob
        client = subprocess.Popen(
            [sys.executable, "-c", CLIENT, xrtd.socket, ns], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        assert client.stdout is not None and client.stdout.readline() == b"ready\n"
        time.sleep(rng.uniform(0.0, 0.05))
        victim = rng.choice(["xrtd", "client"])
        kinds[victim] += 1
        if victim == "xrtd":
            xrtd.kill9()
            client.kill()
            client.wait()
            dirty += read_all(netns) != before
            check_journal(xrtd.journal())
            xrtd.start()
        else:
            client.kill()
            client.wait()
            dirty += read_all(netns) != before
            assert xrtd.stop() == 0
            check_journal(xrtd.journal())
            xrtd.start()
        assert read_all(netns) == before, f"round {round_}: a knob was left changed after killing {victim}"
        assert [json.loads(r)["op"] for r in xrtd.journal()] == ["start"] + ["register"] * len(KNOBS)
    assert min(kinds.values()) >= 20
    assert dirty >= 40, f"only {dirty} of 60 kills hit changed knobs"
