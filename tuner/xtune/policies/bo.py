"""`bo`: Bayesian optimization with Ax (1.x `Client` API, BoTorch underneath).

Knobs become Ax parameters (float ranges, log scale where the file says so, rounded to the knob's
step when applied: Ax's integer parameters blow up on ranges of millions; enums become choices),
the objective is the metric `objective` (its logarithm with `objective_scale: log`), each SLO
line `i` is the metric `slo<i>` with an outcome constraint at the bound resolved against the
measured baseline. Trials the guard stopped are
completed with what was measured, which violates the constraint, so the model learns the region
is infeasible. Stored trials of an experiment with the same name warm-start the model.

Ax and torch take seconds to import and fitting holds the interpreter, so the Ax client lives in
a worker process (`python -m xtune.policies.bo`, JSON lines over its stdin/stdout): the loop's
frame path never waits for a suggestion.
"""

from __future__ import annotations

import json
import logging
import math
import subprocess
import sys
import time
import warnings
from typing import Any

from xtune.config.schema import Knob, SloFile
from xtune.policies.base import Outcome, TrialPolicy
from xtune.trials.store import StoredTrial


def _spec(slo: SloFile, bounds: dict[int, float]) -> dict[str, Any]:
    params: list[dict[str, Any]] = []
    for k in slo.knobs:
        if k.values:
            params.append({"kind": "choice", "name": k.name, "values": list(k.values)})
        else:
            assert k.range is not None
            params.append({"kind": "range", "name": k.name, "bounds": list(k.range), "scale": k.scale})
    constraints = []
    for i, line in enumerate(slo.comparisons()):
        op = "<=" if line.op in ("<=", "<") else ">="
        constraints.append(f"slo{i} {op} {bounds[i]:.6f}")
    return {
        "name": slo.name,
        "params": params,
        "objective": "objective" if slo.objective.sign > 0 else "-objective",
        "constraints": constraints,
        "seed": slo.policy.seed,
        "init": slo.policy.init_trials,
    }


def _raw(outcome: Outcome, log: bool = False) -> dict[str, tuple[float, float | None]]:
    """Ax's raw data: (mean, sem) per metric, sem None where unknown (Ax then infers the noise)."""
    objective: tuple[float, float | None] = (outcome.objective, outcome.objective_sem)
    if log:  # delta method: sd(log X) ~ sd(X) / X
        sem = outcome.objective_sem
        scale = max(outcome.objective, 1e-12)
        objective = (math.log(scale), None if sem is None else sem / scale)
    raw = {"objective": objective}
    raw.update({f"slo{i}": v for i, v in outcome.slo.items()})
    return raw


def _worker() -> None:
    """The Ax client, serving JSON-line requests on stdin; the first line is the spec."""
    logging.disable(logging.INFO)
    warnings.filterwarnings("ignore")
    from ax import ChoiceParameterConfig, Client, RangeParameterConfig

    def send(status: str, value: Any) -> None:
        sys.stdout.write(json.dumps([status, value]) + "\n")
        sys.stdout.flush()

    spec = json.loads(sys.stdin.readline())

    client = Client(random_seed=spec["seed"])
    params: list[Any] = []
    for p in spec["params"]:
        if p["kind"] == "choice":
            params.append(ChoiceParameterConfig(name=p["name"], values=p["values"], parameter_type="str"))
        else:
            lo, hi = (float(b) for b in p["bounds"])
            params.append(
                RangeParameterConfig(
                    name=p["name"], parameter_type="float", bounds=(lo, hi), scaling=p["scale"]
                )
            )
    client.configure_experiment(parameters=params, name=spec["name"])
    client.configure_optimization(
        objective=spec["objective"], outcome_constraints=spec["constraints"] or None
    )
    client.configure_generation_strategy(method="fast", initialization_budget=spec["init"])
    send("ready", None)
    for line in sys.stdin:
        op, arg = json.loads(line)
        try:
            if op == "suggest":
                t0 = time.perf_counter()
                trials = client.get_next_trials(max_trials=1)
                (index, values), *_ = trials.items()
                send("ok", [index, dict(values), time.perf_counter() - t0])
            elif op == "complete":
                index, raw = arg
                client.complete_trial(trial_index=index, raw_data={k: tuple(v) for k, v in raw.items()})
                send("ok", None)
            elif op == "fail":  # no longer pending: Ax stops waiting for its data
                index, reason = arg
                client.mark_trial_failed(trial_index=index, failed_reason=reason)
                send("ok", None)
            elif op == "attach":
                values, raw = arg
                index = client.attach_trial(parameters=values)
                client.complete_trial(trial_index=index, raw_data={k: tuple(v) for k, v in raw.items()})
                send("ok", index)
            elif op == "stop":
                return
        except Exception as e:  # noqa: BLE001 - reported to the loop, which decides
            send("error", f"{type(e).__name__}: {e}")


