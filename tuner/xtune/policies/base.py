"""The trial-policy interface: suggest values, be told how they did."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Outcome:
    """A trial's measurement: means and standard errors over its windows.

    `objective` is the objective expression; `slo` maps each SLO line's index to its left side.
    `feasible` is False when the guard tripped (the values are what was measured until then).
    A standard error of None is unknown (the run's baseline had one window): the loop gives every
    trial of a run errors, or none, so a policy never mixes the two.
    """

    objective: float
    objective_sem: float | None
    slo: dict[int, tuple[float, float | None]]
    feasible: bool


class TrialPolicy(ABC):
    name: str = "policy"

    @abstractmethod
    def suggest(self) -> tuple[int, dict[str, Any]] | None:
        """(trial index, knob values) to try next, or None when the policy is done."""

    def complete(self, index: int, params: dict[str, Any], outcome: Outcome) -> None:  # noqa: B027
        """Hear how a trial went (default: nothing to learn)."""

    def fail(self, index: int, reason: str) -> None:  # noqa: B027
        """Hear that a suggested trial gave no measurement (default: nothing to learn)."""

    def close(self) -> None:  # noqa: B027
        """Release resources (worker processes)."""
