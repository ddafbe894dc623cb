#!/usr/bin/env python3
"""The case studies as one HTML page, drawn from experiments/results/case_studies.json only (never
from a run in progress), beside its plot (plots.py's case_studies.png).

  python experiments/case_report.py      # writes experiments/results/case_studies.html

Per case: each contender's objective (mean ± 95 % CI over the repetitions), its ratio over the
defaults paired per repetition with the interval, the p-values before and after Holm's correction,
the p99 latency, whether its runs kept the SLO lines, and every value it applied (sysctls, sysfs
attributes, perf-consts through SIE); then what could not be measured and why, and xobserve's cost
on the case's own load.
"""

from __future__ import annotations

import html
import json
import sys
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def _num(x: float | None, fmt: str = ",.1f") -> str:
    return "–" if x is None else format(x, fmt)


def _ratio(r: dict[str, Any]) -> str:
    if r["geomean"] is None:
        return "–"
    if r["low"] is None:
        return f"{r['geomean']:.3f}"
    return f"{r['geomean']:.3f} [{r['low']:.3f}, {r['high']:.3f}]"


def _values(c: dict[str, Any]) -> str:
    items = [f"{k} = {v}" for k, v in sorted(c["values"].items())]
    items += [f"{k} = {v} (SIE)" for k, v in sorted(c.get("perf_consts", {}).items())]
    return "<br>".join(html.escape(i) for i in items) or "(none: the defaults)"


def _table(head: list[str], rows: list[list[str]]) -> str:
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def case_section(name: str, case: dict[str, Any]) -> str:
    verdict = case["verdict"]
    rows = []
    for c, data in case["contenders"].items():
        r = data["paired"].get("defaults") if c != "defaults" else None
        slo = verdict["excluded"].get(c)
        rows.append([
            html.escape(c) + (" <b>(xtune)</b>" if c == "xtune-bo" else ""),
            f"{_num(data['objective']['mean'])} ± {_num(data['objective']['ci95'])}",
            "1" if r is None else _ratio(r),
            "–" if r is None else _num(r.get("p"), ".4f"),
            "–" if r is None else _num(r.get("p_holm"), ".4f"),
            f"{_num(data['p99_ms']['mean'], '.2f')} ± {_num(data['p99_ms']['ci95'], '.2f')}",
            "kept" if slo is None else f"<b>broken</b>: {html.escape(slo)}",
            str(data["failed_runs"]),
            _values(data),
        ])  # fmt: skip
    better = "higher" if case["maximize"] else "lower"
    parts = [
        f"<h2>{html.escape(name)}</h2>",
        f"<p>Objective <code>{html.escape(case['objective'])}</code> ({better} is better); SLO lines: "
        + ", ".join(f"<code>{html.escape(s)}</code>" for s in case["slo_lines"])
        + f"; benchmark <code>{html.escape(' '.join(case['benchmark']))}</code>.</p>",
        _table(
            [
                "contender",
                "objective",
                "/ defaults, paired",
                "p",
                "p (Holm)",
                "p99 ms",
                "SLO",
                "failed runs",
                "values applied",
            ],
            rows,
        ),  # fmt: skip
        "<p>Ahead of the defaults after Holm's correction: "
        + (", ".join(verdict["beats_defaults"]) or "none")
        + "; ahead of every other contender: "
        + (", ".join(verdict["beats_every_other"]) or "none")
        + " (each test at 5 %: "
        + (", ".join(verdict["uncorrected"]["beats_every_other"]) or "none")
        + ").</p>",
    ]
    if case["missing_contenders"]:
        items = "".join(f"<li>{html.escape(m)}</li>" for m in case["missing_contenders"])
        parts.append(f"<p>Not measured:</p><ul>{items}</ul>")
    obs = case.get("observer_overhead")
    if obs:
        seen = ", ".join(
            f"{k} {_num(v['mean'], ',.0f')}/s" for k, v in obs["seen_per_s"].items() if k != "windows"
        )
        parts.append(
            f"<p>xobserve on this load (<code>{html.escape(obs['xobserve'])}</code>): the defaults' "
            f"objective with it over without, paired, {_ratio(obs['ratio'])} (a cost is {obs['cost_when']}); "
            f"its families saw {html.escape(seen)}.</p>"
        )
    return "\n".join(parts)


def page(doc: dict[str, Any], plot: str | None) -> str:
    x = doc["xtune_bo"]
    ahead = ", ".join(x["beats_defaults"]) or "none"
    budget = ", ".join(f"{n} {b}" for n, b in doc["budget"].items())  # BO trials, per case
    summary = (
        f"{doc['reps']} interleaved repetitions per contender, BO budget {budget}, "
        f"{doc['seconds'] / 60:.0f} min. xtune's BO ahead of the defaults (Holm) in "
        f"{len(x['beats_defaults'])} of {len(x['cases'])} cases ({ahead}); "
        f"ahead of every other contender in {len(x['beats_every_other'])} (Holm over every pair of the case) "
        f"and in {len(x.get('beats_every_other_jointly', []))} (each of its tests at 5 %, the joint claim)."
    )
    tree = doc.get("provenance", {}).get("tree", "")
    body = [f"<h1>xtune case studies</h1><p>{html.escape(summary)}</p>"]
    if plot:
        body.append(f'<img src="{html.escape(plot)}" alt="each contender over the defaults, per case">')
    body += [case_section(n, c) for n, c in doc["cases"].items()]
    body.append(f"<p>Measured at source tree {html.escape(tree)}.</p>")
    style = (
        "body{font-family:sans-serif;max-width:78em;margin:auto}table{border-collapse:collapse;font-size:90%}"
        "td,th{border:1px solid #ccc;padding:3px 6px;vertical-align:top}img{max-width:100%}"
    )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>xtune case studies</title>"
        f"<style>{style}</style></head><body>{''.join(body)}</body></html>\n"
    )


def write(results: Path = RESULTS) -> Path:
    doc = json.loads((results / "case_studies.json").read_text())
    plot = "case_studies.png" if (results / "case_studies.png").exists() else None
    out = results / "case_studies.html"
    out.write_text(page(doc, plot))
    return out


if __name__ == "__main__":
    print(write())
    sys.exit(0)
