"""Which contenders meet the case's SLO lines (the BO file's `slo:`), judged on the interleaved run:
a contender that breaks one cannot win, whatever its objective (the network case's SLO keeps the
bulk at 90 % of the defaults', so a setting that buys latency with the bulk does not count).

As xtune judges a trial (`loop.Runner._holds`): a line holds when the mean of its left side over
the contender's runs meets the bound, `baseline` being the mean of the same left side over the
defaults' runs of the same interleaved run (what BO's baseline measures: the values found at start).
The defaults are the baseline and are not judged. A line whose figures a run lacks is not judged.
"""

from __future__ import annotations

import statistics

from xtune.config import expr


def _left(line: expr.Comparison, runs: list[dict[str, float]]) -> list[float]:
    out = []
    for metrics in runs:
        try:
            out.append(expr.evaluate(line.left, metrics))
        except expr.MissingSignal:
            continue
    return out


def check(
    lines: list[expr.Comparison], runs: dict[str, list[dict[str, float]]], baseline: str = "defaults"
) -> dict[str, list[dict]]:
    """contender -> one {line, mean, bound, holds, runs, runs_breaking} per line judged, from each
    contender's runs' metrics (`bench.<name>` -> value; failed runs left out)."""
    out: dict[str, list[dict]] = {c: [] for c in runs}
    for line in lines:
        base = _left(line, runs.get(baseline, []))
        if not base:
            continue
        bound = expr.evaluate(line.right, {}, statistics.fmean(base))
        for c, rs in runs.items():
            xs = _left(line, rs)
            if c == baseline or not xs:
                continue
            mean = statistics.fmean(xs)
            out[c].append(
                {
                    "line": line.text,
                    "mean": mean,
                    "bound": bound,
                    "holds": line.holds(mean, bound),
                    "runs": len(xs),
                    "runs_breaking": sum(not line.holds(x, bound) for x in xs),
                }
            )
    return out


def excluded(judged: dict[str, list[dict]]) -> dict[str, str]:
    """contender -> why it cannot win: each line its runs' mean breaks, with the figures."""
    out = {}
    for c, lines in judged.items():
        broken = [
            f"{j['line']}: mean {j['mean']:.4g} over {j['runs']} runs against the bound {j['bound']:.4g} "
            f"({j['runs_breaking']} of {j['runs']} runs beyond it)"
            for j in lines
            if not j["holds"]
        ]
        if broken:
            out[c] = "breaks the SLO: " + "; ".join(broken)
    return out
