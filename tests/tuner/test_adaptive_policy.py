"""Units of the adaptive loop's policy side: labels from measured landscapes, the guard's fallback,
hysteresis, a live model swap that hands over state, and offline replay of recorded decisions.

The recordings here are written frame by frame with known outcomes so that the expected labels
are known exactly; the live loop's own recording is replayed in test_tree.py.
"""

from __future__ import annotations

import random
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest
from xtune.learning.regimes import minimax_fallback, read_landscape, samples
from xtune.learning.replay import replay_policy
from xtune.learning.train import train_regimes
from xtune.policies.tree import TreeModel, TreePolicy
from xtune.signals.frames import Catalog, SignalInfo, encode_frame
from xtune.signals.recording import Decision, RecordingWriter

SIGNALS = [
    SignalInfo(1, "dp.active_flows", "flows", "gauge", "test"),
    SignalInfo(2, "dp.arrivals", "requests", "counter", "test"),
    SignalInfo(3, "func.serve_batch.latency.p99", "us", "quantile", "test"),
    SignalInfo(4, "func.serve_batch.rate", "calls/s", "gauge", "test"),
]
# regime -> (flows, arrivals, {value: (p99 us, throughput)}): few flows want small batches, many
# flows large ones; in "many", 8 has the lowest p99 but loses 20 % throughput, so 64 is the label.
REGIMES = {
    "few": (4, 300, {8: (80.0, 1000.0), 64: (400.0, 1000.0), 256: (900.0, 990.0)}),
    "many": (64, 2500, {8: (60.0, 800.0), 64: (150.0, 1000.0), 256: (300.0, 1000.0)}),
}


def write_sweep(path: Path, seed: int, order: list[str], windows: int = 12) -> None:
    rng = random.Random(seed)
    seq = 0
    with RecordingWriter(path) as rec:
        rec.append_catalog(Catalog(SIGNALS, 1_000_000))
        for regime in order:
            flows, arrivals, cells = REGIMES[regime]
            for value, (p99, tput) in cells.items():
                rec.append_decision(Decision("sweep", {"batch": value}, "sweep", extra={"regime": regime}))
                for _ in range(windows):
                    seq += 1
                    noise = rng.uniform(0.97, 1.03)
                    items = [
                        (1, 0, float(flows)),
                        (2, 0, arrivals * noise),
                        (3, 0, p99 * noise),
                        (4, 0, tput),
                    ]
                    rec.append_frame(encode_frame(seq, seq * 1_000_000, (seq + 1) * 1_000_000, items))


@pytest.fixture
def trained(tmp_path: Path) -> TreeModel:
    write_sweep(tmp_path / "train.xtrec", 1, ["few", "many"])
    write_sweep(tmp_path / "heldout.xtrec", 2, ["many", "few"], windows=8)
    return train_regimes(
        [tmp_path / "train.xtrec"],
        [tmp_path / "heldout.xtrec"],
        "batch",
        "func.serve_batch.latency.p99",
        "func.serve_batch.rate",
        tmp_path / "model.json",
        features=["dp.active_flows", "dp.arrivals"],
    )


def test_labels_are_the_measured_best_within_the_throughput_bound(tmp_path: Path) -> None:
    write_sweep(tmp_path / "s.xtrec", 1, ["few", "many"])
    land = read_landscape(
        [tmp_path / "s.xtrec"], "batch", "func.serve_batch.latency.p99", "func.serve_batch.rate"
    )
    assert land.best("few") == 8
    assert land.best("many") == 64  # 8 is faster there but serves only 80 % of the best throughput
    assert land.regret("many", 256) == pytest.approx(2.0, rel=0.05)
    # The fallback keeps throughput in every regime (8 does not in "many") with the smallest
    # worst-case regret: 64 (5x in "few") beats 256 (11x in "few").
    assert minimax_fallback(land) == 64


