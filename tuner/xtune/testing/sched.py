"""The scheduling of a process's threads as the kernel reports it, for tests and benchmarks."""

from __future__ import annotations

from pathlib import Path


def sched_fields(pid: int) -> dict[int, dict[str, int]]:
    """Per thread of `pid`: its /proc sched fields `policy` and `se.slice` (ns)."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        fields = {}
        for line in (task / "sched").read_text().splitlines():
            name, _, value = line.partition(":")
            if name.strip() in ("policy", "se.slice"):
                fields[name.strip()] = int(value.strip().split(".")[0])
        out[int(task.name)] = fields
    return out
