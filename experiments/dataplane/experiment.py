"""The dataplane proving ground: static RX_BATCH_SIZE vs the same binary retuned live through SIE
vs binaries rebuilt with the retuned values, under load whose rate and flow count change.

Run: `.venv/bin/python experiments/dataplane/experiment.py` (root; prints JSON). The benchmark
experiments/bench_sie_user.py runs it and stores the result in experiments/results/sie_user.json.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

from xtune import paths
from xtune.host.services import free_port
from xtune.sie import attach as eng
from xtune.sie.analyze import analyze
from xtune.sie.spec import load_spec
from xtune.sie.variants import build_one

HERE = Path(__file__).parent
LOW, HIGH = "2:3000:4", "2:25000:64"  # seconds:requests per second:flows
PHASES = [LOW, HIGH, LOW]
LIVE = {0: 8, 1: 16, 2: 8}  # phase -> RX_BATCH_SIZE set through SIE (from a sweep of rebuilt binaries)


def stats(port: int) -> dict[str, int]:
    """The server's counters (a UDP request like any other; retried if it is lost)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(1)
        for _ in range(5):
            s.sendto(b"stats", ("127.0.0.1", port))
            try:
                batches, packets, max_batch = map(int, s.recv(128).split())
                return {"batches": batches, "packets": packets, "max_batch": max_batch}
            except TimeoutError:
                continue
    raise RuntimeError(f"the server on port {port} does not answer")


def run(binary: Path, phases: list[str], scope=None, live: dict[int, int] | None = None) -> dict:  # type: ignore[no-untyped-def]
    """One load run against `binary`; with `scope`, RX_BATCH_SIZE is set through SIE per phase."""
    port = free_port(socket.SOCK_DGRAM)
    server = subprocess.Popen([str(binary), str(port)], stdout=subprocess.PIPE, text=True)
    assert server.stdout and server.stdout.readline().strip() == "ready"
    try:
        if scope is not None:
            eng.attach(server.pid, scope, ["RX_BATCH_SIZE"], timeout_ms=5000)
            if live is not None:
                eng.set_value(server.pid, "RX_BATCH_SIZE", live[0], scope.consts[0])
        gen = subprocess.Popen(
            [str(paths.binary("dataplane-loadgen")), str(port), *phases], stdout=subprocess.PIPE, text=True
        )
        assert gen.stdout is not None
        results = []
        for line in gen.stdout:
            if line.startswith("phase ") and live is not None:
                eng.set_value(server.pid, "RX_BATCH_SIZE", live[int(line.split()[1])], scope.consts[0])
            elif line.startswith("{"):
                results.append(json.loads(line))
        gen.wait()
        out = {"phases": results, "server": stats(port)}
        if scope is not None:
            eng.detach(server.pid, timeout_ms=5000)
        return out
    finally:
        server.kill()
        server.wait()


def main() -> dict:  # type: ignore[type-arg]
    spec = load_spec(HERE / "rx_batch.toml")
    table = analyze(spec)
    if not table.consts[0].tunable:
        raise SystemExit(f"RX_BATCH_SIZE is not tunable: {table.consts[0].refusals}")
    original = Path(table.binary.path)
    sie_8 = run(original, PHASES, table, {0: 8, 1: 8, 2: 8})
    rebuilt_8 = run(build_one(spec, 8), PHASES)
    most = {"sie_8": sie_8["server"]["max_batch"], "rebuilt_8": rebuilt_8["server"]["max_batch"]}
    if max(most.values()) > 8:  # the server's own invariant: a round never takes more than the bound
        raise SystemExit(f"a round took more than RX_BATCH_SIZE = 8 requests: {most}")
    result = {
        "phases": PHASES,
        "live_values": LIVE,
        "static_64": run(original, PHASES),
        "static_8_rebuilt": run(build_one(spec, 8), PHASES),
        "live_sie": run(original, PHASES, table, LIVE),
        # Same behaviour as a rebuild: SIE at 8 vs the binary rebuilt with 8, same load.
        # How many rounds a run takes depends on its timing; the most one round took is the bound.
        "equivalence": {
            "sie_8": sie_8,
            "rebuilt_8": rebuilt_8,
            "max_batch_equal": len(set(most.values())) == 1,
        },
    }
    return result


if __name__ == "__main__":
    json.dump(main(), sys.stdout, indent=1)
