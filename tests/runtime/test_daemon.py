"""xrtd's own command line and instance safety: bad options, a busy state dir or table, --allow."""

import json
import os
import socket
import stat
import subprocess

import pytest
from xtune import paths
from xtune.knobs.table import KnobError


def run_xrtd(*args, timeout=10):
    return subprocess.run([str(paths.binary("xrtd")), *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize(
    "args,message",
    [
        (["--lease-action", "panic"], "--lease-action panic: good or original"),
        (["--poll-us", "0"], "--poll-us 0: 10..1000000"),
        (["--shm", "a/b"], "--shm a/b: a name without '/'"),
        (["--journal-sync", "sometimes"], "--journal-sync sometimes: all or originals"),
        (["--rt-priority", "100"], "--rt-priority 100: 0..99"),
        (["--allow", "nocolon"], "--allow nocolon: expected BACKEND:GLOB"),
        (["--allow", "telepathy:*"], "unknown backend 'telepathy'"),
        (["stray"], "unexpected argument 'stray'"),
    ],
)
def test_bad_options_exit_with_a_message(tmp_path, args, message):
    res = run_xrtd("--socket", str(tmp_path / "s"), "--state-dir", str(tmp_path / "st"), *args)
    assert res.returncode == 2
    assert message in res.stderr
    assert not (tmp_path / "s").exists()


def test_socket_is_root_only(xrtd):
    assert stat.S_IMODE(os.stat(xrtd.socket).st_mode) == 0o600


def test_second_instance_on_same_state_dir_or_table_is_refused(xrtd, tmp_path):
    res = run_xrtd("--socket", str(tmp_path / "other.sock"), "--state-dir", str(xrtd.state_dir))
    assert res.returncode == 1 and f"state dir {xrtd.state_dir} is in use by another xrtd" in res.stderr
    res = run_xrtd(
        "--socket", str(tmp_path / "other.sock"), "--state-dir", str(tmp_path / "st2"), "--shm", xrtd.shm
    )
    assert res.returncode == 1 and "in use by another running xrtd" in res.stderr
    assert xrtd.client().status()["knobs"] == 0  # the first one is untouched


def test_allow_replaces_the_default_rules(xrtd_factory, netns):
    x = xrtd_factory("--allow", "sysctl:net.core.somaxconn")
    c = x.client()
    ns = f"/run/netns/{netns}"
    c.register("somaxconn", "sysctl", "net.core.somaxconn", min=128, max=65535, netns=ns)
    with pytest.raises(KnobError, match="sysctl net.ipv4.tcp_fin_timeout is not on xrtd's allow-list"):
        c.register("fin", "sysctl", "net.ipv4.tcp_fin_timeout", min=5, max=60, netns=ns)


def test_pipelined_requests_get_one_reply_each_in_order(xrtd):
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(xrtd.socket)
        s.sendall(b'{"op":"status"}\r\n{"op":"list"}\n{"op":"nope"}\n')
        f = s.makefile("rb")
        replies = [json.loads(f.readline()) for _ in range(3)]
    assert [r["ok"] for r in replies] == [True, True, False]
    assert "pid" in replies[0] and replies[1]["knobs"] == [] and "unknown op" in replies[2]["error"]
