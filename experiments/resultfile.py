"""Benchmark results as JSON with their provenance.

`write_result` stores a benchmark's measured data in experiments/results/<name>.json together
with where it came from: the git tree hash of the sources it measured (so a later change to those
sources shows the figures as stale), whether those sources had uncommitted changes, and the host
facts detected at run time (never written in by hand). `scripts/check-figures` reads them back.

Every benchmark imports this module, and importing it makes SIGTERM and SIGHUP unwind the stack
as Ctrl-C does (`xtune.host.termination`): a benchmark stopped by `timeout` or a closed terminal
runs its `finally` blocks, so it leaves no namespace, load process or daemon behind to disturb the
next measurement.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from xtune.host.termination import unwind_on_termination

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "experiments" / "results"

if threading.current_thread() is threading.main_thread():
    unwind_on_termination()


def _git(*args: str) -> str:
    out = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed: {out.stderr.strip()}")
    return out.stdout.strip()


def source_tree(sources: list[str]) -> str:
    """One hash for the committed state of `sources` (paths relative to the checkout): the sha1 of
    the git object ids of every file under them at HEAD except Markdown, so it changes when any
    measured file changes and not when a README quoting the figures is regenerated."""
    if not sources:
        raise ValueError("sources is empty: name the paths the benchmark measures")
    for src in sorted(set(sources)):
        if not (ROOT / src).exists():
            raise FileNotFoundError(f"source path {src!r} does not exist under {ROOT}")
        if not _git("ls-tree", "HEAD", "--", src):
            raise RuntimeError(f"source path {src!r} is not committed")
    listing = _git("ls-tree", "-r", "HEAD", "--", *sorted(set(sources))).splitlines()
    return hashlib.sha1("\n".join(x for x in listing if _measured(x)).encode()).hexdigest()


def sources_dirty(sources: list[str]) -> bool:
    """True when any of `sources` differs from HEAD (uncommitted or untracked changes), Markdown aside."""
    return any(_measured(x) for x in _git("status", "--porcelain", "--", *sources).splitlines())


def committed_files(under: str, excluding: tuple[str, ...]) -> list[str]:
    """The committed files under `under` except those under any of `excluding` (paths relative to
    the checkout): a benchmark's sources when a folder also holds tests that do not affect it."""
    files = _git("ls-files", "--", under).splitlines()
    return [f for f in files if not any(f == x or f.startswith(x.rstrip("/") + "/") for x in excluding)]


def _measured(line: str) -> bool:
    """Documentation beside the code quotes the figures; it is not what was measured."""
    return not line.rstrip().endswith(".md")


def memory_bytes() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("/proc/meminfo has no MemTotal line")


def host_facts() -> dict[str, Any]:
    from xtune.host.pmu import pmu_available  # here: scripts/check-figures loads this file without xtune

    pmu, how = pmu_available()
    return {
        "cpus": os.cpu_count(),
        "kernel": platform.release(),
        "machine": platform.machine(),
        "memory_bytes": memory_bytes(),
        "pmu": pmu,
        "pmu_detected_by": how,
    }


def provenance(sources: list[str]) -> dict[str, Any]:
    """The sources' tree hash, or (so a long run's data is never lost) null and the reason when a
    source is not committed; scripts/check-figures then warns that the figures are unattributed."""
    out: dict[str, Any] = {"sources": sorted(set(sources))}
    try:
        out["tree"], out["dirty"] = source_tree(sources), sources_dirty(sources)
    except (FileNotFoundError, RuntimeError) as e:
        print(f"resultfile: no tree hash for {sources}: {e}", file=sys.stderr)
        out.update(tree=None, dirty=True, tree_error=str(e))
    out["host"] = host_facts()
    return out


def result_path(name: str) -> Path:
    if not name or "/" in name or name.startswith("."):
        raise ValueError(f"result name {name!r} must be a plain file name without extension")
    return RESULTS / f"{name}.json"


def write_result(name: str, data: dict, sources: list[str]) -> Path:
    """Write experiments/results/<name>.json: `data` plus its "provenance"."""
    if "provenance" in data:
        raise ValueError("data already has a 'provenance' key: write_result adds it")
    path = result_path(name)
    out = {**data, "provenance": provenance(sources)}
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(out, indent=1) + "\n")
    tmp.replace(path)
    return path


def read_result(name: str) -> dict[str, Any]:
    """The stored result `name` (with its "provenance" when a benchmark wrote it through write_result)."""
    return json.loads(result_path(name).read_text())
