"""bpftune (Oracle's BPF auto-tuner) against the defaults and xtune's BO on a TCP bulk path, in a QEMU guest.

bpftune's tuners attach with fentry and tp_btf, which this host's kernel refuses, so both contenders
run in one guest of Debian's kernel (TCG, 2 vCPUs): iperf3 from a network namespace to the root
namespace over a veth pair with a netem delay on each end (experiments/bpftune/guest.sh), so the
socket buffers' limits bound the window. Contenders alternate in an order rotated by one per
repetition; every visit has the same unmeasured warm-up run (bpftune learns in it), then one
measured run, then the values are restored and compared with the boot snapshot. bpftune is built
at a pinned commit (experiments/bpftune/build.sh, cached in $XTUNE_CACHE/bpftune/). xtune's BO
(BO_SLO: Ax over the receiver's tcp_rmem[2] and the sender's tcp_wmem[2], the limits bpftune's
tcp_buffer tuner moves) picks its values first, one guest boot per trial, and its pick is then a
contender of the interleaved run.

    .venv/bin/python experiments/bench_bpftune.py          # 5 reps, 10 s runs, 5 s warm-up, 2 x 50 ms delay
    .venv/bin/python experiments/bench_bpftune.py --quick  # 1 repetition, 4 s runs, BO budget 3
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import tempfile
from pathlib import Path

from resultfile import write_result
from xtune import paths
from xtune.config.loader import load_text
from xtune.policies.base import Outcome
from xtune.policies.bo import BoPolicy
from xtune.testing import kernel_guest
from xtune.testing.stats import mean_ci95

HERE = paths.ROOT / "experiments" / "bpftune"
SOURCES = ["experiments/bench_bpftune.py", "experiments/bpftune"]
CONTENDERS = ["defaults", "bpftune", "xtune-bo"]
# Maximize the measured run's throughput; the values reach the guest as BO_RMEM_MAX / BO_WMEM_MAX
# (guest.sh writes them: xrtd does not run in the guest). The targets name what they are.
BO_SLO = """
name: bpftune-guest-bo
objective: {maximize: bench.mbit_s, unit: Mbit/s}
knobs:
  - {name: rmem_max, backend: sysctl, target: "net.ipv4.tcp_rmem[2]", range: [1048576, 67108864], scale: log}
  - {name: wmem_max, backend: sysctl, target: "net.ipv4.tcp_wmem[2]", range: [1048576, 67108864], scale: log}
