"""The web case: nginx (Debian's, stock config) served to wrk over a veth pair."""

from cases.case import SLO_DIR, Case

CASE = Case(
    name="web",
    server="nginx",
    port=80,
    bo_file=SLO_DIR / "case-web-bo.yaml",
    paper_file=SLO_DIR / "paper-web-static.yaml",
    p99="bench.latency_p99_ms",
    load=lambda quick: {"SECONDS": "1" if quick else "4"},
)
