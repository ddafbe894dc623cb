#!/usr/bin/env python3
"""The web case's BO pick taken apart, outside the case's harness: the values xtune-bo ran in
experiments/results/case_studies.json (or BO's best trial there, when its confirming pairs turned
it away) set by hand over a fresh veth pair, beside the defaults, with
autogroup off alone and the pick without autogroup, each on a quiet host and beside one CPU-bound
process started with setsid() (the competitor, an autogroup of its own), interleaved, nginx
restarted after each change.

    python experiments/bench_web_pick.py            # 5 repetitions, 4 s wrk runs

Writes experiments/results/web_pick.json. Every value it changes is read first and written back on
every way out; the JSON records both.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

from cases import web
from cases.paired import ratio_ci95
from cases.profiles import key_of
from cases.servers import SERVERS
from resultfile import RESULTS, write_result
from xtune.config import load
from xtune.host import netns as netns_
from xtune.testing.stats import mean_ci95

SOURCES = ["experiments/bench_web_pick.py", "experiments/cases", "experiments/results/case_studies.json"]
AUTOGROUP = "kernel.sched_autogroup_enabled"
HOST_WIDE = ("kernel.", "net.core.netdev_max_backlog")  # not held per namespace
# The case's SLO file is read here for its knobs' targets alone, which none of its variables
# name: each variable gets a value the loader accepts, and nothing else reads them.
FILL = {"BUDGET": "1", "SECONDS": "1", "SERVER_ADDR": "10.0.0.2"} | dict.fromkeys(
    ("CASES", "CLIENT_NETNS", "PYTHON", "SERVER_NETNS_NAME", "SERVER_NETNS", "SERVE_DIR"), "/x"
)


def read(netns: str | None, key: str) -> str:
    text = netns_.sysctl(netns, key)
    if text is None:
        raise SystemExit(f"{key}: this kernel has no such sysctl (netns {netns or 'host'})")
    return text


def write(netns: str | None, key: str, value: str) -> None:
    cmd = ["sysctl", "-w", f"{key}={value}"]
    netns_.run(*(cmd if netns is None else ["ip", "netns", "exec", netns, *cmd]))


def where(key: str, netns: str) -> str | None:
    return None if key.startswith(HOST_WIDE) else netns


def pick_of_case() -> tuple[dict[str, int], str]:
    """The values to take apart, and which they are: xtune-bo's in the case, or, when BO kept the
    defaults, its best trial, the one its confirming pairs turned away (the run's `candidate`,
    checked against the trials the case recorded)."""
    case = json.loads((RESULTS / "case_studies.json").read_text())["cases"]["web"]
    values = case["contenders"]["xtune-bo"]["values"]
    if values:
        return values, "xtune-bo's values in the case"
    params = case["bo"]["result"].get("candidate")
    if not params:
        return {}, ""
    if not any(t["params"] == params for t in case["bo"].get("history", [])):
        raise RuntimeError(f"case_studies.json: the best trial {params} is not among the case's trials")
    knobs = {k.name: k.target for k in load(web.CASE.bo_file, FILL).knobs}
    unknown = sorted(set(params) - set(knobs))
    if unknown:
        raise RuntimeError(
            f"case_studies.json: the best trial names {unknown}, not knobs of {web.CASE.bo_file}"
        )
    return {knobs[n]: int(v) for n, v in params.items()}, "BO's best trial, not kept (it did not confirm)"


def settings_text(pick: dict[str, int], now: dict[str, str]) -> dict[str, str]:
    """Whole sysctl values from fields (`net.ipv4.tcp_wmem[1]` changes one of three)."""
    out: dict[str, list[str]] = {}
    for target, value in pick.items():
        key, index = key_of(target)
        fields = out.setdefault(key, now[key].split())
        fields[index or 0] = str(value)
    return {k: " ".join(v) for k, v in out.items()}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=4)
    args = ap.parse_args()
    pick, which = pick_of_case()
    if not pick:  # not a failure of `make bench`: BO kept the defaults, there is no pick
        print("case_studies.json: xtune-bo ran the defaults in the web case: nothing to take apart")
        return 0
    work = Path(tempfile.mkdtemp(prefix="xtune-web-pick-"))
    with web.CASE.place(work, False) as place:
        ns, v = place.netns, place.variables
        assert ns is not None
        keys = sorted({key_of(t)[0] for t in pick} | {AUTOGROUP})
        before = {k: read(where(k, ns), k) for k in keys}
        full = settings_text(pick, before)
        configs = {
            "defaults": {},
            "pick": full,
            "autogroup off alone": {AUTOGROUP: "0"},
            "pick with autogroup on": {**full, AUTOGROUP: before[AUTOGROUP]},
        }
        conditions = ("quiet", "competitor")
        runs: dict[str, dict[str, dict[int, float]]] = {c: {n: {} for n in configs} for c in conditions}
        (work / "server").mkdir()
        server = SERVERS["nginx"]("nginx", ns, 80, work / "server")
        competitor = None
        try:
            for rep in range(args.reps):
                for condition in runs:
                    if condition == "competitor":
                        competitor = subprocess.Popen(
                            [sys.executable, "-c", "while True: pass"], start_new_session=True
                        )
                    order = list(configs)
                    random.Random(rep).shuffle(order)
                    for name in order:
                        for k in keys:
                            write(where(k, ns), k, configs[name].get(k, before[k]))
                        server.start()
                        try:
                            out = subprocess.run(
                                ["ip", "netns", "exec", v["CLIENT_NETNS"], "wrk", "-t2", "-c64",
                                 f"-d{args.seconds}s", "-s", f"{v['CASES']}/wrk-json.lua",
                                 f"http://{v['SERVER_ADDR']}/"],
                                check=True, capture_output=True, text=True,
                            ).stdout  # fmt: skip
                        finally:
                            server.stop()
                        line = [x for x in out.splitlines() if x.startswith("{")][-1]  # wrk-json.lua's
                        rps = json.loads(line)["requests_per_s"]
                        runs[condition][name][rep] = rps
                        print(f"rep {rep + 1} {condition} {name}: {rps:,.0f}", flush=True)
                    if competitor is not None:
                        competitor.kill()
                        competitor.wait()
                        competitor = None
        finally:
            if competitor is not None:
                competitor.kill()
                competitor.wait()
            server.stop()
            for k in keys:
                write(where(k, ns), k, before[k])
            after = {k: read(where(k, ns), k) for k in keys}
    result = {
        "reps": args.reps,
        "seconds": args.seconds,
        "pick": pick,
        "pick_is": which,
        "configs": configs,
        "conditions": {
            c: {
                n: {
                    "requests_per_s": mean_ci95(list(r.values())),
                    "over_defaults": ratio_ci95(r, by_name["defaults"]),
                    "runs": [r[i] for i in sorted(r)],
                }
                for n, r in by_name.items()
            }
            for c, by_name in runs.items()
        },
        "values_before": before,
        "values_after": after,
        "restored": after == before,
        "restored_count": sum(after[k] == before[k] for k in keys),
    }
    print(write_result("web_pick", result, SOURCES))
    return 0 if result["restored"] else 1


if __name__ == "__main__":
    sys.exit(main())
