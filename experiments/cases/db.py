"""The database case: PostgreSQL (Debian's, a private cluster with initdb's stock config) loaded by
select-only pgbench over a veth pair. The paper's database profile is its contender, and besides
TuneD's four general profiles its postgresql profile: the one an operator of this server would
pick (it turns the scheduler's autogroups off, among its vm.* rows)."""

from cases.case import SLO_DIR, TUNED_PROFILES, Case

CASE = Case(
    name="db",
    server="postgres",
    port=5432,  # free by construction: the server namespace is fresh and holds only this cluster
    bo_file=SLO_DIR / "case-db-bo.yaml",
    paper_file=SLO_DIR / "paper-database-static.yaml",
    p99="bench.latency_p99_ms",
    load=lambda quick: {"SECONDS": "1" if quick else "2"},
    tuned_profiles=(*TUNED_PROFILES, "postgresql"),
)
