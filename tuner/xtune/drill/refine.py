"""The drill, KernInst's successive refinement: measure a function of a running process, find its
callees in its machine code, measure them beside it, and go on into the callee holding the largest
share of its time. Probes exist only while a measurement runs; afterwards the process's code is
read back to check that no probe is left.

A callee's share is its concurrency over the parent's, measured in the same window (Little's law:
concurrency = calls/s × mean latency, i.e. thread-seconds per second). Two things inflate it, and
the drill says so rather than hide them:
- uprobes count every call in the process: a callee also called from outside the parent shows
  more time than it spends inside the parent;
- a uprobe pair costs microseconds per call (a trap at entry and one at return), which lands in
  the parent's time and, mostly, in the callee's own. calibrate.py measures that cost on this host
  once per drill; `share_net` takes the part inside the callee's latency off each of its calls
  and leaves the parent as measured (its time still holds the probes' cost), so it errs low. A
  callee whose mean latency is below twice that part gets no net figure. The drill refines into the
  callee with the largest `share_net`, and stops where none has one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from xtune.drill.calibrate import ProbeCost, probe_cost
from xtune.drill.callees import Callee, NotFollowed, callees
from xtune.drill.image import DrillError, Symbol
from xtune.drill.measure import MAX_PROBES, Probe, ProbeRefused, Stats, measure
from xtune.drill.process import Process

CHECK_BYTES = 16  # bytes compared at each probed function's start after the drill
INT3 = 0xCC


@dataclass
class Node:
    function: str
    file: str
    stats: Stats
    share: float | None = None  # of the parent's time, in the same window; None for the root
    share_net: float | None = None  # the same, less the probes' cost per call (see above)
    call_sites: int = 0
    callees: list[Node] = field(default_factory=list)
    not_followed: list[NotFollowed] = field(default_factory=list)
    not_probed: list[dict[str, str]] = field(default_factory=list)
    refined: bool = False  # the drill went on into this callee

    def to_json(self) -> dict[str, Any]:
        out = {"function": self.function, "file": self.file, **asdict(self.stats), "share": self.share}
        out["share_net"] = self.share_net
        if self.call_sites:
            out["call_sites"] = self.call_sites
        out["refined"] = self.refined
        out["callees"] = [c.to_json() for c in self.callees]
        out["not_followed"] = [asdict(n) for n in self.not_followed]
        out["not_probed"] = self.not_probed
        return out


@dataclass
class Drill:
    pid: int
    exe: str
    seconds: float
    depth: int
    root: Node | None = None
    probed: list[tuple[str, Symbol]] = field(default_factory=list)
    probes_left: list[str] = field(default_factory=list)
    code_differs: list[str] = field(default_factory=list)
    pid_alive_after: bool = False
    cost: ProbeCost | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "pid": self.pid, "exe": self.exe, "seconds_per_measurement": self.seconds, "depth": self.depth,
            "units": {"calls_per_s": "calls/s", "concurrency": "threads", "latency_p50_us": "µs",
                      "latency_p99_us": "µs", "share": "fraction of the parent's thread-seconds",
                      "share_net": "fraction, the probes' cost taken off", "probe_cost": "µs per call"},
            "root": self.root.to_json() if self.root else None,
            "path": [n.function for n in self.path()],
            "probe_cost": None if self.cost is None else
                {"caller_us": self.cost.caller_s * 1e6, "inside_us": self.cost.inside_s * 1e6},
            "after": {"functions_probed": len({(p, s.vaddr) for p, s in self.probed}),
                      "probes_left": self.probes_left, "code_differs": self.code_differs,
                      "pid_alive": self.pid_alive_after},
        }  # fmt: skip

    def path(self) -> list[Node]:
        """The root and each callee the drill refined into."""
        out, node = [], self.root
        while node is not None:
            out.append(node)
            node = next((c for c in node.callees if c.refined), None)
        return out


Progress = Callable[[str], None]


def drill(pid: int, function: str, depth: int, seconds: float, progress: Progress = lambda _: None) -> Drill:
    """Drill from `function` down `depth` levels; the returned Drill says what was left in the process."""
    if depth < 0 or seconds <= 0:
        raise DrillError(f"--depth must be ≥ 0 and --seconds > 0 (got {depth}, {seconds:g})")
    proc = Process(pid)
    result = Drill(pid, proc.exe, seconds, depth)
    try:
        path, sym = _root(proc, function)
        progress(f"measuring {function} in pid {pid} ({path}) for {seconds:g} s")
        stats = _measure(proc, result, [(function, path, sym)], seconds)[function]
        if not stats.calls_per_s:
            raise DrillError(
                f"pid {pid} did not call {function} in {seconds:g} s: drill a process under load"
            )
        result.root = node = Node(function, path, stats)
        sym_of = {id(node): sym}
        if depth:
            progress("measuring what a probe costs on this host (1 s)")
            result.cost = cost = probe_cost()
        for _ in range(depth):
            nxt = _expand(proc, result, node, sym_of[id(node)], seconds, cost, progress)
            if nxt is None:
                break
            nxt[0].refined = True
            node, sym_of[id(nxt[0])] = nxt
    finally:
        _check_after(proc, result)
    return result


def _root(proc: Process, function: str) -> tuple[str, Symbol]:
    hit = proc.defining(function)
    if hit is not None:
        return hit
    proc.image(proc.exe).function(function)  # raises the reason for the executable (stripped, absent)
    raise DrillError(f"pid {proc.pid}: {function!r} is not exported by any library it maps either")


def _expand(
    proc: Process,
    result: Drill,
    parent: Node,
    parent_sym: Symbol,
    seconds: float,
    cost: ProbeCost,
    progress: Progress,
) -> tuple[Node, Symbol] | None:
    """Measure `parent`'s callees beside it; the callee with the largest share to refine into."""
    found, parent.not_followed = callees(proc, parent.file, parent_sym)
    ancestors = {(n.file, n.function) for n in result.path()}
    todo = []
    for c in found:
        if c.name == parent.function:  # another file's function of that name: one signal name for two
            parent.not_probed.append({"function": c.name, "file": c.path, "reason": "named as its caller"})
        elif (c.path, c.name) not in ancestors:
            todo.append(c)
    batches = _batches(todo)
    syms: dict[int, Symbol] = {}
    for i, batch in enumerate(batches):
        progress(
            f"{parent.function}: measuring callees {', '.join(c.name for c in batch)} "
            f"({i + 1}/{len(batches)}, {seconds:g} s)"
        )
        while batch:
            try:
                got = _measure(
                    proc, result, [(parent.function, parent.file, parent_sym)]
                    + [(c.name, c.path, c.symbol) for c in batch], seconds,
                )  # fmt: skip
                break
            except ProbeRefused as e:
                if e.probe.name == parent.function:
                    raise
                parent.not_probed.append({"function": e.probe.name, "file": e.probe.path, "reason": e.reason})
                batch = [c for c in batch if c.name != e.probe.name]
        if not batch:
            continue
        # In the same window: each callee less the part of its probes inside its own latency, against
        # the parent as measured; a callee whose mean latency is not at least twice that part gets
        # no net figure (its own time is lost in the probes' cost).
        base = got[parent.function].concurrency
        for c in batch:
            s = got[c.name]
            child = Node(c.name, c.path, s, s.concurrency / base if base else None, call_sites=c.sites)
            mean = s.concurrency / s.calls_per_s if s.calls_per_s else 0.0
            if mean >= 2 * cost.inside_s and base > 0:
                child.share_net = (s.concurrency - s.calls_per_s * cost.inside_s) / base
            parent.callees.append(child)
            syms[id(child)] = c.symbol
    parent.callees.sort(key=lambda n: (-(n.share_net or 0.0), -(n.share or 0.0)))
    best = next((n for n in parent.callees if n.share_net), None)
    return (best, syms[id(best)]) if best is not None else None


