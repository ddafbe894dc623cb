"""Where the key-value case's time goes, before tuning: `xtune drill` on the kv case's redis-server.

Debian's redis-server (stock config, in the case's server namespace) runs under redis-benchmark
load from the client namespace (the kv case's SET/GET mix, looped); the drill starts at
`beforeSleep`, what redis does once per event-loop pass before it waits for events again (the
per-command functions take about a microsecond, less than one uprobe costs here, so their callees'
shares would be the probes' cost), and refines into the callee with the largest share of its time,
four levels down. Debian strips .symtab, but the binary exports its functions in .dynsym. The
server is never restarted: the result records that the same pid runs the same file afterwards, and
the drill's own check that no probe is left in its code.

    cd experiments && sudo ../.venv/bin/python -m cases.drill_kv [--seconds 3] [--depth 4]
      -> experiments/results/drill_kv.json, printed as a tree (experiments/cases/DRILL.md shows it)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
from pathlib import Path

from resultfile import write_result
from xtune.drill.refine import drill
from xtune.drill.render import tree_lines
from xtune.sie.elfcode import file_build_id

from cases.kv import CASE
from cases.servers import SERVERS

FUNCTION = "beforeSleep"
CLIENTS = 50  # the kv case's redis-benchmark -c
SOURCES = ["tuner/xtune/drill", "tuner/xtune/cli/drill.py", "observers/func.c", "observers/func.bpf.c",
           "experiments/cases/drill_kv.py"]  # fmt: skip


def benchmark(place_vars: dict[str, str]) -> subprocess.Popen[bytes]:
    """The kv case's load, looped until stopped (`-l`), quiet."""
    client = ["ip", "netns", "exec", place_vars["CLIENT_NETNS"]]
    load = ["redis-benchmark", "-h", place_vars["SERVER_ADDR"], "-p", str(CASE.port), "-c", str(CLIENTS)]
    return subprocess.Popen(
        [*client, *load, "-t", "set,get", "-l", "-q"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def levels(drill_json: dict) -> list[dict]:
    """The root and each callee the drill refined into, with how many callees it measured there."""
    out, node = [], drill_json["root"]
    while node is not None:
        keys = (
            "function",
            "share",
            "share_net",
            "calls_per_s",
            "concurrency",
            "latency_p50_us",
            "latency_p99_us",
        )
        out.append(
            {k: node[k] for k in keys}
            | {"callees": len(node["callees"]), "not_followed": len(node["not_followed"])}
        )
        node = next((c for c in node["callees"] if c["refined"]), None)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=3.0, help="seconds per measurement")
    ap.add_argument("--depth", type=int, default=4)
    args = ap.parse_args()
    with (
        tempfile.TemporaryDirectory(prefix="xtune-drill-kv-") as tmp,
        CASE.place(Path(tmp), quick=False) as place,
    ):
        (Path(tmp) / "server").mkdir()
        server = SERVERS["redis"]("redis", place.netns or "", CASE.port, Path(tmp) / "server")
        server.start()
        load = None
        try:
            assert server.proc is not None
            pid = server.proc.pid  # `ip netns exec` execs the server: this is redis-server's pid
            exe = os.readlink(f"/proc/{pid}/exe")
            load = benchmark(place.variables)
            time.sleep(2)  # connections up, the loop at its pace
            started = time.monotonic()
            result = drill(pid, FUNCTION, args.depth, args.seconds, print)
            took = time.monotonic() - started
            running = server.proc.poll() is None and os.readlink(f"/proc/{pid}/exe") == exe
        finally:
            if load is not None:
                os.killpg(load.pid, 15)
                load.wait()
            server.stop()
    data = result.to_json()
    version = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout.strip()
    data = {
        "setup": {"server": version, "exe": exe, "build_id": file_build_id(exe), "function": FUNCTION,
                  "load": f"redis-benchmark -c {CLIENTS} -t set,get -l (the kv case's mix, looped)",
                  "seconds_per_measurement": args.seconds, "depth": args.depth},
        "drill": data,
        "levels": levels(data),
        "drill_seconds": took,
        "server_same_pid_running_after": running,
        "tree": tree_lines(data, all_callees=False),
    }  # fmt: skip
    path = write_result("drill_kv", data, SOURCES)
    print("\n".join(data["tree"]))
    print(f"-> {path}")


if __name__ == "__main__":
    main()
