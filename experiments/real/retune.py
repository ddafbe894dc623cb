"""What each real program's benchmark measures, with the program's own start, golden and load
functions: a process retuned live through `xtune sie` to each value, its golden output against the
program rebuilt with the value, then throughput of both, interleaved over repetitions."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol, TypeVar

from xtune.testing.stats import mean_ci95

T = TypeVar("T")


class Stoppable(Protocol):
    def stop(self) -> None: ...


class Setter(Protocol):
    def set(self, name: str, value: int) -> object: ...


S = TypeVar("S", bound=Stoppable)


def with_process(start: Callable[[], S], use: Callable[[S], T]) -> T:
    """`use` a process that `start` starts, stopped on every exit path."""
    proc = start()
    try:
        return use(proc)
    finally:
        proc.stop()


def golden_checks(
    cli: Setter,
    const: str,
    values: list[int],
    analysis_values: list[int],
    live: Callable[[], object],
    rebuilt: Callable[[int], object],
) -> dict[str, dict]:
    """Per value, in order: set it live, then the live process' golden output (`live()`) against
    the rebuilt program's (`rebuilt(value)`)."""
    checks: dict[str, dict] = {}
    for v in values:
        t0 = time.monotonic()
        cli.set(const, v)
        set_ms = (time.monotonic() - t0) * 1e3
        got = live()
        want = rebuilt(v)
        checks[str(v)] = {
            "equal": got == want,
            "sie": got,
            "rebuilt": want,
            "set_ms": round(set_ms, 1),
            "analysis_build": v in analysis_values,
        }
    return checks


def interleaved(
    cli: Setter,
    const: str,
    values: list[int],
    reps: int,
    live: Callable[[], float],
    rebuilt: Callable[[int], float],
) -> dict[str, dict[str, list[float]]]:
    """Throughput samples per value: the live process set to it (`live()`), then the rebuilt
    program (`rebuilt(value)`), for `reps` rounds over the values."""
    rps: dict[str, dict[str, list[float]]] = {str(v): {"sie": [], "rebuilt": []} for v in values}
    for rep in range(reps):
        # Rotate the order so that no value always runs first (warm-up, other tenants' load).
        order = values[rep % len(values) :] + values[: rep % len(values)]
        for v in order:
            cli.set(const, v)
            rps[str(v)]["sie"].append(live())
            rps[str(v)]["rebuilt"].append(rebuilt(v))
    return rps


def throughput(rps: dict[str, dict[str, list[float]]], stock: int) -> dict[str, dict]:
    """Mean and 95 % CI per value and kind, each over the rebuilt program at the stock value, and
    the retuned over the rebuilt."""
    stock_rps = mean_ci95(rps[str(stock)]["rebuilt"])["mean"]
    out = {}
    for v, r in rps.items():
        stats: dict = {kind: {**mean_ci95(xs), "samples": xs} for kind, xs in r.items()}
        for kind in stats:
            stats[kind]["over_stock"] = round(stats[kind]["mean"] / stock_rps, 3)
        stats["sie_over_rebuilt"] = round(stats["sie"]["mean"] / stats["rebuilt"]["mean"], 3)
        out[v] = stats
    return out


def golden_summary(checks: dict[str, dict], before: object, after: object) -> dict:
    """The golden checks, counted, with the live process' output before attach and whether the
    output after detach equals it."""
    return {
        "all_equal": all(c["equal"] for c in checks.values()),
        "checked": len(checks),
        "equal": sum(c["equal"] for c in checks.values()),
        "values": checks,
        "stock_before_attach": before,
        "after_detach_equals_before": after == before,
    }