def test_windows_without_the_throughput_signal_count_as_zero(tmp_path: Path) -> None:
    """A large batch serves in rare, big rounds: its windows without a round delivered nothing.
    Skipping them would credit it with the throughput of its busy windows only."""
    path = tmp_path / "rare.xtrec"
    seq = 0
    with RecordingWriter(path) as rec:
        rec.append_catalog(Catalog(SIGNALS, 1_000_000))
        # value -> (p99, payloads per window with a round, one window in `every` has a round)
        for value, (p99, tput, every) in {8: (90.0, 100.0, 1), 256: (60.0, 150.0, 2)}.items():
            rec.append_decision(Decision("sweep", {"batch": value}, "sweep", extra={"regime": "r"}))
            for i in range(24):
                seq += 1
                items = [(3, 0, p99), (4, 0, tput)] if i % every == 0 else [(3, 0, p99)]
                rec.append_frame(encode_frame(seq, seq * 1_000_000, (seq + 1) * 1_000_000, items))
    land = read_landscape([path], "batch", "func.serve_batch.latency.p99", "func.serve_batch.rate")
    assert land.outcome("r", 256)[1] == pytest.approx(75.0)  # 150 in half the windows, 0 in the rest
    assert land.best("r") == 8  # 256 has the lower p99 but only 75 % of the throughput


def test_a_cell_measured_in_several_passes_is_judged_by_its_worst(tmp_path: Path) -> None:
    """A value near its capacity queues in one round of a sweep and not in the others: pooled, its
    good windows outnumber the bad and by the median it looks best (and within the throughput
    bound); judged by its worst pass it is not. A pass that lost throughput counts the same way."""
    path = tmp_path / "rounds.xtrec"
    seq = 0
    # (value, p99 per window, throughput) per pass, in sweep order: two rounds of one regime.
    passes = [
        (8, 100.0, 1000.0),
        (16, 150.0, 1000.0),
        (8, 100.0, 1000.0),
        (16, 150.0, 1000.0),
        (8, 2000.0, 900.0),  # a third round: 8 queued and fell behind
        (16, 150.0, 1000.0),
    ]
    with RecordingWriter(path) as rec:
        rec.append_catalog(Catalog(SIGNALS, 1_000_000))
        for value, p99, tput in passes:
            rec.append_decision(Decision("sweep", {"batch": value}, "sweep", extra={"regime": "r"}))
            for _ in range(10):
                seq += 1
                items = [(3, 0, p99), (4, 0, tput)]
                rec.append_frame(encode_frame(seq, seq * 1_000_000, (seq + 1) * 1_000_000, items))
    args = ([path], "batch", "func.serve_batch.latency.p99", "func.serve_batch.rate")
    land = read_landscape(*args, settle=0)
    assert [len(one) for one in land.cells["r"][8].passes] == [10, 10, 10]
    assert len(land.cells["r"][8].frames) == 30  # what features and the guard read: every window
    assert land.outcome("r", 8) == (2000.0, 900.0)  # the worst pass, not the pooled mean (733, 967)
    assert land.best("r") == 16  # 8 is outside the throughput bound in its worst pass
    quantile = read_landscape(*args, settle=0, objective_quantile=0.5)
    assert quantile.outcome("r", 8)[0] == 2000.0  # pooled, the median would read 100
    assert quantile.best("r") == 16  # pooled: 8 (median 100 against 150, 97 % of the throughput)


def test_trained_tree_card_reports_heldout_accuracy_and_regret(trained: TreeModel, tmp_path: Path) -> None:
    card = trained.card
    assert card["regimes"] == {"few": 8, "many": 64}
    assert card["heldout"]["accuracy"] == 1.0
    assert card["heldout"]["regret_max"] == pytest.approx(1.0)
    assert card["decision_us"]["p99"] > 0
    assert "heldout_accuracy_gbt" in card
    again = TreeModel.load(tmp_path / "model.json")
    assert again.guard == trained.guard
    assert TreePolicy(again).decide({"dp.active_flows": 64, "dp.arrivals": 2500}) == {"batch": 64}
    assert TreePolicy(again).decide({"dp.active_flows": 4, "dp.arrivals": 300}) == {"batch": 8}


