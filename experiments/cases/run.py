"""One case study end to end: its place, xrtd, xtune's BO, then every contender in one interleaved run.

Order: the place (namespaces, or a loop device) and a private xrtd start; the host's values of
every key any contender touches are read (the defaults contender, and the before/after check);
`xtune run` tunes the case's BO SLO file (its own server instance as workload, restored on exit);
its best values join the paper's profile, the TuneD profiles and the defaults in the interleaved
measurement, with the defaults measured a second time under xobserve (its cost on this load:
observed.py); xrtd restores everything; the place's and the host's values are read again and
compared.

A case with a perf-const (the key-value case's PROTO_IOBUF_LEN, through SIE) starts its server
before BO, from the binary its scope table names (refused if the build id differs), and gives
`xtune run` the server's pid and the engine's plan: the SLO file tunes that running process and
has no workload of its own. The server restarts for the interleaved runs as in every case, and
the perf-const is armed on each new process of a contender that sets it (interleave.py).
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from xtune.config import load
from xtune.config.schema import Knob
from xtune.host.netns import sysctl
from xtune.host.services import Services, free_port
from xtune.knobs.actuator import Actuator
from xtune.testing.stats import mean_ci95
from xtune.trials.store import Store

from cases import tuned
from cases.case import Case, Place
from cases.interleave import defaults_of, drop, interleave, knobs_for, probe, refused
from cases.observed import NAME as OBSERVED
from cases.observed import Observer, overhead
from cases.paired import compare
from cases.perf_const import BACKEND as SIE_BACKEND
from cases.perf_const import LiveConst, split
from cases.profiles import Contender, from_slo_file, in_namespace, is_sysfs, key_of, limit
from cases.servers import SERVERS
from cases.slo_lines import check, excluded

# How long `xtune run` gets after SIGTERM to stop its workload, put its knobs back and remove what
# it made, before it is killed.
UNWIND_S = 60.0


def run_unwinding(cmd: list[str], log_file: Path, grace_s: float = UNWIND_S) -> int:
    """Run `cmd` to its end, its output (stdout and stderr) into `log_file`; its exit code.

    If the caller is interrupted meanwhile (Ctrl-C, or SIGTERM turned into SystemExit), the command
    gets SIGTERM and `grace_s` to unwind before SIGKILL: subprocess.run would kill it at once and
    orphan its workload and namespaces. It runs in a setsid() group of its own, so a Ctrl-C at the terminal
    reaches only the caller and the command hears one signal, not a SIGINT cut short by a SIGTERM."""
    with log_file.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            return proc.wait()
        except BaseException:
            proc.terminate()
            try:
                proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            raise


def tune_bo(
    case: Case, variables: dict[str, str], xrtd_socket: str, work: Path, log: Callable[[str], None]
) -> dict:
    """`xtune run` on the case's BO file; the best values it measured again (None if none held)."""
    db = f"sqlite:///{work / 'trials.db'}"
    cmd = [str(Path(sys.executable).with_name("xtune")), "run", str(case.bo_file), "--db", db]
    cmd += ["--xrtd-socket", xrtd_socket, "--metrics-addr", f"127.0.0.1:{free_port()}"]
    for k, v in variables.items():
        cmd += ["--var", f"{k}={v}"]
    log_file = work / "bo.log"
    started = time.monotonic()
    code = run_unwinding(cmd, log_file)
    seconds = round(time.monotonic() - started, 1)
    if code != 0:
        tail = log_file.read_text(errors="replace")[-800:]
        raise RuntimeError(f"xtune run {case.bo_file.name} exited {code}: {tail}")
    store = Store(db)
    exp = store.experiments(load(case.bo_file, variables).name)[-1]
    trials = store.trials(exp.id)
    log(f"  xtune BO: {len(trials)} trials, result {exp.result}")
    failed = sum(t.status == "failed" for t in trials)
    # Each trial as BO met it: where the search went, its standard error (floored at the baseline's
    # spread), and which values the guard rolled back (status "infeasible"; a trial whose mean
    # misses an SLO line without tripping the guard reads "completed").
    history = [
        {"index": t.index, "params": t.params, "status": t.status, "objective": t.objective,
         "objective_sem": t.objective_sem}
        for t in trials
    ]  # fmt: skip
    return {
        "result": exp.result,
        "trials": len(trials),
        "failed": failed,
        "seconds": seconds,
        "history": history,
    }


def best_value(knob: Knob, value: float | str) -> int | str:
    """A best trial's value as a setting: an enum knob's choice by name (stores written before the
    tuner named choices hold the index into the knob's `values`)."""
    if isinstance(value, str):
        return value
    return knob.values[int(value)] if knob.values is not None else int(value)


def host_values(keys: list[str]) -> dict[str, str | None]:
    return {k: sysctl(None, k) for k in sorted(keys)}


