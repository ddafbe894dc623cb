"""Re-run a recording's frames through a tree policy offline and compare with its recorded decisions.

The live loop records every change of the tree's choice with the frame's sequence number (see
`FramePump._decide`); a replay feeds the same frames, in order, to a fresh policy and lists where
its choices differ. Identical decisions show that a model (or a new version of it) behaves as the
recorded one did on that traffic before it goes live. A recording of a run whose model was
swapped live holds the new model at the frame where it took over; the replay swaps there too
(with the same handover of state), so the whole run is reproduced, not only its first model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from xtune.policies.tree import TreeModel, TreePolicy
from xtune.signals.frames import Catalog, decode_frame
from xtune.signals.recording import Decision, RecordingReader, RecordType


@dataclass
class ReplayResult:
    frames: int
    recorded: list[tuple[int, dict[str, float | str]]]  # (frame seq, values) as recorded
    replayed: list[tuple[int, dict[str, float | str]]]  # the same, from the replayed policy
    differences: list[str] = field(default_factory=list)

    @property
    def identical(self) -> bool:
        return not self.differences


def replay_policy(recording: str | Path, model: TreeModel, hold: int = 1) -> ReplayResult:
    """`model` as the model the run started with; later models come from the recording."""
    policy = TreePolicy(model, hold)
    catalog: Catalog | None = None
    frames = 0
    recorded: list[tuple[int, dict[str, float | str]]] = []
    replayed: list[tuple[int, dict[str, float | str]]] = []
    last: dict[str, int] | None = None
    for rec in RecordingReader(str(recording)).records():
        if rec.type == RecordType.CATALOG:
            catalog = Catalog.from_json(rec.payload)
        elif rec.type == RecordType.FRAME:
            frame = decode_frame(rec.payload, catalog)
            frames += 1
            choice = policy.decide(frame.values, frame.empty)
            if choice != last:
                last = choice
                replayed.append((frame.seq, dict(choice)))
        elif rec.type == RecordType.DECISION:
            d = Decision.from_json(rec.payload)
            if d.policy == "swap":
                successor = TreePolicy(TreeModel.from_doc(d.extra.get("model"), f"{recording}: swap"))
                successor.take_over(policy)
                policy = successor
            elif d.policy == "tree" and "seq" in d.extra:
                values = {k: d.values[k] for k in policy.model.knobs if k in d.values}
                # A choice made while the loop held the tree off is recorded again when applied.
                if not recorded or recorded[-1][1] != values:
                    recorded.append((int(d.extra["seq"]), values))
    if not recorded:
        raise ValueError(f"{recording}: no tree decisions with frame numbers to compare with")
    result = ReplayResult(frames, recorded, replayed)
    for i in range(max(len(recorded), len(replayed))):
        a = recorded[i] if i < len(recorded) else None
        b = replayed[i] if i < len(replayed) else None
        if a != b:
            result.differences.append(f"decision {i}: recorded {_show(a)}, replayed {_show(b)}")
    return result


def _show(d: tuple[int, dict[str, float | str]] | None) -> str:
    return "nothing" if d is None else f"{d[1]} at frame {d[0]}"