def test_out_of_distribution_signals_give_the_fallback(trained: TreeModel) -> None:
    policy = TreePolicy(trained)
    fallback = trained.classes[trained.guard["fallback"]]
    assert policy.decide({"dp.active_flows": 64, "dp.arrivals": 2500}) == {"batch": 64}
    assert policy.decide({"dp.active_flows": 5000, "dp.arrivals": 2500}) == {"batch": fallback[0]}
    assert policy.state.out_of_range and policy.reason.startswith("out of training range")
    assert policy.decide({"dp.active_flows": 64, "dp.arrivals": 2500}) == {"batch": 64}
    assert not policy.state.out_of_range


def test_hysteresis_holds_a_new_setting_for_hold_windows(trained: TreeModel) -> None:
    many, few = {"dp.active_flows": 64, "dp.arrivals": 2500}, {"dp.active_flows": 4, "dp.arrivals": 300}
    policy = TreePolicy(trained, hold=3)
    assert policy.decide(many) == {"batch": 64}
    assert [policy.decide(x)["batch"] for x in (few, many, few, few)] == [64, 64, 64, 64]
    assert policy.decide(few) == {"batch": 8}  # the third window in a row


def test_live_swap_hands_over_state(trained: TreeModel) -> None:
    many, few = {"dp.active_flows": 64, "dp.arrivals": 2500}, {"dp.active_flows": 4, "dp.arrivals": 300}
    v1 = TreePolicy(trained, hold=3)
    v1.decide(many)
    v1.decide(few)
    v1.decide(few)  # candidate 8 has won 2 of the 3 windows it needs
    # v2: the same tree with its classes in another order, so indices must be carried by value.
    v2_model = TreeModel(trained.features, trained.knobs, trained.classes[::-1], [], trained.card, None)
    n = len(trained.classes) - 1
    v2_model.nodes = [[f, t, lft, r, n - c] for f, t, lft, r, c in trained.nodes]
    v2 = TreePolicy(v2_model)
    v2.take_over(v1)
    assert v2.hold == 3 and v2.state.windows == v1.state.windows
    assert v2.model.classes[v2.state.current] == [64] and v2.model.classes[v2.state.candidate] == [8]
    # The streak goes on: the third window takes effect, as it would have without the swap.
    assert v2.decide(few) == {"batch": 8}
    with pytest.raises(ValueError, match="decides"):
        TreePolicy(TreeModel(trained.features, ["other"], trained.classes, trained.nodes, {})).take_over(v1)


def test_live_swap_hands_over_the_feature_averages() -> None:
    """A model reading ewma(...) of a signal continues the average the running model kept for the
    same text, where a fresh one would start from the first window after the swap."""
    feature = "ewma(dp.arrivals, 8)"
    nodes = [[0, 1000.0, 1, 2, 0], [-1, 0.0, -1, -1, 0], [-1, 0.0, -1, -1, 1]]
    v1 = TreePolicy(TreeModel([feature], ["batch"], [[8], [64]], nodes, {}))
    for _ in range(30):
        v1.decide({"dp.arrivals": 2500})
    assert v1.decide({"dp.arrivals": 2500}) == {"batch": 64}
    v2 = TreePolicy(
        TreeModel(
            ["dp.active_flows", feature],
            ["batch"],
            [[64], [8]],
            [[1, 1000.0, 1, 2, 1], [-1, 0.0, -1, -1, 1], [-1, 0.0, -1, -1, 0]],
            {},
        )
    )
    fresh = TreePolicy(v2.model)
    v2.take_over(v1)
    quiet = {"dp.arrivals": 0.0}  # one quiet window: the average stays high, a fresh one reads 0
    assert v2.decide(quiet) == {"batch": 64}
    assert fresh.decide(quiet) == {"batch": 8}


