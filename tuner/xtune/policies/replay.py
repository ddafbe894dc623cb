"""`replay`: drive the knobs through the decisions of a recording, one trial per decision."""

from __future__ import annotations

from typing import Any

from xtune.config.schema import SloFile
from xtune.policies.base import TrialPolicy
from xtune.signals.recording import RecordingReader


class ReplayPolicy(TrialPolicy):
    name = "replay"

    def __init__(self, slo: SloFile) -> None:
        names = {k.name for k in slo.knobs}
        reader = RecordingReader(str(slo.policy.recording))
        self.steps = [
            {k: v for k, v in d.values.items() if k in names}
            for d in reader.decisions()
            if set(d.values) & names
        ]
        if not self.steps:
            raise ValueError(f"{slo.policy.recording}: no decisions about the knobs {sorted(names)}")
        self._next = 0

    def suggest(self) -> tuple[int, dict[str, Any]] | None:
        if self._next >= len(self.steps):
            return None
        self._next += 1
        return self._next - 1, self.steps[self._next - 1]
