"""The key-value case: redis-server loaded by redis-benchmark over a veth pair. The paper's
database profile is its contender (a key-value store is the database server here).

The server, for every contender, is redis-server 7.0.15 built from Debian's source package with the
package's own flags (`experiments/real/redis/build.sh`, `live.stock_binary()`), with Debian's stock
config as servers.py runs it: SIE's scope table for `PROTO_IOBUF_LEN` (`iobuf.scope.json`) was
made from that exact binary and names its build id, and the engine refuses any other; the binary
Debian's package installs is a build of its own with another build id. The case refuses to start
when the binary's build id is not the table's (perf_const.py)."""

from real.redis import live

from cases.case import SLO_DIR, Case
from cases.perf_const import PerfConst

IOBUF = PerfConst(
    name="PROTO_IOBUF_LEN", knob="proto_iobuf_len", scope=live.scope_path("iobuf"), binary=live.stock_binary
)

CASE = Case(
    name="kv",
    server="redis",
    port=6379,
    bo_file=SLO_DIR / "case-kv-bo.yaml",
    paper_file=SLO_DIR / "paper-database-static.yaml",
    p99="bench.get_p99_ms",
    load=lambda quick: {"REQUESTS": "200000" if quick else "1000000"},
    perf_const=IOBUF,
)