def test_replay_reproduces_recorded_decisions_and_names_differences(
    trained: TreeModel, tmp_path: Path
) -> None:
    path = tmp_path / "live.xtrec"
    policy = TreePolicy(trained)
    last = None
    with RecordingWriter(path) as rec:
        rec.append_catalog(Catalog(SIGNALS, 1_000_000))
        for seq, flows in enumerate([4] * 5 + [64] * 5 + [9000] + [4] * 3, start=1):
            frame = encode_frame(
                seq, seq, seq + 1, [(1, 0, float(flows)), (2, 0, 300.0 if flows == 4 else 2500.0)]
            )
            rec.append_frame(frame)
            values = {"dp.active_flows": float(flows), "dp.arrivals": 300.0 if flows == 4 else 2500.0}
            choice = policy.decide(values)
            if choice != last:
                last = choice
                rec.append_decision(Decision("tree", dict(choice), policy.reason, extra={"seq": seq}))
    result = replay_policy(path, trained)
    assert result.identical and len(result.recorded) >= 3, result.differences
    # Another model (a constant tree) disagrees, and the replay says where.
    const = TreeModel(trained.features, trained.knobs, trained.classes, [[-1, 0.0, -1, -1, 0]], {})
    other = replay_policy(path, const)
    assert not other.identical and "decision" in other.differences[0]


# A rate ladder with the asymmetry of batching: a value too small for the rate queues (huge p99),
# a value larger than needed costs a little. "r20" alone measures 4 as best, by a hair over 8, but
# 4 queues at the next rate up; with `neighbours` the label must hold there too.
LADDER = {
    "r10": (10, {4: (100.0, 1000.0), 8: (120.0, 1000.0), 16: (200.0, 1000.0)}),
    "r20": (20, {4: (100.0, 1000.0), 8: (104.0, 1000.0), 16: (180.0, 1000.0)}),
    "r24": (24, {4: (5000.0, 1000.0), 8: (110.0, 1000.0), 16: (150.0, 1000.0)}),
    "r40": (40, {4: (9000.0, 600.0), 8: (300.0, 1000.0), 16: (140.0, 1000.0)}),
}


def write_ladder(
    path: Path,
    windows: int = 40,
    rate: Callable[[str, int, float], float] = lambda _r, _i, a: a,
    noise: float = 0.02,
) -> None:
    """LADDER's cells, `windows` each; a window's arrivals are `rate(regime, i, arrivals)` with
    `noise` (a share, uniform) on it; i is the window's index in its cell."""
    rng = random.Random(3)
    seq = 0
    with RecordingWriter(path) as rec:
        rec.append_catalog(Catalog(SIGNALS, 1_000_000))
        for regime, (arrivals, cells) in LADDER.items():
            for value, (p99, tput) in cells.items():
                rec.append_decision(Decision("sweep", {"batch": value}, "sweep", extra={"regime": regime}))
                for i in range(windows):
                    seq += 1
                    jitter = rng.uniform(1 - noise, 1 + noise)
                    items = [(2, 0, rate(regime, i, arrivals) * jitter), (3, 0, p99), (4, 0, tput)]
                    rec.append_frame(encode_frame(seq, seq * 1_000_000, (seq + 1) * 1_000_000, items))


def test_tolerance_breaks_near_ties_by_worst_case_regret(tmp_path: Path) -> None:
    write_ladder(tmp_path / "l.xtrec")
    args = ([tmp_path / "l.xtrec"], "batch", "func.serve_batch.latency.p99", "func.serve_batch.rate")
    assert read_landscape(*args).best("r20") == 4  # lowest p99, by 4 %
    tolerant = read_landscape(*args, tolerance=0.1)
    # 4 and 8 tie within 10 %; 8's worst regret over all regimes (300/140) is far below 4's (50x).
    assert tolerant.best("r20") == 8
    assert tolerant.worst_regret(4) == float("inf")  # outside the throughput bound at r40
    with pytest.raises(ValueError, match="tolerance"):
        read_landscape(*args, tolerance=-1)


