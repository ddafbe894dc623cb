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
from real.retune import golden_checks, golden_summary, interleaved, throughput, with_process
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
    "experiments/real/debian-source.sh",
    "experiments/real/retune.py",
    "experiments/real/process.py",
    "tuner/xtune/sie",
    "runtime/sie",
    "runtime/xrtd",
]
REPS = int(os.environ.get("XTUNE_ZLIB_REPS", "5"))
SECONDS = int(os.environ.get("XTUNE_ZLIB_SECONDS", "8"))
STOCK = 4096
VALUES = [STOCK, 256, 1, 8192, 32]  # set live in this order; 256 and 32 no analysis build used
LOAD_FILE = "text-256k.txt"


def comparable(table: scope.ScopeTable) -> dict:
    """The table without what differs between runs of one analysis (its time, the paths)."""
    d = json.loads(table.to_json())
    d.pop("analysis_seconds")
    d["binary"].pop("path")
    for c in d["consts"]:
        c["source"].pop("file")  # relative to where the analysis ran
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
    try:
        before = golden.run(sie.port, docroot)
        cli.attach(table)
        load = f"/{LOAD_FILE}"

        def on_rebuilt(v, use):
            return with_process(lambda: server.Server(rebuilt[v], docroot, work / f"rebuilt-{v}"), use)

        checks = golden_checks(
            cli,
            live.CONST,
            VALUES,
            found["analysis_values"],
            lambda: golden.run(sie.port, docroot),
            lambda v: on_rebuilt(v, lambda ref: golden.run(ref.port, docroot)),
        )
        rps = interleaved(
            cli,
            live.CONST,
            VALUES,
            REPS,
            lambda: server.benchmark(sie.port, load, SECONDS),
            lambda v: on_rebuilt(v, lambda ref: server.benchmark(ref.port, load, SECONDS)),
        )
        status = json.loads(cli.status())
        cli.detach()
        after = golden.run(sie.port, docroot)
        detached_rps = [server.benchmark(sie.port, load, SECONDS) for _ in range(REPS)]
    finally:
        sie.stop()
        x.cleanup()
    by_value = throughput(rps, STOCK)
    for v, stats in by_value.items():
        stats["gzip_bytes"] = checks[v]["rebuilt"][LOAD_FILE]["gzip_bytes"]
    result = {
        "program": "nginx 1.22.1 (Debian 12 binary, one process, gzip level 6) with libz.so.1 built from "
        "Debian 12's zlib source package 1:1.2.13.dfsg-1 with the package's flags",
        "machine": "2 shared cores, Linux Firecracker VM; SIE and rebuilt libraries interleaved in one run",
        "const": live.CONST,
        "stock_value": STOCK,
        "analysis": found,
        "golden": golden_summary(checks, before, after),
        "throughput": {
            "load": f"wrk -t1 -c4 -d{SECONDS}s -H 'Accept-Encoding: gzip' /{LOAD_FILE}",
            "file_bytes": golden.FILES[LOAD_FILE],
            "seconds": SECONDS,
            "repetitions": REPS,
            "rps": by_value,
            "stock_after_detach": {**mean_ci95(detached_rps), "samples": detached_rps},
        },
        "final_status": status,
    }
    write_result("real_zlib", result, SOURCES)
    print(json.dumps({k: v for k, v in result.items() if k != "golden"}, indent=1))
    print("golden all equal:", result["golden"]["all_equal"])


if __name__ == "__main__":
    main()
