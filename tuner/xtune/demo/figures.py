"""The demo's figures as data: what each phase's before/after table prints, as one JSON-ready
dict (`xtune demo --json FILE`; experiments/bench_demo.py stores it with its provenance).

A tuning phase (the bufferbloat sysctls, the SIE phase) gives its knobs before and after, the
objective's mean and standard error over the measured windows, each SLO line's left side and
the gain, in the units the run resolved; the adaptive phase gives the client's p99 per load phase,
pooled and as the mean of the phases, the throughput and the tree's value changes. A figure that
was not measured (no after when no trial held the SLO) is null, never NaN.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from xtune.demo.dataplane_load import phase_p99, throughput
from xtune.tuning.console import RunUnits
from xtune.tuning.loop import RunResult, Summary

if TYPE_CHECKING:
    from xtune.demo.adaptive_phase import AdaptivePhase
    from xtune.demo.run import DemoRun
    from xtune.demo.sie_phase import SiePhase


def _number(x: float | None) -> float | None:
    return None if x is None or math.isnan(x) else float(x)


def _summary(s: Summary | None) -> dict[str, Any] | None:
    if s is None:
        return None
    return {
        "objective": _number(s.objective),
        "objective_sem": _number(s.objective_sem),
        "windows": s.windows,
    }


def tuning_figures(result: RunResult, units: RunUnits) -> dict[str, Any]:
    """One tuning phase's before/after table as data."""
    final = result.after_values()
    after = result.after
    return {
        "objective": result.objective_text,
        "objective_unit": units.objective,
        "knobs": {name: {"before": v, "after": final[name]} for name, v in result.original.items()},
        "before": _summary(result.before),
        "after": _summary(after),
        "slo": [
            {
                "line": line,
                "unit": units.line(i),
                "before": _number(result.before.slo[i][0]),
                "after": _number(after.slo[i][0]) if after else None,
            }
            for i, line in enumerate(result.lines)
        ],
        "gain": _number(result.gain),
        "trials": len(result.trials),
        "rollbacks": result.rollbacks,
    }


def sie_figures(phase: SiePhase) -> dict[str, Any]:
    return {
        **tuning_figures(phase.result, phase.units),
        "text_restored": phase.text_restored,
        # The client's own p50 at the compiled value and at the chosen one (the observer aside).
        "client_p50_us": [{"value": v, "p50_us": us} for v, us in phase.client_p50_us],
    }


def adaptive_figures(phase: AdaptivePhase) -> dict[str, Any]:
    before, after = phase.before, phase.after

    def side(doc: dict) -> dict[str, Any]:
        return {
            "phase_p99_us": phase_p99(doc),
            "pooled_p99_us": float(doc["p99_us"]),
            "throughput_rps": throughput(doc),
        }

    return {
        "compiled": phase.compiled,
        "values_in_effect": sorted({int(v) for _, v in after["values"]}),
        "changes": phase.changes,
        "phases": [
            {
                "seconds": float(b["seconds"]),
                "rate": float(b["rate"]),
                "flows": int(b["flows"]),
                "before_p99_us": float(b["p99_us"]),
                "after_p99_us": float(a["p99_us"]),
            }
            for b, a in zip(before["phases"], after["phases"], strict=True)
        ],
        "before": side(before),
        "after": side(after),
        "tree": {k: phase.card.get(k) for k in ("depth", "leaves", "fallback")},
        "heldout_accuracy": (phase.card.get("heldout") or {}).get("accuracy"),
        "text_restored": phase.text_restored,
    }


def demo_figures(run: DemoRun) -> dict[str, Any]:
    """Every phase's figures, keyed bufferbloat, sie, adaptive."""
    return {
        "bufferbloat": tuning_figures(run.result, run.units),
        "sie": sie_figures(run.sie),
        "adaptive": adaptive_figures(run.adaptive),
    }