def test_neighbour_robust_labels_and_least_regret_leaves(tmp_path: Path) -> None:
    write_ladder(tmp_path / "l.xtrec")
    common = ([tmp_path / "l.xtrec"], [], "batch", "func.serve_batch.latency.p99", "func.serve_batch.rate")
    plain = train_regimes(*common, tmp_path / "a.json", features=["dp.arrivals"])
    assert plain.card["labels_robust"]["r20"] == 4
    robust = train_regimes(*common, tmp_path / "b.json", features=["ewma(dp.arrivals, 4)"], neighbours=1)
    # r20's nearest regime is r24, where 4 queues: the label is 8; r10 keeps its own best.
    assert robust.card["neighbours"]["r20"] == ["r24"]
    assert robust.card["labels_robust"]["r20"] == 8
    assert robust.card["labels_robust"]["r10"] == 4
    policy = TreePolicy(robust)
    for _ in range(10):
        choice = policy.decide({"dp.arrivals": 21.0})
    assert choice == {"batch": 8}


def test_watched_signal_outside_its_labelled_range_gives_the_fallback(tmp_path: Path) -> None:
    """The guard watches a signal the tree does not split on: its range comes from the windows of
    each regime's labelled value, and outside it the fallback applies at once."""
    write_ladder(tmp_path / "l.xtrec")
    common = ([tmp_path / "l.xtrec"], [], "batch", "func.serve_batch.latency.p99", "func.serve_batch.rate")
    model = train_regimes(
        *common, tmp_path / "w.json", features=["dp.arrivals"], watch=["func.serve_batch.latency.p99"]
    )
    (watched,) = model.guard["watch"]
    lo, hi = watched["range"]
    assert lo <= 100.0 and 140.0 <= hi < 5000.0  # the labelled values and the fallback, not 4 queueing
    again = TreePolicy(TreeModel.load(tmp_path / "w.json"))
    fallback = {"batch": model.classes[model.guard["fallback"]][0]}
    assert again.decide({"dp.arrivals": 10.0, "func.serve_batch.latency.p99": 100.0}) == {"batch": 4}
    assert again.decide({"dp.arrivals": 10.0, "func.serve_batch.latency.p99": 5000.0}) == fallback
    assert "outside its range" in again.reason
    # The fallback holds through windows without the watched signal (a server catching up can make
    # no call in a window), and through those where the frame marks it empty ...
    assert again.decide({"dp.arrivals": 10.0}) == fallback
    empty = {"dp.arrivals": 10.0, "func.serve_batch.latency.p99": 0.0}
    assert again.decide(empty, {"func.serve_batch.latency.p99"}) == fallback
    assert "fallback holds" in again.reason
    # ... until the signal is back in range in `hold` windows (1 here) that have it.
    assert again.decide({"dp.arrivals": 10.0, "func.serve_batch.latency.p99": 100.0}) == {"batch": 4}
    held = TreePolicy(TreeModel.load(tmp_path / "w.json"), hold=3)
    held.decide({"dp.arrivals": 10.0, "func.serve_batch.latency.p99": 5000.0})
    ok = {"dp.arrivals": 10.0, "func.serve_batch.latency.p99": 100.0}
    # 3 windows back in range release the fallback; the tree's choice then waits out its hysteresis.
    assert [held.decide(ok) for _ in range(5)] == [fallback] * 4 + [{"batch": 4}]
    assert again.decide({"dp.arrivals": 10.0}) == {"batch": 4}  # absent and not tripped: nothing to judge
    with pytest.raises(ValueError, match="signal name"):
        train_regimes(*common, tmp_path / "x.json", features=["dp.arrivals"], watch=["a * b"])


