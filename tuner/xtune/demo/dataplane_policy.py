"""How a tree for the dataplane server's RX_BATCH_SIZE is trained and read back: one definition.

experiments/bench_adaptive_dataplane.py (the full benchmark of the adaptive loop) and the demo's
third phase (adaptive_phase.py) observe the server with the same probes, train with `train`
below (as does the shipped model's recipe, models/recipes/dataplane_rx_batch.py) and run the tree
with this hysteresis, so they never drift apart (NEIGHBOURS is the benchmark's: the demo's sweep
has 4 regimes, not 11, and passes its own). The settings come from the benchmark's measurements;
the comments say what each one answers.
"""

from __future__ import annotations

from pathlib import Path

from xtune.learning.train import train_regimes
from xtune.policies.tree import TreeModel
from xtune.signals.recording import RecordingReader

OBJECTIVE = "func.dp_round.oldest_age_us.max"
# Rates per second, not counts per window: a window lasts 1 ms only nominally, and how much longer
# it runs depends on the CPU left to xobserve, which the value in effect changes. Counted per
# window, a value that stretched the windows looked faster than the others, passed the throughput
# bound alone and became the label of most heavy regimes.
THROUGHPUT = "func.dp_round.active_flows.mean * func.dp_round.rate"  # payloads delivered per second
# Requests taken per second: the arrival rate, which does not move with the value in effect (so
# the tree's choice does not feed back into its input). Flows active in a round are left out: a
# round takes at most RX_BATCH_SIZE requests, so they follow the value in effect. A Poisson count
# of 20 in one 1 ms window is 20 ± 4.5, so one window cannot tell 20k from 30k req/s: the feature
# is an envelope, the larger of a 3-window and a 32-window average. It follows a rise within 3-4
# windows (at 34k req/s each millisecond at a value too small leaves a backlog that takes tens of
# milliseconds to drain) and a fall over about 32, and the policy moves to a larger value at once.
# The slow side is 32 windows, not 12: a move to a smaller value waits for HOLD windows below a
# threshold, and a 12-window average (± 1.7k at 34k req/s, Poisson) or a server starved of the CPU
# for a few windows (no rounds, nothing taken) gets there more often than a 32-window one (± 1.0k);
# a fall of the load reaches the smaller values some 20 ms later.
ARRIVALS = "func.dp_round.taken.mean * func.dp_round.rate"
FEATURES = [f"max(ewma({ARRIVALS}, 3), ewma({ARRIVALS}, 32))"]
# A cell is judged by the 90th percentile over its windows of the oldest request's wait: a value
# near its capacity queues now and then, which a mean hides; the p99 of 1 ms windows in 1.2 s cells
# rests on a dozen windows and ranked the values differently from one sweep to the next.
OBJECTIVE_QUANTILE = 0.9
# Values within 30 % of a regime's best count as equally good there, and the label among them is the
# one with the least worst-case regret over all regimes: the values that suit heavy load differ by
# less than a 1 s cell varies between sweeps, and labels picked by that noise make the tree flap.
TOLERANCE = 0.3
# A regime's label must also suit its 2 nearest regimes (by arrival rate): the policy meets the
# rates between the measured ones, and a value best at 20k req/s that queues at 24k is no label.
NEIGHBOURS = 2
# When the server falls behind, the requests a round takes show its capacity, not the arrivals, and
# can look like a regime whose label is the value in effect: a trap. The guard watches the oldest
# request's wait: past what the labelled values ever showed in training, the fallback at once.
WATCH = ["func.dp_round.oldest_age_us.max"]
# RX_BATCH_SIZE's safe direction: a batch a step too small for the load queues without bound, a step
# too large makes requests wait a little for it to fill. Ties go to the larger value, and the
# fallback (the value when the signals cannot be trusted, e.g. the server fell behind) is the label
# of the heaviest regime. From the landscape: one 1.2 s cell cannot tell a value with a few percent
# of headroom from one that queues slowly, and labels or a fallback on that edge blew up live.
PREFER = "larger"
# The policy moves to a larger value at once and back only after HOLD windows in a row choose the
# smaller one: with the fast average's noise (a Poisson count per window), a short hold flapped
# between neighbouring values near a threshold (16 -> 8 at 34k req/s queues) every few windows.
HOLD = 20


def train(train: Path, heldout: Path, knob: str, out: Path, neighbours: int = NEIGHBOURS) -> TreeModel:
    """A tree for `knob` from a sweep recording, its card from a held-out one, saved to `out`."""
    return train_regimes(
        [train],
        [heldout],
        knob,
        OBJECTIVE,
        THROUGHPUT,
        out,
        FEATURES,
        objective_quantile=OBJECTIVE_QUANTILE,
        tolerance=TOLERANCE,
        neighbours=neighbours,
        watch=WATCH,
        prefer=PREFER,
    )


def probes(binary: Path | str) -> list[str]:
    """xobserve's func-family probes of the server: serve_batch() and dp_round()'s arguments as
    gauges (active_flows, backlog, oldest_age_us, taken), the signals the settings above read."""
    gauges = f"{binary}:dp_round:arg0/32=active_flows:arg1/32=backlog:arg2/32=oldest_age_us:arg3/32=taken"
    return [f"{binary}:serve_batch", gauges]


def values_over_time(rec: Path, knob: str, start_value: int, start_ns: int) -> list[list[float]]:
    """[ms since start_ns, value] at the start and at each applied decision of the tree (recorded by
    FramePump) that changed the value."""
    out: list[list[float]] = [[0.0, start_value]]
    for d in RecordingReader(rec).decisions():
        if d.policy == "tree" and d.extra.get("applied") and int(d.values[knob]) != out[-1][1]:
            at = int(d.extra.get("decided_ns", d.extra["frame_end_ns"]))
            out.append([round(max(at - start_ns, 0) / 1e6, 2), int(d.values[knob])])
    return out