def contenders_of(case: Case, place: Place) -> tuple[list[Contender], list[str]]:
    """Defaults, the paper's profile and the TuneD profiles as this case can apply them; a profile
    with nothing left to apply is not measured (it would be the defaults again) but listed."""
    fresh = "a fresh loop device" if place.device else "a fresh namespace"
    contenders = [Contender("defaults", f"the host's values at start ({fresh}: the kernel's)")]
    contenders.append(from_slo_file(case.paper_file, place.netns, place.variables))
    contenders += [tuned.contender(p, place.netns, device=place.device) for p in case.tuned_profiles]
    if case.reach is not None:
        reach = case.reach
        why = f"not a {'/'.join(p + '*' for p in reach)} sysctl: out of the {case.name} case's reach"
        for c in contenders:
            limit(c, lambda t: t.startswith(reach), why)
    if case.namespace_only:
        why = f"host-wide, not the server namespace's: the {case.name} case changes only its namespaces"
        for c in contenders:
            limit(c, lambda t: in_namespace(t, place.netns), why)
    empty = [c for c in contenders[1:] if not c.settings]
    missing = []
    for c in empty:
        reasons = "; ".join(sorted({str(n["reason"]) for n in c.not_applicable}))
        missing.append(f"{c.name}: none of its settings applies here ({reasons})")
    return [c for c in contenders if c not in empty], missing


