"""The contenders measured in one run: each repetition visits every contender, in an order rotated
by one per repetition (round robin), so drift on the shared host spreads over all of them.

Every value goes through xrtd (one transaction per contender; the keys a contender does not set
keep their defaults) and the server restarts after each change (the accept backlog is fixed at
listen()). A run whose metric is missing is recorded as failed, not as zero.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from xtune.config import expr
from xtune.config.schema import Benchmark, Knob
from xtune.knobs.actuator import Actuator
from xtune.knobs.table import KnobClient, KnobError
from xtune.tuning.benchmark import MetricMissing, run_benchmark

from cases.profiles import Contender, key_of, scope
from cases.servers import Server


def knobs_for(targets: list[str], server_netns: str) -> dict[str, Knob]:
    """One xrtd knob per sysctl field, in the namespace where the key lives."""
    out = {}
    for i, target in enumerate(sorted(targets)):
        where = scope(key_of(target)[0], server_netns)
        assert where is not None, target
        name = f"k{i}_" + re.sub(r"[^a-z0-9]+", "_", target.lower()).strip("_")[:40]
        netns = f"/run/netns/{where.netns}" if where.netns else None
        out[target] = Knob(name=name, backend="sysctl", target=target, netns=netns, range=(0, 2**62))
    return out


def refused(socket_path: str, knobs: dict[str, Knob]) -> dict[str, str]:
    """Targets xrtd will not register (a key read-only in a namespace, off the allow-list), with why."""
    out = {}
    client = KnobClient(socket_path)
    try:
        for target, k in knobs.items():
            assert k.range is not None
            try:
                client.register(k.name, k.backend, k.target, min=k.range[0], max=k.range[1], netns=k.netns)
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


def defaults_of(targets: list[str], server_netns: str) -> dict[str, int]:
    """Each field's value as the host has it now (a fresh namespace: the kernel's defaults)."""
    out = {}
    for target in targets:
        key, index = key_of(target)
        where = scope(key, server_netns)
        assert where is not None, target
        out[target] = where.fields[index or 0]
    return out


def probe(actuator: Actuator, knobs: dict[str, Knob], defaults: dict[str, int], contender: Contender) -> None:
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


def interleave(
    actuator: Actuator,
    knobs: dict[str, Knob],
    defaults: dict[str, int],
    contenders: list[Contender],
    server: Server,
    bench: Benchmark,
    objective: str,
    reps: int,
    progress: Callable[[str], None] = print,
) -> dict[str, list[dict]]:
    node = expr.parse(objective)
    runs: dict[str, list[dict]] = {c.name: [] for c in contenders}
    for rep in range(reps):
        order = contenders[rep % len(contenders) :] + contenders[: rep % len(contenders)]
        for c in order:
            values = {k.name: c.settings.get(t, defaults[t]) for t, k in knobs.items()}
            actuator.apply(values, f"case contender {c.name}, repetition {rep + 1}")
            server.stop()
            server.start()
            try:
                run = run_benchmark(bench)
            except MetricMissing as e:
                runs[c.name].append({"rep": rep, "failed": str(e)})
                progress(f"  rep {rep + 1} {c.name}: failed: {e}")
                continue
            value = expr.evaluate(node, run.values)
            runs[c.name].append({"rep": rep, "objective": value, "metrics": run.values})
            progress(f"  rep {rep + 1} {c.name}: {value:,.1f}")
    return runs
