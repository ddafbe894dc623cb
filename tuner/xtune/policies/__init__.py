"""Policies: what to try next (bo, random, grid, static, replay) or decide per window (tree)."""

from __future__ import annotations

from xtune.config.schema import SloFile
from xtune.policies.base import Outcome, TrialPolicy
from xtune.trials.store import StoredTrial


def make_policy(slo: SloFile, bounds: dict[int, float], warm: list[StoredTrial] | None = None) -> TrialPolicy:
    """The trial policy the file asks for (`tree` runs per window in the loop instead)."""
    kind = slo.policy.kind
    if kind == "bo":
        from xtune.policies.bo import BoPolicy

        return BoPolicy(slo, bounds, warm or [])
    if kind in ("random", "grid"):
        from xtune.policies.search import GridPolicy, RandomPolicy

        return RandomPolicy(slo) if kind == "random" else GridPolicy(slo)
    if kind == "static":
        from xtune.policies.static import StaticPolicy

        return StaticPolicy(slo)
    if kind == "replay":
        from xtune.policies.replay import ReplayPolicy

        return ReplayPolicy(slo)
    raise ValueError(f"policy {kind!r} is not a trial policy")


__all__ = ["Outcome", "TrialPolicy", "make_policy"]