def test_leaves_take_the_least_regret_value_and_cells_outside_the_bound_do_not_train(tmp_path: Path) -> None:
    """With one split, r24 and r40 share a leaf. Its majority label is 8 (r24 has more cells within
    the throughput bound), but 8 costs r40 2.1x while 16 costs r24 1.4x: the leaf gets 16. The
    cell of 4 at r40 serves 60 % of the best throughput and gives no training windows."""
    write_ladder(tmp_path / "l.xtrec")
    common = ([tmp_path / "l.xtrec"], [], "batch", "func.serve_batch.latency.p99", "func.serve_batch.rate")
    model = train_regimes(*common, tmp_path / "d.json", features=["dp.arrivals"], max_depth=1)
    assert model.card["relabelled_leaves"] == 1
    policy = TreePolicy(model)
    assert [policy.decide({"dp.arrivals": a})["batch"] for a in (10.0, 24.0, 40.0)] == [4, 16, 16]
    assert model.card["samples"] == 11 * (40 - 2)  # 12 cells less 4 at r40, each less 2 settling windows


def test_a_few_stray_windows_of_a_heavier_regime_do_not_relabel_a_leaf(tmp_path: Path) -> None:
    """r10's leaf also gets 2 of each r24 cell's 40 windows (a noisy rate read low). 4 queues at
    r24, so counting those strays would give the whole leaf 8; they are 5 % of its windows, under
    the share a regime needs to count, and the leaf keeps r10's best, 4. With the share at 0 the
    strays count again."""
    path = tmp_path / "s.xtrec"
    write_ladder(path, rate=lambda regime, i, a: 10.0 if regime == "r24" and i >= 38 else a, noise=0.0)
    common = ([path], [], "batch", "func.serve_batch.latency.p99", "func.serve_batch.rate")
    model = train_regimes(*common, tmp_path / "m.json", features=["dp.arrivals"], prefer="larger")
    assert model.card["leaf_regime_share"] == 0.1
    assert TreePolicy(model).decide({"dp.arrivals": 10.0}) == {"batch": 4}
    every = train_regimes(
        *common, tmp_path / "e.json", features=["dp.arrivals"], prefer="larger", leaf_regime_share=0.0
    )
    assert TreePolicy(every).decide({"dp.arrivals": 10.0}) == {"batch": 8}
    with pytest.raises(ValueError, match="leaf_regime_share"):
        train_regimes(*common, tmp_path / "x.json", features=["dp.arrivals"], leaf_regime_share=1.0)


def test_a_leaf_where_no_regime_reaches_the_share_counts_every_regime(tmp_path: Path) -> None:
    """A feature that tells no regime apart gives one leaf holding the 4 regimes at 25 % each; with
    a share of 30 % none counts alone, and all of them do: the leaf gets a value that queues in
    none (not 4, which queues at r24 and r40 and would win an empty comparison)."""
    write_ladder(tmp_path / "l.xtrec")
    common = ([tmp_path / "l.xtrec"], [], "batch", "func.serve_batch.latency.p99", "func.serve_batch.rate")
    model = train_regimes(*common, tmp_path / "c.json", features=["0 * dp.arrivals"], leaf_regime_share=0.3)
    assert model.card["leaves"] == 1
    assert TreePolicy(model).decide({"dp.arrivals": 10.0})["batch"] in (8, 16)


def test_ewma_features_leave_out_each_cells_warm_up(tmp_path: Path) -> None:
    write_ladder(tmp_path / "l.xtrec")
    land = read_landscape(
        [tmp_path / "l.xtrec"], "batch", "func.serve_batch.latency.p99", "func.serve_batch.rate"
    )
    plain, _, _ = samples(land, ["dp.arrivals"])
    smooth, _, _ = samples(land, ["ewma(dp.arrivals, 4)"])
    assert len(plain) == 12 * (40 - 2)
    assert len(smooth) == 12 * (40 - 2 - 4)  # the average's first 4 windows stand for one window


