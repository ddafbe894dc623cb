"""Debian 12's redis-server retuned live: PROTO_IOBUF_LEN (the client read path's buffer size) and
PROTO_REPLY_CHUNK_BYTES (the reply buffer), each as networking.c sees it.

In one run, per constant: build the stock server from the Debian source package
(experiments/real/redis), analyze the constant afresh (the builds are cached; the table is compared
with the committed one; the whole-program variant, every unit rebuilt, is analyzed for its
refusals), start the stock binary, attach through a private xrtd (`xtune sie attach`), and for
each value V' (some no analysis build used) set it live and check that the golden workload
(experiments/real/redis/golden.py) answers exactly as the server rebuilt with V' does; then
redis-benchmark throughput of the retuned server and of the rebuilt one, interleaved, over
repetitions with 95 % CIs. Run under `flock /tmp/xtune-heavy.lock` (builds and timing).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from real.redis import golden, live, server
from real.retune import golden_checks, golden_summary, interleaved, throughput, with_process
from resultfile import write_result
from xtune.sie import scope
from xtune.sie.analyze import analyze
from xtune.sie.elfcode import file_build_id
from xtune.testing.stats import mean_ci95
from xtune.testing.xrtd import Xrtd

ROOT = Path(__file__).resolve().parents[1]
HERE = ROOT / "experiments" / "real" / "redis"

SOURCES = [
    "experiments/bench_real_redis.py",
    "experiments/real/redis",
    "experiments/real/debian-source.sh",
    "experiments/real/retune.py",
    "experiments/real/process.py",
    "tuner/xtune/sie",
    "runtime/sie",
    "runtime/xrtd",
]
REPS = int(os.environ.get("XTUNE_REDIS_REPS", "3"))
N = int(os.environ.get("XTUNE_REDIS_REQUESTS", "100000"))


@dataclass
class Case:
    spec: str  # experiments/real/redis/<spec>.toml
    const: str
    stock: int
    values: list[int]  # set live in this order (the stock value first); some no analysis build used
    load: list[str]  # redis-benchmark arguments; the last CSV row is the figure
    whole: str = ""  # the spec with every unit rebuilt, analyzed for its refusals


CASES = [
    # Pipelined 4 KiB SETs from 4 clients: each read brings many commands, so the read size matters.
    Case("iobuf", "PROTO_IOBUF_LEN", 16384, [16384, 4096, 40960, 12000, 2048],
         f"-t set -n {N} -P 32 -d 4096 -c 4".split(), whole="iobuf-global"),
    # 16 KiB GET replies, pipelined: the reply buffer and the reply list's node size.
    Case("reply", "PROTO_REPLY_CHUNK_BYTES", 16384, [16384, 4096, 65536, 12000, 2048],
         f"-t set,get -n {N // 2} -P 16 -d 16384 -c 4".split()),
]  # fmt: skip


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


def analysis(case: Case, stock: Path, out_dir: Path) -> tuple[dict, Path]:
    """The scope table analyzed afresh (the builds are cached) and written to `out_dir`, and what
    it found; the whole-program variant's refusals too."""
    t0 = time.monotonic()
    table = analyze(live.spec(case.spec))
    seconds = time.monotonic() - t0
    path = out_dir / f"{case.spec}.scope.json"
    path.write_text(table.to_json())
    c = table.consts[0]
    if table.binary.build_id != file_build_id(stock):
        raise RuntimeError("the analysis' stock-value build is not the stock binary (another build id)")
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
        "span_count": len(c.spans),
        "int3_spans": sum(s.patch == "int3" for s in c.spans),
        "refusals": refusals(table),
        "tunable": c.tunable,
        "range": [c.min_value, c.max_value],
        "analysis_values": c.values,
        "notes": table.notes,
        "seconds_with_cached_builds": round(seconds, 1),
        "same_as_committed_table": same_spans(table, scope.load(live.scope_path(case.spec))),
    }
    if case.whole:
        whole = analyze(live.spec(case.whole))
        out["whole_program"] = {"tunable": whole.consts[0].tunable, "refusals": refusals(whole)}
    return out, path


def retune(case: Case, stock: Path, work: Path) -> dict:
    """The stock server attached through xrtd and set to each value: the golden workload against
    the rebuilt server, then throughput of both interleaved."""
    work.mkdir(parents=True)
    found, table = analysis(case, stock, work)
    if not found["tunable"]:
        return {"stock_value": case.stock, "analysis": found}
    rebuilt = {v: live.rebuilt(case.spec, v) for v in case.values}
    env = {**os.environ, "XTUNE_SIE_STATE": str(work / "sie")}
    x = Xrtd(work).start()
    sie = server.Server(stock, work / "sie-server")
    cli = live.SieCli(sie.pid, x.socket, env)
    try:
        before = golden.run(sie.port)
        cli.attach(table)

        def on_rebuilt(v, use):
            return with_process(lambda: server.Server(rebuilt[v], work / f"rebuilt-{v}"), use)

        checks = golden_checks(
            cli,
            case.const,
            case.values,
            found["analysis_values"],
            lambda: golden.run(sie.port),
            lambda v: on_rebuilt(v, lambda ref: golden.run(ref.port)),
        )
        rps = interleaved(
            cli,
            case.const,
            case.values,
            REPS,
            lambda: server.benchmark(sie.port, case.load),
            lambda v: on_rebuilt(v, lambda ref: server.benchmark(ref.port, case.load)),
        )
        status = json.loads(cli.status())
        cli.detach()
        after = golden.run(sie.port)
        detached_rps = [server.benchmark(sie.port, case.load) for _ in range(REPS)]
    finally:
        sie.stop()
        x.cleanup()
    return {
        "stock_value": case.stock,
        "analysis": found,
        "golden": golden_summary(checks, before, after),
        "throughput": {
            "load": "redis-benchmark " + " ".join(case.load),
            "repetitions": REPS,
            "rps": throughput(rps, case.stock),
            "stock_after_detach": {**mean_ci95(detached_rps), "samples": detached_rps},
        },
        "final_status": status,
    }


def main() -> None:
    stock = live.stock_binary()
    work = Path(tempfile.mkdtemp(prefix="xtune-redis-"))
    consts = {c.const: retune(c, stock, work / c.spec) for c in CASES}
    result = {
        "program": "redis-server 7.0.15, Debian 12 source package 5:7.0.15-1~deb12u7, the package's flags",
        "machine": "2 shared cores, Linux Firecracker VM; SIE and rebuilt servers interleaved in one run",
        "consts": consts,
    }
    write_result("real_redis", result, SOURCES)
    for name, c in consts.items():
        print(name, json.dumps({k: v for k, v in c.items() if k != "golden"}, indent=1))
        print(name, "golden all equal:", c.get("golden", {}).get("all_equal"))


if __name__ == "__main__":
    main()
