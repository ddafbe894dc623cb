"""Which values bench_web_pick takes apart: xtune-bo's in the web case, or, when BO kept the
defaults, the best trial its confirming pairs turned away (the run's `candidate`), checked against
the trials the case recorded."""

from __future__ import annotations

import json
from pathlib import Path

import bench_web_pick
import pytest

BEST = {"somaxconn": 4096.0, "syn_backlog": 1024.0, "wmem_default": 65536.0, "rmem_default": 8192.0,
        "fin_timeout": 30.0, "netdev_backlog": 2000.0, "autogroup": 0.0}  # fmt: skip


def write_case(tmp_path: Path, values: dict, history: list[dict]) -> None:
    result = {"kept_original": None if values else "did not confirm", "candidate": BEST}
    web = {"contenders": {"xtune-bo": {"values": values}}, "bo": {"result": result, "history": history}}
    (tmp_path / "case_studies.json").write_text(json.dumps({"cases": {"web": web}}))


def test_xtune_values_when_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench_web_pick, "RESULTS", tmp_path)
    write_case(tmp_path, {"net.core.somaxconn": 4096}, [])
    assert bench_web_pick.pick_of_case() == ({"net.core.somaxconn": 4096}, "xtune-bo's values in the case")


def test_best_trial_when_the_defaults_were_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench_web_pick, "RESULTS", tmp_path)
    write_case(tmp_path, {}, [{"index": 3, "params": BEST, "status": "completed", "objective": 1.0}])
    pick, which = bench_web_pick.pick_of_case()
    assert which.startswith("BO's best trial")
    assert pick["kernel.sched_autogroup_enabled"] == 0 and pick["net.ipv4.tcp_wmem[1]"] == 65536
    assert len(pick) == len(BEST)


def test_a_best_trial_the_case_did_not_record_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bench_web_pick, "RESULTS", tmp_path)
    write_case(tmp_path, {}, [{"index": 0, "params": {**BEST, "autogroup": 1.0}, "status": "completed"}])
    with pytest.raises(RuntimeError, match="not among the case's trials"):
        bench_web_pick.pick_of_case()


def test_a_best_trial_with_a_knob_the_file_lacks_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bench_web_pick, "RESULTS", tmp_path)
    monkeypatch.setitem(BEST, "gone", 1.0)
    write_case(tmp_path, {}, [{"index": 0, "params": dict(BEST), "status": "completed"}])
    with pytest.raises(RuntimeError, match=r"names \['gone'\], not knobs of"):
        bench_web_pick.pick_of_case()
