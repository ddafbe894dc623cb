"""Debian 12's libz.so.1 retuned live inside a running nginx: TOO_FAR (deflate_slow's distance
limit for 3-byte matches).

In one run: build the stock library from the Debian source package (experiments/real/zlib),
analyze the constant afresh (the builds are cached; the table is compared with the committed
one), start Debian's nginx (one process, gzip level 6) with the stock library, attach through a
private xrtd (`xtune sie attach`), and for each value V' (some no analysis build used) set it live
and check that the golden workload (experiments/real/zlib/golden.py) gets the gzip bytes that an
nginx with the library rebuilt with V' sends; then wrk throughput of gzip'd GETs from the retuned
nginx and from the rebuilt one, interleaved, over repetitions with 95 % CIs. Run under
`flock /tmp/xtune-heavy.lock` (builds and timing).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

from real.redis.live import SieCli
from real.zlib import golden, live, server
from resultfile import write_result
from xtune.sie import scope
from xtune.sie.analyze import analyze
from xtune.sie.elfcode import file_build_id
from xtune.testing.stats import mean_ci95
from xtune.testing.xrtd import Xrtd

SOURCES = [
    "experiments/bench_real_zlib.py",
    "experiments/real/zlib",
    "experiments/real/redis/live.py",
    "experiments/real/redis/server.py",
    "tuner/xtune/sie",
    "runtime/sie",
    "runtime/xrtd",
]
REPS = int(os.environ.get("XTUNE_ZLIB_REPS", "3"))
SECONDS = int(os.environ.get("XTUNE_ZLIB_SECONDS", "5"))
STOCK = 4096
VALUES = [STOCK, 256, 1, 8192, 32]  # set live in this order; 256 and 32 no analysis build used
LOAD_FILE = "text-256k.txt"


def comparable(table: scope.ScopeTable) -> dict:
    """The table without what differs between runs of one analysis (its time, the build's path)."""
    d = json.loads(table.to_json())
    d.pop("analysis_seconds")
    d["binary"].pop("path")
    return d


def analysis(stock: Path, out_dir: Path) -> tuple[dict, Path]:
    """The scope table analyzed afresh (the builds are cached), written to `out_dir`, and what it found."""
    t0 = time.monotonic()
    table = analyze(live.spec())
    seconds = time.monotonic() - t0
    path = out_dir / "toofar.scope.json"
    path.write_text(table.to_json())
    c = table.consts[0]
    if table.binary.build_id != file_build_id(stock):
        raise RuntimeError("the analysis' stock-value build is not the stock library (another build id)")
    return {
        "binary_build_id": table.binary.build_id,
        "library": table.binary.library,
        "spans": [
            {"function": s.function, "start": s.start, "end": s.end, "patch": s.patch, "state": s.state.text}
            for s in c.spans
        ],
        "span_count": len(c.spans),
        "int3_spans": sum(s.patch == "int3" for s in c.spans),
        "refusals": [{"function": r.function, "reason": r.reason} for r in c.refusals],
        "tunable": c.tunable,
        "range": [c.min_value, c.max_value],
        "analysis_values": c.values,
        "notes": table.notes,
        "seconds_with_cached_builds": round(seconds, 1),
        "same_as_committed_table": comparable(table) == comparable(scope.load(live.SCOPE)),
    }, path


def main() -> None:
    stock = live.stock_library()
    work = Path(tempfile.mkdtemp(prefix="xtune-zlib-"))
    docroot = work / "doc"
    golden.write_files(docroot)
    found, table = analysis(stock, work)
    if not found["tunable"]:
        raise SystemExit(f"TOO_FAR is not tunable any more: {found['refusals']}")
    rebuilt = {v: live.rebuilt(v) for v in VALUES}
    env = {**os.environ, "XTUNE_SIE_STATE": str(work / "sie")}
    x = Xrtd(work).start()
    sie = server.Server(stock, docroot, work / "sie-server")
    cli = SieCli(sie.pid, x.socket, env)
    checks: dict[str, dict] = {}
    rps: dict[str, dict[str, list[float]]] = {str(v): {"sie": [], "rebuilt": []} for v in VALUES}
    try:
        before = golden.run(sie.port, docroot)
        cli.attach(table)
        for v in VALUES:
            t0 = time.monotonic()
            cli.set(live.CONST, v)
            set_ms = (time.monotonic() - t0) * 1e3
            got = golden.run(sie.port, docroot)
            ref = server.Server(rebuilt[v], docroot, work / f"rebuilt-{v}")
            try:
                want = golden.run(ref.port, docroot)
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
                cli.set(live.CONST, v)
                rps[str(v)]["sie"].append(server.benchmark(sie.port, f"/{LOAD_FILE}", SECONDS))
                ref = server.Server(rebuilt[v], docroot, work / f"rebuilt-{v}-{rep}")
                try:
                    rps[str(v)]["rebuilt"].append(server.benchmark(ref.port, f"/{LOAD_FILE}", SECONDS))
                finally:
                    ref.stop()
        status = json.loads(cli.status())
        cli.detach()
        after = golden.run(sie.port, docroot)
        detached_rps = [server.benchmark(sie.port, f"/{LOAD_FILE}", SECONDS) for _ in range(REPS)]
    finally:
        sie.stop()
        x.cleanup()
    stock_rps = mean_ci95(rps[str(STOCK)]["rebuilt"])["mean"]
    throughput = {}
    for v, r in rps.items():
        stats = {kind: {**mean_ci95(xs), "samples": xs} for kind, xs in r.items()}
        for kind in stats:
            stats[kind]["over_stock"] = round(stats[kind]["mean"] / stock_rps, 3)
        stats["sie_over_rebuilt"] = round(stats["sie"]["mean"] / stats["rebuilt"]["mean"], 3)
        stats["gzip_bytes"] = checks[v]["rebuilt"][LOAD_FILE]["gzip_bytes"]
        throughput[v] = stats
    result = {
        "program": "nginx 1.22.1 (Debian 12 binary, one process, gzip level 6) with libz.so.1 built from "
        "Debian 12's zlib source package 1:1.2.13.dfsg-1 with the package's flags",
        "machine": "2 shared cores, Linux Firecracker VM; SIE and rebuilt libraries interleaved in one run",
        "const": live.CONST,
        "stock_value": STOCK,
        "analysis": found,
        "golden": {
            "all_equal": all(c["equal"] for c in checks.values()),
            "checked": len(checks),
            "equal": sum(c["equal"] for c in checks.values()),
            "values": checks,
            "stock_before_attach": before,
            "after_detach_equals_before": after == before,
        },
        "throughput": {
            "load": f"wrk -t1 -c4 -d{SECONDS}s -H 'Accept-Encoding: gzip' /{LOAD_FILE}",
            "file_bytes": golden.FILES[LOAD_FILE],
            "repetitions": REPS,
            "rps": throughput,
            "stock_after_detach": {**mean_ci95(detached_rps), "samples": detached_rps},
        },
        "final_status": status,
    }
    write_result("real_zlib", result, SOURCES)
    print(json.dumps({k: v for k, v in result.items() if k != "golden"}, indent=1))
    print("golden all equal:", result["golden"]["all_equal"])


if __name__ == "__main__":
    main()
