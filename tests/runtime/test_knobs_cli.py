"""`xtune knobs` against a real xrtd."""

import json
import subprocess

from xtune import paths
from xtune.testing.xrtd import sysctl_in


def xtune(xrtd, *args, ok=True):
    res = subprocess.run(
        [str(paths.ROOT / ".venv/bin/xtune"), "knobs", "--socket", xrtd.socket, *args],
        capture_output=True,
        text=True,
    )
    assert (res.returncode == 0) == ok, res.stderr
    return res


def test_register_list_get_set_rollback_status(xrtd, netns):
    before = sysctl_in(netns, "net.core.somaxconn")
    out = xtune(
        xrtd,
        "register",
        "somaxconn",
        "--backend",
        "sysctl",
        "--target",
        "net.core.somaxconn",
        "--min",
        "128",
        "--max",
        "65535",
        "--netns",
        f"/run/netns/{netns}",
    ).stdout
    assert out.startswith("somaxconn") and "registered" in out
    assert "somaxconn" in xtune(xrtd, "list").stdout
    xtune(xrtd, "set", "somaxconn", "2222", "--reason", "cli test")
    assert sysctl_in(netns, "net.core.somaxconn") == "2222"
    assert json.loads(xtune(xrtd, "get", "somaxconn").stdout)["applied"] == 2222
    assert 'reason="cli test"' in xrtd.audit()
    xtune(xrtd, "rollback", "somaxconn")
    assert sysctl_in(netns, "net.core.somaxconn") == before
    assert json.loads(xtune(xrtd, "status").stdout)["knobs"] == 1

    err = xtune(xrtd, "set", "somaxconn", "5", ok=False).stderr
    assert "error: knob somaxconn: value 5 out of bounds [128, 65535]" in err
    err = xtune(
        xrtd,
        "register",
        "x",
        "--backend",
        "sysctl",
        "--target",
        "kernel.panic",
        "--min",
        "0",
        "--max",
        "1",
        ok=False,
    ).stderr
    assert "not on xrtd's allow-list" in err


def test_no_daemon_is_a_clear_error(tmp_path):
    res = subprocess.run(
        [str(paths.ROOT / ".venv/bin/xtune"), "knobs", "--socket", str(tmp_path / "none.sock"), "list"],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 1
    assert "cannot connect to xrtd at" in res.stderr