def test_a_stated_safe_direction_breaks_ties_and_sets_the_fallback(tmp_path: Path) -> None:
    """With prefer="larger", values within the tolerance go to the larger one (r10: 8 at 1.2x the
    best ties with 4 under 25 %) and the fallback is the heaviest regime's label; without it the
    tie goes by measured regret (4)."""
    write_ladder(tmp_path / "l.xtrec")
    common = ([tmp_path / "l.xtrec"], [], "batch", "func.serve_batch.latency.p99", "func.serve_batch.rate")
    plain = train_regimes(*common, tmp_path / "p.json", features=["dp.arrivals"], tolerance=0.25)
    safe = train_regimes(
        *common, tmp_path / "s.json", features=["dp.arrivals"], tolerance=0.25, prefer="larger"
    )
    assert plain.card["labels_robust"]["r10"] == 4
    assert safe.card["labels_robust"] == {"r10": 8, "r20": 8, "r24": 8, "r40": 16}
    assert safe.card["fallback"] == 16 and safe.card["prefer"] == "larger"
    with pytest.raises(ValueError, match="prefer"):
        train_regimes(*common, tmp_path / "x.json", features=["dp.arrivals"], prefer="up")


def test_a_count_per_window_in_the_spec_warns_and_a_rate_does_not(tmp_path: Path) -> None:
    """A window's real length moves with the value in effect, and a count per window with it."""
    write_ladder(tmp_path / "l.xtrec", windows=8)
    args = ([tmp_path / "l.xtrec"], [], "batch", "func.serve_batch.latency.p99")
    with pytest.warns(UserWarning, match=r"func\.serve_batch\.calls: per-window counts .* use rates"):
        train_regimes(
            *args, "func.serve_batch.rate", tmp_path / "c.json", features=["func.serve_batch.calls"]
        )
    with pytest.warns(UserWarning, match="per-window counts"):
        train_regimes(*args, "func.serve_batch.calls", tmp_path / "t.json", features=["dp.arrivals"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        train_regimes(*args, "func.serve_batch.rate", tmp_path / "r.json", features=["ewma(dp.arrivals, 2)"])
        train_regimes(
            *args,
            "func.serve_batch.rate",
            tmp_path / "m.json",
            features=["dp.active_flows * func.serve_batch.rate"],
        )


def test_watch_range_keeps_each_cells_tail() -> None:
    """A small cell with a high tail (the fallback at a light load, where its batch waits to fill)
    stays in the range: a quantile of the pooled windows would cut it off, and the fallback would
    keep tripping the watch it was applied for."""
    from xtune.learning.regimes import Cell, Landscape
    from xtune.learning.train import _watch_ranges

    sig = "func.dp_round.oldest_age_us.max"
    heavy = Cell("heavy", 16, [[{sig: 100.0 + i % 50} for i in range(20000)]])
    light = Cell("light", 16, [[{sig: 800.0 + i % 5} for i in range(10)]])
    land = Landscape("batch", "x", "y", {"heavy": {16: heavy}, "light": {16: light}})
    ((w,),) = [_watch_ranges(land, {"heavy": 16, "light": 16}, 16, [sig], 0.999, 0.0)]
    assert w["range"][1] >= 800.0


def test_drain_ranges_are_what_each_setting_showed_under_the_loads_another_suits(tmp_path: Path) -> None:
    """drain[c][k]: the watched signal's range over the cells of value c in the regimes labelled k
    (each cell cut at its quantiles, widened by the margin); None where no regime is labelled k."""
    write_ladder(tmp_path / "l.xtrec")
    common = ([tmp_path / "l.xtrec"], [], "batch", "func.serve_batch.latency.p99", "func.serve_batch.rate")
    model = train_regimes(
        *common,
        tmp_path / "d.json",
        features=["dp.arrivals"],
        tolerance=0.25,
        prefer="larger",
        watch=["func.serve_batch.latency.p99"],
    )
    assert model.card["labels_robust"] == {"r10": 8, "r20": 8, "r24": 8, "r40": 16}
    (w,) = model.guard["watch"]
    at = {v: model.classes.index([v]) for v in (4, 8, 16)}
    # 16 where 8 is the label (r10, r20, r24): 200, 180, 150; widened by 10 % of the span.
    assert w["drain"][at[16]][at[8]] == pytest.approx([150.0 - 5.0, 200.0 + 5.0])
    assert w["drain"][at[8]][at[16]] == pytest.approx([270.0, 330.0])  # 8 at r40 alone: 300 ± 10 %
    assert w["drain"][at[16]][at[4]] is None  # no regime is labelled 4
    assert TreeModel.load(tmp_path / "d.json").guard == model.guard


def drain_model(drain: list) -> TreeModel:
    """arrivals <= 10: 2, else 16; prefer larger; the wait watched with a wide range."""
    nodes = [[0, 10.0, 1, 2, 1], [-1, 0.0, -1, -1, 0], [-1, 0.0, -1, -1, 1]]
    watch = [{"signal": "dp.wait", "range": [0.0, 1e6], "drain": drain}]
    guard = {"ranges": [[0.0, 100.0]], "fallback": 1, "watch": watch}
    return TreeModel(["dp.arrivals"], ["batch"], [[2], [16]], nodes, {"prefer": "larger"}, guard)


def test_a_move_to_the_unsafe_side_waits_while_the_backlog_drains() -> None:
    """After a heavy phase the arrivals fall at once, but its backlog keeps the wait above what 16
    showed under the loads 2 suits: each such window starts the hold over, so the policy leaves 16
    only once the backlog is gone. Moves to the safe side never wait."""
    policy = TreePolicy(drain_model([[None, None], [[10.0, 300.0], None]]), hold=3)
    heavy, backlog, drained = (
        {"dp.arrivals": 50.0, "dp.wait": 900.0},
        {"dp.arrivals": 5.0, "dp.wait": 1000.0},
        {"dp.arrivals": 5.0, "dp.wait": 200.0},
    )
    assert policy.decide(heavy) == {"batch": 16}
    assert policy.decide(backlog) == {"batch": 16}
    assert policy.reason.startswith("holding: dp.wait = 1000 above 300")
    choices = [policy.decide(w) for w in (drained, drained, backlog, drained, drained, drained)]
    assert choices == [{"batch": 16}] * 5 + [{"batch": 2}]  # the backlog window restarted the hold
    assert policy.decide(heavy) == {"batch": 16}  # toward the safe side at once, whatever the wait
    # A window without the signal (no round ran) does not judge; null entries never hold.
    quiet = TreePolicy(drain_model([[None, None], [[10.0, 300.0], None]]), hold=2)
    quiet.decide(heavy)
    assert [quiet.decide({"dp.arrivals": 5.0}) for _ in range(2)] == [{"batch": 16}, {"batch": 2}]
    free = TreePolicy(drain_model([[None, None], [None, None]]), hold=1)
    free.decide(heavy)
    assert free.decide(backlog) == {"batch": 2}


def test_malformed_drain_is_refused(tmp_path: Path) -> None:
    """Each bad drain is refused naming its entry: the matrix's shape, a range out of order, a
    bound that is not finite."""
    cases = {
        r"guard\.watch\[0\]\.drain: needs 2 rows of 2 entries": [[None]],
        r"guard\.watch\[0\]\.drain\[1\]\[0\]: lo 5 is above hi 1": [[None, None], [[5.0, 1.0], None]],
        r"guard\.watch\[0\]\.drain\[1\]\[0\]\[1\]: .*finite": [[None, None], [[0.0, float("inf")], None]],
    }
    for message, drain in cases.items():
        model = drain_model(drain)
        model.save(tmp_path / "m.json")
        with pytest.raises(ValueError, match=r"m\.json: " + message):
            TreeModel.load(tmp_path / "m.json")