def run_case(
    case: Case,
    reps: int,
    budget: int,
    quick: bool,
    log: Callable[[str], None] = print,
    only: set[str] | None = None,
) -> dict:
    """The case's JSON block; `only`: just these contenders (names as in the JSON; a smoke test)."""
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix=f"xtune-case-{case.name}-"))
    stack = contextlib.ExitStack()
    try:
        with case.place(work, quick) as place:
            variables = {**place.variables, "BUDGET": str(budget)}
            server = None
            if case.server is not None:
                (work / "server").mkdir()
                server = SERVERS[case.server](case.server, place.netns or "", case.port, work / "server")
            sie: dict[str, Any] | None = None
            if case.perf_const is not None:
                assert server is not None, f"{case.name}: a perf-const needs the case's server"
                pc = case.perf_const
                binary = pc.checked_binary()  # before anything starts: never another build
                server.binary = str(binary)
                plan = pc.write_plan(work / f"{pc.name}.plan")
                stack.callback(server.stop)  # on every way out, after xrtd (the stack unwinds LIFO)
                server.start()  # BO tunes this process: SIE's arming lives in it
                assert server.proc is not None
                variables.update(pc.variables(server.proc.pid, plan))
                sie = {"const": pc.name, "knob": pc.knob, "binary": str(binary), "scope": pc.scope.name,
                       "build_id": pc.table().binary.build_id, "plan": plan}  # fmt: skip
            bo_slo = load(case.bo_file, variables)
            contenders, missing = contenders_of(case, place)
            contenders = [c for c in contenders if only is None or c.name in only]
            with_bo = only is None or "xtune-bo" in only
            bo_knobs = {k.name: k for k in bo_slo.knobs}
            bo_targets = {k.name: k.target for k in bo_slo.knobs if k.backend != SIE_BACKEND}
            targets = sorted({t for c in contenders for t in c.settings} | set(bo_targets.values()))
            keys = sorted({key_of(t)[0] for t in targets if not is_sysfs(t)})
            before = host_values(keys)
            defaults = defaults_of(targets, place.netns)
            # xrtd's allow-list names exactly the sysctls the contenders set (net.* is its default;
            # its default sysfs rule, /sys/block/*/queue/*, takes the loop device's queue) and, with
            # a perf-const, the one executable whose running processes SIE may retune.
            allow = ["sysctl:net.*"] + [f"sysctl:{k}*" for k in keys if not k.startswith("net.")]
            if sie is not None:
                allow.append(f"sie-user:{sie['binary']}")
            svc = stack.enter_context(Services(families=[], observe=False, allow=allow))
            bo: dict[str, Any] = {"trials": 0, "result": None}
            best = kept = None
            if with_bo:
                log(f"{case.name}: xtune BO, budget {budget}")
                bo = tune_bo(case, variables, svc.xrtd_socket, work, log)
                best = (bo["result"] or {}).get("best")
            if server is not None:
                server.stop()  # with a perf-const, BO's process (disarmed by xtune run on its exit)
            xtune = Contender(
                "xtune-bo", f"{case.bo_file.name}: best of {bo['trials']} trials, measured again"
            )
            if with_bo:
                kept = (bo["result"] or {}).get("kept_original")
            if best:
                values = {n: best_value(bo_slo.knob(n), v) for n, v in best.items()}
                xtune.settings, xtune.perf_consts = split(values, bo_knobs)
                contenders.append(xtune)
            elif kept:  # xtune's answer is the defaults: no trial beat them when measured again
                xtune.source = f"{case.bo_file.name}: kept the defaults ({kept})"
                contenders.append(xtune)
            after_bo = defaults_of(targets, place.netns)
            knobs = knobs_for(targets, place.netns)
            no = refused(svc.xrtd_socket, knobs)
            drop(contenders, no)
            knobs = {t: k for t, k in knobs.items() if t not in no}
            actuator = Actuator(svc.xrtd_socket, list(knobs.values()))
            try:
                for c in contenders:
                    probe(actuator, knobs, defaults, c)
                log(f"{case.name}: {len(contenders)} contenders x {reps} repetitions, interleaved")
                assert bo_slo.benchmark is not None
                live = None
                if case.perf_const is not None and sie is not None:
                    live = LiveConst(case.perf_const, sie["plan"], svc.xrtd_socket)
                observer = Observer(netns=place.netns, device=place.device)
                extra = []
                if "defaults" in (c.name for c in contenders) and (only is None or OBSERVED in only):
                    extra.append(Contender(OBSERVED, "the defaults with xobserve running", observed=True))
                runs = interleave(
                    actuator, knobs, defaults, contenders + extra, server, bo_slo.benchmark,
                    bo_slo.objective.expression, reps, log, live, observer, place.namespaces,
                )  # fmt: skip
            finally:
                if server is not None:
                    server.stop()
                actuator.close(restore=True)
            place_restored = defaults_of(targets, place.netns) == defaults
            stack.close()  # xrtd stops (restoring anything it still holds) before the check
        after = host_values(keys)
    finally:
        stack.close()
        shutil.rmtree(work, ignore_errors=True)
    if not best and not kept and with_bo:
        missing.append("xtune-bo: no trial met the SLO")
    objectives = {
        c.name: {r["rep"]: r["objective"] for r in runs[c.name] if "objective" in r} for c in contenders
    }
    # The SLO lines judged on every contender's runs: one that breaks a line cannot win.
    judged = check(
        bo_slo.comparisons(),
        {c.name: [r["metrics"] for r in runs[c.name] if "metrics" in r] for c in contenders},
    )
    if sie is not None:
        sie = {k: v for k, v in sie.items() if k != "plan"}
        sie["contenders"] = [c.name for c in contenders if c.perf_consts]
    maximize = bo_slo.objective.sign > 0
    paired, verdict = compare(objectives, maximize, excluded(judged))
    observed = None
    if OBSERVED in runs:  # not a contender: the cost of observing the defaults' own load
        observed = overhead(observer, runs[OBSERVED], runs["defaults"], maximize, case.p99)
    out: dict[str, Any] = {
        "objective": bo_slo.objective.expression,
        "maximize": maximize,
        "slo_lines": [line.text for line in bo_slo.comparisons()],
        "p99_metric": case.p99,
        "benchmark": bo_slo.benchmark.command,
        "bo": {**bo, "restored_after_bo": after_bo == defaults},
        "contenders": {
            c.name: {**summary(c, runs[c.name], case.p99), "slo": judged[c.name], "paired": paired[c.name]}
            for c in contenders
        },
        "verdict": verdict,
        "missing_contenders": missing,
        # xobserve's cost on this load: the defaults again with it running, interleaved.
        "observer_overhead": observed,
        # The perf-const retuned through SIE: the binary every contender ran, and who set it.
        "sie": sie,
        "host_restored": before == after,
        # The server namespace's (or loop device's) values read again before it goes.
        "place_restored": place_restored,
        "host_values_before": before,
        # Wall time of the case (BO's share in `bo.seconds`): what a change of budget or runs costs.
        "seconds": round(time.monotonic() - started, 1),
    }
    if place.device:
        out["device_values_before"] = {t: v for t, v in defaults.items() if is_sysfs(t)}
    return out


def summary(c: Contender, runs: list[dict], p99: str) -> dict:
    ok = [r for r in runs if "objective" in r]
    return {
        "source": c.source,
        "notes": c.notes,
        "values": c.settings,
        "perf_consts": c.perf_consts,
        "not_applicable": c.not_applicable,
        "objective": mean_ci95([r["objective"] for r in ok]),
        "p99_ms": mean_ci95([r["metrics"][p99] for r in ok]),
        # Every figure the benchmark gives (`bench.` dropped: the README's figure paths split at dots).
        "metrics": {
            m.removeprefix("bench."): mean_ci95([r["metrics"][m] for r in ok])
            for m in (ok[0]["metrics"] if ok else {})
        },
        "failed_runs": len(runs) - len(ok),
        "runs": [r.get("objective") for r in runs],
        # Each run's figures (None: failed), what the SLO lines were judged on.
        "run_metrics": [
            {m.removeprefix("bench."): v for m, v in r["metrics"].items()} if "metrics" in r else None
            for r in runs
        ],
    }
