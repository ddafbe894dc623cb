"""The network case's load: bulk and request/response over the same bottleneck, at the same time.

    netmix.py serve                 # in the server namespace: iperf3 -s and sockperf's TCP server
    netmix.py load ADDR SECONDS     # in the client's: prints one JSON line of both tools' figures

The bulk is one iperf3 TCP stream sent by the server (`-R`), so the server namespace's sysctls
(congestion control, send buffers) decide how full it keeps the router's queue. The
request/response load is sockperf's under-load mode over TCP: 64-byte requests at 100 a second,
each answered (`--reply-every 1`), round trips measured by the client (`--full-rtt`); it starts
WARMUP_S after the bulk (past its slow start, which takes a second on a 40 ms path) and stops
WARMUP_S before it. A tool that fails, or output without a figure, is an error naming the tool
and what is missing, and no JSON line is printed.
"""

from __future__ import annotations

import ctypes
import json
import re
import signal
import subprocess
import sys
import time

BULK_PORT = 5201  # iperf3's own default
RR_PORT = 11111  # sockperf's own default
RR_RATE = 100  # requests per second: a light load, so the queue it meets is the bulk's
WARMUP_S = 2
PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """In a tool's process before it execs: SIGTERM when this script ends, however it ends (a tool
    left behind, e.g. an iperf3 client whose server's namespace is gone, spins on a CPU)."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def serve() -> None:
    """Both servers until SIGTERM, then both stopped."""
    procs = [
        subprocess.Popen(
            ["sockperf", "server", "--tcp", "-p", str(RR_PORT)],
            stdout=subprocess.DEVNULL,
            preexec_fn=die_with_parent,
        ),
        subprocess.Popen(
            ["iperf3", "-s", "-p", str(BULK_PORT)], stdout=subprocess.DEVNULL, preexec_fn=die_with_parent
        ),
    ]
    # Blocked only now: the tools would inherit the mask and ignore their own SIGTERM.
    stop = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop)
    signal.sigwait(stop)
    for p in procs:
        p.terminate()
    for p in procs:
        p.wait()


def percentile(text: str, which: str) -> float:
    m = re.search(rf"percentile {re.escape(which)} =\s*([0-9.]+)", text)
    if m is None:
        raise RuntimeError(f"sockperf: no percentile {which} in its output: {text[-300:]!r}")
    return float(m.group(1)) / 1000  # µs -> ms


def load(addr: str, seconds: int) -> dict[str, float]:
    bulk_cmd = ["iperf3", "-c", addr, "-p", str(BULK_PORT), "-R", "-J", "-t", str(seconds + 2 * WARMUP_S)]
    bulk = subprocess.Popen(
        bulk_cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=die_with_parent
    )
    time.sleep(WARMUP_S)
    rr = subprocess.run(
        ["sockperf", "under-load", "--tcp", "-i", addr, "-p", str(RR_PORT), "-t", str(seconds),
         "--mps", str(RR_RATE), "--reply-every", "1", "--full-rtt", "-m", "64"],
        capture_output=True, text=True, preexec_fn=die_with_parent,
    )  # fmt: skip
    out, err = bulk.communicate()
    if bulk.returncode != 0:
        raise RuntimeError(f"iperf3 exited {bulk.returncode}: {(out + err)[-300:]!r}")
    if rr.returncode != 0:
        raise RuntimeError(f"sockperf exited {rr.returncode}: {(rr.stdout + rr.stderr)[-300:]!r}")
    try:
        received = json.loads(out)["end"]["sum_received"]
        sent = json.loads(out)["end"]["sum_sent"]
        bits, retransmits = received["bits_per_second"], sent["retransmits"]
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise RuntimeError(f"iperf3 -J: no end.sum_received.bits_per_second or retransmits ({e})") from None
    text = rr.stdout + rr.stderr
    return {
        "bulk_mbit_s": bits / 1e6,
        "bulk_retransmits": retransmits,
        "rr_p50_ms": percentile(text, "50.000"),
        "rr_p99_ms": percentile(text, "99.000"),
    }


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"] and len(sys.argv) == 2:
        serve()
    elif sys.argv[1:2] == ["load"] and len(sys.argv) == 4 and sys.argv[3].isdigit():
        try:
            print(json.dumps(load(sys.argv[2], int(sys.argv[3]))))
        except RuntimeError as e:
            sys.exit(f"netmix.py: {e}")
    else:
        sys.exit("usage: netmix.py serve | netmix.py load ADDR SECONDS")
