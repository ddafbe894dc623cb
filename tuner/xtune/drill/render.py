"""A drill's JSON as a tree of text lines, with units: what `xtune drill` prints and the case
study's page shows."""

from __future__ import annotations

from typing import Any


def _num(v: float | None, unit: str) -> str:
    if v is None:
        return "-"
    return f"{v:,.0f} {unit}" if v >= 100 else f"{v:.3g} {unit}"


def node_line(n: dict[str, Any], micro: str = "µs") -> str:
    share = ""
    if n["share"] is not None:
        raw = f"{100 * n['share']:.1f} %"
        if n["share_net"] is None:
            share = f"{raw} of caller's time, mostly its probes' cost  "
        else:
            share = f"{100 * n['share_net']:.1f} % of caller's time ({raw} with its probes' cost)  "
    return (
        f"{n['function']}  {share}{_num(n['calls_per_s'], 'calls/s')}  "
        f"concurrency {n['concurrency']:.3f} threads  "
        f"p50 {_num(n['latency_p50_us'], micro)}  p99 {_num(n['latency_p99_us'], micro)}"
    )


def tree_lines(drill: dict[str, Any], ascii: bool = False, all_callees: bool = True) -> list[str]:
    """The root, every measured callee under each refined node (refined ones marked `>`), and what
    was not followed, as counts; `all_callees=False` keeps only each level's top three."""
    tee, last, bar = ("|- ", "`- ", "|  ") if ascii else ("├─ ", "└─ ", "│  ")
    micro = "us" if ascii else "µs"
    root = drill["root"]
    lines = [f"{node_line(root, micro)}  [{root['file']}]"]

    def walk(n: dict[str, Any], indent: str) -> None:
        kids = n["callees"] if all_callees else n["callees"][:3]
        notes = []
        if n["not_followed"]:
            notes.append(f"{len(n['not_followed'])} call sites not followed (indirect, unresolved or IFUNC)")
        if len(kids) < len(n["callees"]):
            notes.append(f"{len(n['callees']) - len(kids)} smaller callees")
        for i, k in enumerate(kids):
            end = i == len(kids) - 1 and not notes
            mark = "> " if k["refined"] else ""
            lines.append(indent + (last if end else tee) + mark + node_line(k, micro))
            if k["refined"]:
                walk(k, indent + ("   " if end else bar))
        for j, note in enumerate(notes):
            lines.append(indent + (last if j == len(notes) - 1 else tee) + f"({note})")

    walk(root, "")
    return lines
