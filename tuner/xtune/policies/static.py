"""`static`: apply one fixed profile (e.g. a published sysctl table) and measure it."""

from __future__ import annotations

from typing import Any

from xtune.config.schema import SloFile
from xtune.policies.base import TrialPolicy


class StaticPolicy(TrialPolicy):
    name = "static"

    def __init__(self, slo: SloFile) -> None:
        self.profile: dict[str, Any] = dict(slo.policy.profile or {})
        self._done = False

    def suggest(self) -> tuple[int, dict[str, Any]] | None:
        if self._done:
            return None
        self._done = True
        return 0, self.profile
