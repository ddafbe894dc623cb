"""Plots drawn from results JSON only (never from a run in progress), so a plot and the README figures
beside it always show the same measurement.

  python experiments/plots.py      # every plot whose JSON is in experiments/results/

- dataplane_landscape.png (the ML-native dataplane paper's Figure 1 analog): client p99 over
  RX_BATCH_SIZE, one line per (flows, rate) regime, each regime's best value marked.
- adaptive_dataplane.png (its Figure 6 analog): the client p99 of each 10 ms slice of one run under
  the shifting schedule, for the best static value, the per-phase oracle and the tree, with the
  value the tree had in effect below.
- case_studies.png: per case, each contender's objective over the defaults' in the same repetition
  (geometric mean and its 95 % CI), xtune's BO in its own colour, a contender that breaks the
  case's SLO lines hatched, a claim that holds after Holm's correction starred.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def landscape(doc: dict, out: Path) -> None:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for cell in doc["landscape"].values():
        values = sorted(int(v) for v in cell["values"])
        p99 = [cell["values"][str(v)]["p99_us"] / 1000 for v in values]
        (line,) = ax.plot(
            values, p99, marker="o", ms=3, label=f"{cell['flows']} flows, {cell['rate_rps'] // 1000}k req/s"
        )
        ax.plot([cell["best_value"]], [cell["best_p99_us"] / 1000], marker="*", ms=12, color=line.get_color())
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("RX_BATCH_SIZE")
    ax.set_ylabel("client p99 (ms)")
    ax.set_title("No static value is best everywhere (★ best per regime)")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def adaptive(doc: dict, out: Path) -> None:
    series = doc.get("series") or {}
    if "adaptive" not in series:
        raise ValueError("adaptive_dataplane.json has no series (a run before --series was recorded)")
    plt = _pyplot()
    fig, (ax, av) = plt.subplots(2, 1, figsize=(8, 5), sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    best = f"static_{doc['best_static']['value']}"
    labels = {
        best: f"best static ({doc['best_static']['value']})",
        "oracle": "per-phase oracle",
        "adaptive": "tree, 1 ms",
    }
    for c, label in labels.items():
        s = series.get(c)
        if not s:
            continue
        t = [i * s["series_ms"] for i in range(len(s["p99_us"]))]
        ax.step(t, [x / 1000 if x else float("nan") for x in s["p99_us"]], where="post", lw=1, label=label)
    ax.set_yscale("log")
    ax.set_ylabel(f"client p99 per {series['adaptive']['series_ms']:g} ms (ms)")
    bounds, at = [], 0.0
    for phase in doc["schedule"]:
        secs, rate, flows = phase.split(":")
        ax.axvline(at * 1000, color="grey", lw=0.5)
        ax.text(at * 1000 + 20, 0.98, f"{float(rate) / 1000:g}k/s, {flows} fl.",
                transform=ax.get_xaxis_transform(), fontsize=7, va="top")  # fmt: skip
        bounds.append(at)
        at += float(secs)
    ax.legend(fontsize=8, loc="lower right")
    steps = series["adaptive"].get("values") or []
    if steps:
        end = at * 1000
        xs = [p[0] for p in steps] + [end]
        ys = [p[1] for p in steps] + [steps[-1][1]]
        av.step(xs, ys, where="post", color="C2")
    av.set_yscale("log", base=2)
    av.set_ylabel("tree's value")
    av.set_xlabel("ms since the load started")
    fig.suptitle("Client tail over time under the shifting schedule (one run)")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def cases(doc: dict, out: Path) -> None:
    plt = _pyplot()
    names = list(doc["cases"])
    rows = [len(doc["cases"][n]["contenders"]) - 1 for n in names]
    height = 1.2 + 0.36 * sum(rows) + 0.5 * len(names)
    ratios = [max(r, 1) for r in rows]
    fig, axes = plt.subplots(
        len(names), 1, figsize=(7.5, height), gridspec_kw={"height_ratios": ratios}, squeeze=False
    )
    for ax, name in zip(axes[:, 0], names, strict=True):
        case = doc["cases"][name]
        maximize = case["maximize"]
        verdict = case["verdict"]
        others = [c for c in case["contenders"] if c != "defaults"]
        for y, c in enumerate(others):
            r = case["contenders"][c]["paired"]["defaults"]
            if r["geomean"] is None:
                continue
            lo = r["geomean"] - (r["low"] if r["low"] is not None else r["geomean"])
            hi = (r["high"] if r["high"] is not None else r["geomean"]) - r["geomean"]
            slo_broken = c in verdict["excluded"]
            ax.barh(y, r["geomean"] - 1, left=1, xerr=[[lo], [hi]], capsize=3,
                    color="C1" if c == "xtune-bo" else "C0", alpha=0.35 if slo_broken else 0.85,
                    hatch="//" if slo_broken else None, ecolor="black")  # fmt: skip
            if c in verdict["beats_defaults"]:
                ax.text(r["high"] or r["geomean"], y, " *", va="center")
        ax.axvline(1, color="black", lw=0.8)
        ax.set_yticks(range(len(others)), others, fontsize=7)
        ax.invert_yaxis()
        ax.tick_params(axis="x", labelsize=7)
        better = "better →" if maximize else "← better"
        ax.set_title(f"{name}: {case['objective']} / defaults ({better})", fontsize=8, loc="left")
    fig.suptitle(
        "Case studies: each contender over the defaults, paired per repetition"
        " (95 % CI; * a claim after Holm's correction)",
        fontsize=8,
    )
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


PLOTS = {"dataplane_landscape": landscape, "adaptive_dataplane": adaptive, "case_studies": cases}


def render(name: str, results: Path = RESULTS) -> Path:
    """Draw the plot of one results JSON next to it; returns the PNG's path."""
    doc = json.loads((results / f"{name}.json").read_text())
    out = results / f"{name}.png"
    PLOTS[name](doc, out)
    return out


def main() -> int:
    for name in PLOTS:
        if (RESULTS / f"{name}.json").exists():
            try:
                print(render(name))
            except ValueError as e:
                print(f"{name}: {e}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
