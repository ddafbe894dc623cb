"""The contenders measured in one run: each repetition visits every contender, in the order of a
row of a Williams design (run_order), so drift on the shared host spreads over all of them and no
contender always runs after the same one: whatever a run leaves behind (a warm cache, a queue
still draining) falls on every contender alike. TCP's per-destination metrics (the ssthresh, cwnd
and RTT a closed connection leaves for the next one to the same address) are emptied in every
namespace of the case before each run, so no run starts from the previous one's window.

Every value goes through xrtd (one transaction per contender; the keys a contender does not set
keep their defaults) and the server, if the case has one, restarts after each change (the accept
backlog is fixed at listen()). A contender that sets a perf-const has it armed in the new server
process through SIE for its run, and put back before the server stops (perf_const.py); a run
that cannot arm it fails, never runs stock in its place. A run whose metric is missing is
recorded as failed, not as zero. The observed defaults run with xobserve up (observed.py); a run
it did not see fails too.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Sequence

from xtune.config import expr
from xtune.config.schema import Benchmark, Knob
from xtune.host import netns
from xtune.knobs.actuator import Actuator
from xtune.knobs.table import KnobClient, KnobError
from xtune.tuning.benchmark import MetricMissing, run_benchmark

from cases.observed import NotObserved, Observer
from cases.perf_const import ArmingFailed, LiveConst
from cases.profiles import Contender, is_sysfs, key_of, scope, sysfs_choices, sysfs_value
from cases.servers import Server


def knobs_for(targets: list[str], server_netns: str | None) -> dict[str, Knob]:
    """One xrtd knob per sysctl field, in the namespace where the key lives, and per sysfs
    attribute (an enumerated one with its choices)."""
    out = {}
    for i, target in enumerate(sorted(targets)):
        name = f"k{i}_" + re.sub(r"[^a-z0-9]+", "_", target.lower()).strip("_")[:40]
        if is_sysfs(target):
            choices = sysfs_choices(target)
            if choices:
                out[target] = Knob(name=name, backend="sysfs", target=target, type="enum", values=choices)
            else:
                out[target] = Knob(name=name, backend="sysfs", target=target, range=(0, 2**62))
            continue
        where = scope(key_of(target)[0], server_netns)
        assert where is not None, target
        ns = netns.path(where.netns) if where.netns else None
        out[target] = Knob(name=name, backend="sysctl", target=target, netns=ns, range=(0, 2**62))
    return out


def refused(socket_path: str, knobs: dict[str, Knob]) -> dict[str, str]:
    """Targets xrtd will not register (a key read-only in a namespace, off the allow-list), with why."""
    out = {}
    client = KnobClient(socket_path)
    try:
        for target, k in knobs.items():
            lo, hi = k.range if k.range else (None, None)
            try:
                client.register(k.name, k.backend, k.target, min=lo, max=hi, enum=k.values, netns=k.netns)
                client.unregister(k.name)
            except KnobError as e:
                out[target] = str(e)
    finally:
        client.close()
    return out


def drop(contenders: list[Contender], targets: dict[str, str]) -> None:
    """Move the refused targets of every contender to its not-applicable list."""
    for c in contenders:
        for target, why in targets.items():
            if target in c.settings:
                value = c.settings.pop(target)
                c.not_applicable.append({"key": target, "value": str(value), "reason": f"xrtd: {why}"})


def defaults_of(targets: list[str], server_netns: str | None) -> dict[str, int | str]:
    """Each field's value as the host has it now (a fresh namespace or loop device: the kernel's
    defaults)."""
    out: dict[str, int | str] = {}
    for target in targets:
        if is_sysfs(target):
            value = sysfs_value(target)
            assert value is not None, target
            out[target] = value
            continue
        key, index = key_of(target)
        where = scope(key, server_netns)
        assert where is not None, target
        out[target] = where.fields[index or 0]
    return out


def probe(
    actuator: Actuator, knobs: dict[str, Knob], defaults: dict[str, int | str], contender: Contender
) -> None:
    """Each setting alone through xrtd: a value the kernel refuses moves to not_applicable."""
    for target, value in list(contender.settings.items()):
        if value == defaults[target]:
            continue
        try:
            actuator.apply({knobs[target].name: value}, f"probe {contender.name}")
        except KnobError as e:
            del contender.settings[target]
            contender.not_applicable.append({"key": target, "value": str(value), "reason": f"refused: {e}"})
        finally:
            actuator.apply({knobs[target].name: defaults[target]}, "probe: back to default")


def williams_rows(n: int) -> list[list[int]]:
    """The rows of a Williams design for n contenders: in the n rows (2n when n is odd) each
    contender runs right after every other one equally often. Row 0 is 0, 1, n-1, 2, n-2, ...;
    row i adds i to each (mod n); for odd n the rows reversed follow."""
    first, low, high = [0], 1, n - 1
    while len(first) < n:
        first.append(low)
        low += 1
        if len(first) < n:
            first.append(high)
            high -= 1
    rows = [[(x + i) % n for x in first] for i in range(n)]
    return rows + [row[::-1] for row in rows] if n % 2 else rows


def run_order(contenders: list[Contender], rep: int) -> list[Contender]:
    """The contenders in repetition `rep`'s order (a Williams row; they repeat past the last row)."""
    rows = williams_rows(len(contenders))
    return [contenders[i] for i in rows[rep % len(rows)]]


