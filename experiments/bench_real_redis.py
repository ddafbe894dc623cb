"""Debian 12's redis-server retuned live: PROTO_IOBUF_LEN (the client read path's buffer size).

In one run: build the stock server from the Debian source package (experiments/real/redis), analyze
the constant (the table is written to experiments/real/redis/iobuf.scope.json; the whole-program
variant, every unit rebuilt, is analyzed too and its refusals recorded), start the stock binary,
attach through a private xrtd (`xtune sie attach`), and for each value V' (some no analysis build
used) set it live and check that the golden workload (experiments/real/redis/golden.py) answers
exactly as the server rebuilt with V' does; then redis-benchmark throughput of the retuned server
and of the rebuilt one, interleaved, over repetitions with 95 % CIs. Run under
`flock /tmp/xtune-heavy.lock` (builds and timing).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HERE = ROOT / "experiments" / "real" / "redis"
sys.path.insert(0, str(HERE))

import golden  # noqa: E402
import live  # noqa: E402
import server  # noqa: E402
from resultfile import write_result  # noqa: E402
from xtune.sie import scope  # noqa: E402
from xtune.sie.analyze import analyze  # noqa: E402
from xtune.sie.elfcode import file_build_id  # noqa: E402
from xtune.sie.spec import load_spec  # noqa: E402
from xtune.testing.stats import mean_ci95  # noqa: E402
from xtune.testing.xrtd import Xrtd  # noqa: E402

SOURCES = [
    "experiments/bench_real_redis.py",
    "experiments/real/redis",
    "tuner/xtune/sie",
    "runtime/sie",
    "runtime/xrtd",
]
CONST = "PROTO_IOBUF_LEN"
STOCK = 16384
# Values set live: 4096 and 12000 were built by no analysis or validation build.
VALUES = [STOCK, 4096, 32768, 12000, 2048]
REPS = int(os.environ.get("XTUNE_REDIS_REPS", "3"))
# Pipelined 4 KiB SETs from 4 clients: each read brings many commands, so the read size matters.
LOAD = f"-t set -n {os.environ.get('XTUNE_REDIS_REQUESTS', '100000')} -P 32 -d 4096 -c 4".split()


def refusals(table) -> list[dict[str, str]]:
    return [
        {"function": r.function, "reason": r.reason, "detail": r.detail} for r in table.consts[0].refusals
    ]


def same_spans(a, b) -> bool:
    """Two tables of one perf-const place the same spans with the same range (timings, paths aside)."""

    def key(t):
        c = t.consts[0]
        spans = [(s.function, s.start, s.end, s.expected, s.patch, s.trampoline) for s in c.spans]
        return t.binary.build_id, spans, c.min_value, c.max_value, c.multiple_of, c.power_of_two

    return key(a) == key(b)


def analysis(stock: Path, out_dir: Path) -> tuple[dict, Path]:
    """The scope table analyzed afresh (the builds are cached) and written to `out_dir`, and what
    it found; the whole-program variant's refusals too."""
    t0 = time.monotonic()
    table = analyze(live.spec())
    seconds = time.monotonic() - t0
    path = out_dir / "iobuf.scope.json"
    path.write_text(table.to_json())
    c = table.consts[0]
    if table.binary.build_id != file_build_id(stock):
        raise RuntimeError("the analysis' stock-value build is not the stock binary (another build id)")
    whole = analyze(load_spec(HERE / "iobuf-global.toml"))
    out = {
        "binary_build_id": table.binary.build_id,
        "spans": [
            {
                "function": s.function,
                "start": s.start,
                "end": s.end,
                "patch": s.patch,
                "patch_reason": s.patch_reason,
                "state": s.state.text,
            }
            for s in c.spans
        ],
        "int3_spans": sum(s.patch == "int3" for s in c.spans),
        "refusals": refusals(table),
        "tunable": c.tunable,
        "range": [c.min_value, c.max_value],
        "analysis_values": c.values,
        "notes": table.notes,
        "seconds_with_cached_builds": round(seconds, 1),
        "same_as_committed_table": same_spans(table, scope.load(live.SCOPE)),
        "whole_program": {
            "tunable": whole.consts[0].tunable,
            "refusals": refusals(whole),
            "notes": whole.notes,
        },
    }
    return out, path


def main() -> None:
    stock = live.stock_binary()
    work = Path(tempfile.mkdtemp(prefix="xtune-redis-"))
    found, table = analysis(stock, work)
    rebuilt = {v: live.rebuilt(v) for v in VALUES}
    env = {**os.environ, "XTUNE_SIE_STATE": str(work / "sie")}
    x = Xrtd(work).start()
    sie = server.Server(stock, work / "sie-server")
    cli = live.SieCli(sie.pid, x.socket, env)
    checks: dict[str, dict] = {}
    rps: dict[str, dict[str, list[float]]] = {str(v): {"sie": [], "rebuilt": []} for v in VALUES}
    try:
        before = golden.run(sie.port)
        cli.attach(table)
        for v in VALUES:
            t0 = time.monotonic()
            cli.set(CONST, v)
            set_ms = (time.monotonic() - t0) * 1e3
            got = golden.run(sie.port)
            ref = server.Server(rebuilt[v], work / f"rebuilt-{v}")
            try:
                want = golden.run(ref.port)
            finally:
                ref.stop()
            checks[str(v)] = {
                "equal": got == want,
                "sie": got,
                "rebuilt": want,
                "set_ms": round(set_ms, 1),
                "analysis_build": v in found["analysis_values"],
            }
        for rep in range(REPS):
            # Rotate the order so that no value always runs first (warm-up, other tenants' load).
            order = VALUES[rep % len(VALUES) :] + VALUES[: rep % len(VALUES)]
            for v in order:
                cli.set(CONST, v)
                rps[str(v)]["sie"].append(server.benchmark(sie.port, LOAD))
                ref = server.Server(rebuilt[v], work / f"rebuilt-{v}")
                try:
                    rps[str(v)]["rebuilt"].append(server.benchmark(ref.port, LOAD))
                finally:
                    ref.stop()
        status = json.loads(cli.status())
        cli.detach()
        after = golden.run(sie.port)
        detached_rps = [server.benchmark(sie.port, LOAD) for _ in range(REPS)]
    finally:
        sie.stop()
        x.cleanup()
    stock_rps = mean_ci95(rps[str(STOCK)]["rebuilt"])["mean"]
    throughput = {
        v: {
            kind: {**mean_ci95(xs), "samples": xs, "over_stock": round(mean_ci95(xs)["mean"] / stock_rps, 3)}
            for kind, xs in r.items()
        }
        for v, r in rps.items()
    }
    result = {
        "program": "redis-server 7.0.15, Debian 12 source package 5:7.0.15-1~deb12u7, the package's flags",
        "constant": CONST,
        "stock_value": STOCK,
        "machine": "2 shared cores, Linux Firecracker VM; SIE and rebuilt servers interleaved in one run",
        "analysis": found,
        "golden": {
            "all_equal": all(c["equal"] for c in checks.values()),
            "values": checks,
            "stock_before_attach": before,
            "after_detach_equals_before": after == before,
        },
        "throughput": {
            "load": "redis-benchmark " + " ".join(LOAD),
            "repetitions": REPS,
            "rps": throughput,
            "stock_after_detach": {**mean_ci95(detached_rps), "samples": detached_rps},
        },
        "final_status": status,
    }
    write_result("real_redis", result, SOURCES)
    print(json.dumps({k: v for k, v in result.items() if k != "golden"}, indent=1))
    print("golden all equal:", result["golden"]["all_equal"])


if __name__ == "__main__":
    main()