class BoPolicy(TrialPolicy):
    name = "bo"

    def __init__(self, slo: SloFile, bounds: dict[int, float], warm: list[StoredTrial]) -> None:
        self.budget = slo.policy.budget
        self.patience = slo.policy.patience
        self.sign = slo.objective.sign
        self.log = slo.policy.objective_scale == "log"
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "xtune.policies.bo"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self._send(_spec(slo, bounds))
        self._call(None)
        self.suggest_seconds: list[float] = []
        self.warm_started = 0
        self.knobs = knobs = {k.name: k for k in slo.knobs}
        self.errors_known = slo.policy.baseline_windows >= 2  # as `Summary.with_noise_floor`
        for t in warm:
            if t.objective is None or set(t.params) != set(knobs):
                continue
            if any(k.range and not k.range[0] <= t.params[n] <= k.range[1] for n, k in knobs.items()):
                continue
            # Lines with no value (null in the store) are left out, as `Runner` leaves them out live.
            # Errors as the live trials carry them (known, or None for all when the baseline has one
            # window): Ax refuses a run where some errors are known and others are not.
            slo_raw = {
                int(i): (mean, self._sem(sem))
                for i, (mean, sem) in t.metrics.get("slo", {}).items()
                if mean is not None and math.isfinite(mean)
            }
            sem = self._sem(t.objective_sem)
            outcome = Outcome(t.objective, sem, slo_raw, t.status == "completed")
            sems = [outcome.objective_sem, *(v[1] for v in slo_raw.values())]
            if self.errors_known and None in sems:
                continue  # stored without an error (a run with a one-window baseline): it would mix
            raw = _raw(outcome, self.log)
            values = {n: float(v) if knobs[n].range else _choice(knobs[n], v) for n, v in t.params.items()}
            if any(v is None for v in values.values()):
                continue  # a choice this knob no longer has
            self._call(("attach", (values, raw)))
            self.warm_started += 1
        self._n = 0
        self._best: float | None = None
        self._since_best = 0

    def _send(self, doc: Any) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.write(json.dumps(doc) + "\n")
        self._proc.stdin.flush()

    def _call(self, request: tuple[str, Any] | None) -> Any:
        if request is not None:
            self._send(list(request))
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the Ax worker exited (code {self._proc.wait()})")
        status, value = json.loads(line)
        if status == "error":
            raise RuntimeError(f"Ax: {value}")
        return value

    def suggest(self) -> tuple[int, dict[str, Any]] | None:
        if self._n >= self.budget or (self.patience and self._since_best >= self.patience):
            return None
        index, values, seconds = self._call(("suggest", None))
        self.suggest_seconds.append(seconds)
        self._n += 1
        return index, {n: self.knobs[n].clamp(v) if self.knobs[n].range else v for n, v in values.items()}

    def complete(self, index: int, params: dict[str, Any], outcome: Outcome) -> None:
        self._call(("complete", (index, _raw(outcome, self.log))))
        score = self.sign * outcome.objective
        if outcome.feasible and (self._best is None or score > self._best):
            self._best = score
            self._since_best = 0
        else:
            self._since_best += 1

    def fail(self, index: int, reason: str) -> None:
        self._call(("fail", (index, reason)))

    def _sem(self, sem: float | None) -> float | None:
        """A stored trial's error as this run tells Ax of errors (None for all when unknown)."""
        return sem if self.errors_known and sem is not None and math.isfinite(sem) else None

    def close(self) -> None:
        if self._proc.poll() is None:
            try:
                self._send(["stop", None])
                self._proc.wait(10)
            except (BrokenPipeError, OSError, subprocess.TimeoutExpired):
                self._proc.kill()
                self._proc.wait()
        for stream in (self._proc.stdin, self._proc.stdout):
            if stream is not None:
                stream.close()


if __name__ == "__main__":
    _worker()


def _choice(knob: Knob, value: Any) -> str | None:
    """An enum knob's stored value as its choice: stores written before the tuner named choices
    hold xrtd's index into `values`."""
    values = knob.values or []
    if isinstance(value, int) and not isinstance(value, bool):
        return values[value] if 0 <= value < len(values) else None
    return value if value in values else None