def forget_paths(namespaces: Sequence[str]) -> None:
    """Empty TCP's metrics cache in each namespace (a new connection would start from the window
    and RTT the previous run's connections to the same address left)."""
    for ns in namespaces:
        netns.run("ip", "-n", ns, "tcp_metrics", "flush", "all")


def perf_const_armed(
    live: LiveConst | None, server: Server | None, c: Contender, rep: int
) -> contextlib.AbstractContextManager[None]:
    """The contender's perf-const armed in the server process just started (interleave)."""
    if live is None or server is None or server.proc is None or set(c.perf_consts) != {live.const.knob}:
        have = live.const.knob if live else "none"
        raise ArmingFailed(f"{c.name} sets {sorted(c.perf_consts)}; this case's server takes {have}")
    value = c.perf_consts[live.const.knob]
    return live.armed(server.proc.pid, value, f"case contender {c.name}, repetition {rep + 1}")


def interleave(
    actuator: Actuator,
    knobs: dict[str, Knob],
    defaults: dict[str, int | str],
    contenders: list[Contender],
    server: Server | None,
    bench: Benchmark,
    objective: str,
    reps: int,
    progress: Callable[[str], None] = print,
    live: LiveConst | None = None,
    observer: Observer | None = None,
    namespaces: Sequence[str] = (),
) -> dict[str, list[dict]]:
    """Each contender's runs; `live`: the case's perf-const, armed for the contenders that set it;
    `observer`: xobserve, for the contender measured under it; `namespaces`: the case's, whose
    TCP metrics are emptied before each run. Each run records the contender it followed."""
    node = expr.parse(objective)
    runs: dict[str, list[dict]] = {c.name: [] for c in contenders}
    previous: str | None = None
    for rep in range(reps):
        for c in run_order(contenders, rep):
            after, previous = previous, c.name
            values = {k.name: c.settings.get(t, defaults[t]) for t, k in knobs.items()}
            actuator.apply(values, f"case contender {c.name}, repetition {rep + 1}")
            if server is not None:
                server.stop()
            forget_paths(namespaces)
            if server is not None:
                server.start()
            try:
                with contextlib.ExitStack() as arming:
                    if c.perf_consts:
                        arming.enter_context(perf_const_armed(live, server, c, rep))
                    if c.observed:
                        if observer is None:
                            raise NotObserved(f"{c.name} runs under xobserve; this run has no observer")
                        arming.enter_context(observer.running())
                    run = run_benchmark(bench)
            except (MetricMissing, ArmingFailed, NotObserved) as e:
                runs[c.name].append({"rep": rep, "after": after, "failed": str(e)})
                progress(f"  rep {rep + 1} {c.name}: failed: {e}")
                continue
            value = expr.evaluate(node, run.values)
            done = {"rep": rep, "after": after, "objective": value, "metrics": run.values}
            if c.perf_consts:
                done["perf_consts"] = dict(c.perf_consts)  # in effect (SIE) throughout this run
            if c.observed and observer is not None:
                done["seen"] = dict(observer.last)  # what xobserve's families saw of this run
            runs[c.name].append(done)
            progress(f"  rep {rep + 1} {c.name}: {value:,.1f}")
    return runs
