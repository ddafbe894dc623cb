"""Baselines for BO: random search (log-uniform where the knob is log scale) and exhaustive grid."""

from __future__ import annotations

import itertools
import math
import random
from typing import Any

from xtune.config.schema import SloFile
from xtune.policies.base import TrialPolicy


class RandomPolicy(TrialPolicy):
    name = "random"

    def __init__(self, slo: SloFile) -> None:
        self.knobs = slo.knobs
        self.budget = slo.policy.budget
        self.rng = random.Random(slo.policy.seed)
        self._n = 0

    def suggest(self) -> tuple[int, dict[str, Any]] | None:
        if self._n >= self.budget:
            return None
        params: dict[str, Any] = {}
        for k in self.knobs:
            if k.values:
                params[k.name] = self.rng.choice(k.values)
                continue
            assert k.range is not None
            lo, hi = k.range
            if k.scale == "log":
                params[k.name] = k.clamp(math.exp(self.rng.uniform(math.log(lo), math.log(hi))))
            else:
                params[k.name] = k.clamp(self.rng.uniform(lo, hi))
        self._n += 1
        return self._n - 1, params


class GridPolicy(TrialPolicy):
    name = "grid"

    def __init__(self, slo: SloFile) -> None:
        axes = [k.values if k.values else k.grid(slo.policy.grid_points) for k in slo.knobs]
        names = [k.name for k in slo.knobs]
        self.points = [dict(zip(names, p, strict=True)) for p in itertools.product(*axes)]
        self._n = 0

    def suggest(self) -> tuple[int, dict[str, Any]] | None:
        if self._n >= len(self.points):
            return None
        self._n += 1
        return self._n - 1, self.points[self._n - 1]
