"""The block case: fio (Debian's) on a loop device over a file on the host's disk, no server.
Its contenders set the loop device's queue attributes and vm.* sysctls (what reaches block I/O
through the page cache); the paper's database profile is read for its vm.* rows."""

from cases.case import SLO_DIR, Case

CASE = Case(
    name="block",
    bo_file=SLO_DIR / "case-block-bo.yaml",
    paper_file=SLO_DIR / "paper-database-static.yaml",
    p99="bench.rand_read_p99_ms",
    load=lambda quick: {"SECONDS": "1" if quick else "2"},
    # network-throughput and network-latency add only net.* rows to the first two: the same here.
    tuned_profiles=("throughput-performance", "latency-performance", "virtual-guest"),
    reach=("vm.",),
)