def _batches(todo: list[Callee]) -> list[list[Callee]]:
    """Groups of at most MAX_PROBES - 1 callees (the parent takes a slot), names distinct within one."""
    out: list[list[Callee]] = []
    for c in todo:
        slot = next((b for b in out if len(b) < MAX_PROBES - 1 and c.name not in {x.name for x in b}), None)
        if slot is None:
            out.append(slot := [])
        slot.append(c)
    return out


def _measure(
    proc: Process, result: Drill, funcs: list[tuple[str, str, Symbol]], seconds: float
) -> dict[str, Stats]:
    result.probed += [(path, sym) for _, path, sym in funcs]
    stats = measure(proc.pid, [Probe(name, proc.path_of(path)) for name, path, _ in funcs], seconds)
    if not proc.alive():
        raise DrillError(f"pid {proc.pid} exited during the drill")
    return stats


def _check_after(proc: Process, result: Drill) -> None:
    """Read each probed function's first bytes from the process: a uprobe shows as int3 there."""
    result.pid_alive_after = proc.alive()
    if not result.pid_alive_after:
        return
    for path, sym in dict.fromkeys(result.probed):
        n = min(CHECK_BYTES, sym.size)
        live = proc.read_code(path, sym, n)
        want = proc.image(path).code(sym)[:n]
        if live is None or live == want:
            continue
        where = f"{sym.name} in {path}"
        (result.probes_left if live[0] == INT3 != want[0] else result.code_differs).append(where)
