"""The key-value case: redis-server (Debian's, stock config) loaded by redis-benchmark over a veth pair.
The paper's database profile is its contender (a key-value store is the database server here)."""

from cases.case import SLO_DIR, Case

CASE = Case(
    name="kv",
    server="redis",
    port=6379,
    bo_file=SLO_DIR / "case-kv-bo.yaml",
    paper_file=SLO_DIR / "paper-database-static.yaml",
    p99="bench.get_p99_ms",
    load=lambda quick: {"REQUESTS": "20000" if quick else "100000"},
)