policy: {kind: bo, budget: "${BUDGET}", init_trials: "${INIT}", seed: 5}
"""
RUN = re.compile(r"^XB-RUN (\S+) (\d+) (\d+) (\d+)\s*$", re.M)
VALUES = re.compile(r"^XB-VALUES (\S+) (\d+) (srv|cli) (\S+) (\S+?),?\s*$", re.M)
RESTORED = re.compile(r"^XB-RESTORED (\S+) (\d+) ([01])\s*$", re.M)
CHANGE = re.compile(r"^XB-LOG (\d+) bpftune: (Due to .* change (\S+)\(.*)$", re.M)
ERROR = re.compile(r"^XB-ERROR (.*)$", re.M)
PING = re.compile(r"^XB-PING round-trip min/avg/max = ([\d.]+)/([\d.]+)/([\d.]+) ms", re.M)
TUNERS = re.compile(r"^XB-TUNERS (\d+) (\d+)", re.M)
BOOTED = re.compile(r"^XB-BOOTED (\S+)", re.M)
BPFTUNE_COMMIT = re.search(r"^commit=(\w+)$", (HERE / "build.sh").read_text(), re.M)[1]  # type: ignore[index]


def guest_run(
    reps: int, run_s: int, warmup_s: int, delay_ms: int, contenders: list[str], bo: dict[str, int]
) -> str:
    built = subprocess.run([str(HERE / "build.sh")], capture_output=True, text=True)
    if built.returncode:
        raise RuntimeError(f"building bpftune failed: {built.stderr.strip()}")
    with tempfile.TemporaryDirectory() as tmp:
        params, initrd, console = Path(tmp, "params"), Path(tmp, "initrd.gz"), Path(tmp, "console.log")
        sets = {"REPS": reps, "RUN_S": run_s, "WARMUP_S": warmup_s, "DELAY_MS": delay_ms}
        sets |= {f"BO_{k.upper()}": v for k, v in bo.items()}
        lines = [f"{k}={v}" for k, v in sets.items()] + [f'CONTENDERS="{" ".join(contenders)}"']
        params.write_text("\n".join(lines) + "\n")
        cached = built.stdout.strip()
        subprocess.run([str(HERE / "initramfs.sh"), cached, str(params), str(initrd)], check=True)
        # bpftune's start-up (nine tuners verified under TCG) takes about a minute per visit.
        limit = 120 + reps * len(contenders) * (2 * (run_s + warmup_s) + 90)
        # The committed harness, not the working tree's: a run lasts long enough to see it edited.
        harness = Path(tmp, "run-guest.sh")
        git = ["git", "-C", str(paths.ROOT), "show", "HEAD:kmod/harness/run-guest.sh"]
        harness.write_text(subprocess.run(git, capture_output=True, text=True, check=True).stdout)
        harness.chmod(0o755)
        guest = [kernel_guest.kernel_env(), str(initrd), str(console), str(limit)]
        run = subprocess.run(["flock", kernel_guest.HEAVY_LOCK, str(harness), *guest])
        text = console.read_text(errors="replace")
    kept = paths.BUILD / "bpftune-console.log"
    kept.parent.mkdir(parents=True, exist_ok=True)
    kept.write_text(text)
    if m := ERROR.search(text):
        raise RuntimeError(f"guest: {m[1]}; console in {kept}")
    if m := kernel_guest.CRASH.search(text):
        raise RuntimeError(f"guest kernel trouble ({m[0]!r}); console in {kept}")
    if run.returncode or "XB-END" not in text:
        raise RuntimeError(f"guest did not finish; console in {kept}")
    return text


def runs_of(text: str) -> dict[str, dict[int, tuple[int, int]]]:
    """contender -> repetition -> (receiver's kbit/s, sender's retransmits)."""
    runs: dict[str, dict[int, tuple[int, int]]] = {}
    for m in RUN.finditer(text):
        runs.setdefault(m[1], {})[int(m[2])] = (int(m[3]), int(m[4]))
    return runs


def bo_pick(budget: int, init: int, run_s: int, warmup_s: int, delay_ms: int) -> dict:
    """xtune's BO over the two limits, each trial one guest boot (warm-up and measured run, as a
    visit); the pick is the trial with the highest throughput."""
    slo = load_text(BO_SLO, "bpftune-guest-bo.yaml", {"BUDGET": str(budget), "INIT": str(init)})
    policy = BoPolicy(slo, {}, [])
    trials = []
    try:
        while (suggestion := policy.suggest()) is not None:
            index, params = suggestion
            values = {k: int(v) for k, v in params.items()}
            text = guest_run(1, run_s, warmup_s, delay_ms, ["xtune-bo"], values)
            mbit = runs_of(text)["xtune-bo"][1][0] / 1000
            trials.append({**values, "mbit_s": mbit})
            policy.complete(index, params, Outcome(mbit, 0.0, {}, True))
            print(f"bo trial {index}: {values} -> {mbit:.1f} Mbit/s", flush=True)
    finally:
        policy.close()
    best = max(trials, key=lambda t: t["mbit_s"])
    return {"values": {k: best[k] for k in ("rmem_max", "wmem_max")}, "trials": trials}


def summarize(text: str, reps: int) -> dict:
    runs = {c: runs_of(text).get(c, {}) for c in CONTENDERS}
    for c, by_rep in runs.items():
        if sorted(by_rep) != list(range(1, reps + 1)):
            raise RuntimeError(f"contender {c}: runs for repetitions {sorted(by_rep)}, expected 1..{reps}")
    values: dict[str, dict[str, dict[str, list[str]]]] = {}
    for m in VALUES.finditer(text):
        ns = values.setdefault(m[1], {}).setdefault(m[3], {"tcp_rmem": [], "tcp_wmem": []})
        ns["tcp_rmem"].append(m[4].replace(",", " "))
        ns["tcp_wmem"].append(m[5].replace(",", " "))
    restored = [m[3] == "1" for m in RESTORED.finditer(text)]
    visits = reps * len(CONTENDERS)
    if len(restored) != visits:
        raise RuntimeError(f"{len(restored)} restore checks in the console, expected {visits}")
    tuners = [int(m[2]) for m in TUNERS.finditer(text)]
    changes: dict[int, list[str]] = {}
    for m in CHANGE.finditer(text):
        changes.setdefault(int(m[1]), []).append(m[2])
    mbit = {c: [by_rep[r][0] / 1000 for r in sorted(by_rep)] for c, by_rep in runs.items()}
    ratio = {
        c: [x / d for x, d in zip(mbit[c], mbit["defaults"], strict=True)] for c in ("bpftune", "xtune-bo")
    }
    ping = PING.search(text)
    rtt = dict(zip(("min", "avg", "max"), map(float, ping.groups()), strict=True)) if ping else None
    return {
        "contenders": {
            c: {
                "throughput_mbit_s": mean_ci95(mbit[c]),
                "throughput_mbit_s_per_rep": mbit[c],
                "retransmits": mean_ci95([float(runs[c][r][1]) for r in sorted(runs[c])]),
                "values_after_run": values.get(c, {}),
                # The receiver's and the sender's buffer limits at the end of the measured run.
                **{
                    f"{side}_{key}_max": mean_ci95([float(v.split()[2]) for v in values[c][side][key]])
                    for side, key in (("srv", "tcp_rmem"), ("cli", "tcp_wmem"))
                },
            }
            for c in CONTENDERS
        },
        # Per repetition, a contender's throughput over the defaults' of the same repetition.
        "over_defaults": {c: {"throughput_ratio": mean_ci95(r), "per_rep": r} for c, r in ratio.items()},
        "bpftune_tuners_initialized_per_rep": tuners,
        "bpftune_tuners_initialized_min": min(tuners, default=0),
        "bpftune_changes_per_rep": {str(r): len(v) for r, v in sorted(changes.items())},
        "bpftune_changes_rep1": changes.get(1, []),
        "tunables_changed": sorted({m[3] for m in CHANGE.finditer(text)}),
        "restored_every_visit": all(restored),
        "visits": len(restored),
        "visits_restored": sum(restored),
        "guest_ping_ms": rtt,
        "guest_kernel": m[1] if (m := BOOTED.search(text)) else None,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=10, help="measured iperf3 run")
    ap.add_argument("--warmup", type=int, default=5, help="unmeasured iperf3 run before it")
    ap.add_argument("--delay-ms", type=int, default=50, help="netem delay on each veth end")
    ap.add_argument("--budget", type=int, default=8, help="BO trials (the first 3 are Sobol)")
    ap.add_argument("--quick", action="store_true", help="1 repetition, 4 s runs, 3 s warm-up, budget 3")
    a = ap.parse_args()
    if a.quick:
        a.reps, a.seconds, a.warmup, a.budget = 1, 4, 3, 3
    if os.geteuid() != 0:
        raise SystemExit("bench_bpftune: run as root (the guest's kernel is read from the root-owned cache)")
    bo = bo_pick(a.budget, min(3, a.budget), a.seconds, a.warmup, a.delay_ms)
    text = guest_run(a.reps, a.seconds, a.warmup, a.delay_ms, CONTENDERS, bo["values"])
    data = {
        "setup": {
            "reps": a.reps,
            "run_seconds": a.seconds,
            "warmup_seconds": a.warmup,
            "netem_delay_ms_each_way": a.delay_ms,
            "bpftune_commit": BPFTUNE_COMMIT,
            "bpftune_source": "https://github.com/oracle/bpftune",
            "bpftune_args": "-s -d -R (stderr log, debug, roll back on exit)",
            "bo_budget": a.budget,
        },
        "bo": bo,
        **summarize(text, a.reps),
    }
    c = data["contenders"]
    for name in CONTENDERS:
        t, retr = c[name]["throughput_mbit_s"], c[name]["retransmits"]["mean"]
        print(f"{name:9s} {t['mean']:.1f} ± {t['ci95'] or 0:.1f} Mbit/s  retransmits {retr:.0f}")
    for name, r in data["over_defaults"].items():
        print(f"{name} / defaults {statistics.fmean(r['per_rep']):.2f}")
    print(f"BO's pick {bo['values']}; restored every visit: {data['restored_every_visit']}")
    print(write_result("bpftune_guest", data, SOURCES))


if __name__ == "__main__":
    main()
