"""What `xtune run` prints: objectives with units, no empty SLO parts for a run without SLO lines,
one line per event (no blank lines), and ASCII only when the terminal cannot show Unicode; what
`xtune train` says of the model it wrote."""

from __future__ import annotations

import io
from types import SimpleNamespace

import pytest
from rich.console import Console
from xtune.cli.tune import card_text
from xtune.config import load_text
from xtune.config.units import expression_unit, format_spread, format_value
from xtune.signals.frames import Catalog, SignalInfo
from xtune.tuning.console import Progress, RunUnits, before_after
from xtune.tuning.loop import RunResult, Summary, TrialResult
from xtune.tuning.terminal import make_console

SLO = """
name: t
objective:
  minimize: p99(func.serve_batch.latency)
{slo}knobs:
  - name: rx_batch_size
    backend: sie-user
    target: "1:/plan"
    range: [8, 256]
policy:
  kind: grid
  budget: 2
"""
CATALOG = Catalog(
    [
        SignalInfo(1, "func.serve_batch.latency.p99", "us", "quantile", "uprobe"),
        SignalInfo(2, "func.serve_batch.latency", "us", "quantile", "uprobe"),
        SignalInfo(3, "func.serve_batch.rate", "calls/s", "gauge", "uprobe"),
    ]
)


def _console(encoding: str = "utf-8") -> tuple[Console, io.BytesIO]:
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding=encoding, errors="strict", write_through=True)
    return Console(file=out, width=200, force_terminal=False), raw


def _events(progress: Progress, slo_lines: int) -> None:
    slo = {i: (3012.0, 10.0) for i in range(slo_lines)}
    base = Summary(1843.2, 21.5, slo, 4)
    guard = [SimpleNamespace(bound=2861.4, slack=31.0)] * slo_lines
    progress("baseline", {"summary": base, "guard": guard})
    for i, value in enumerate((16, 8)):
        progress("trial", {"index": i, "params": {"rx_batch_size": value}, "windows": 2})
        for _ in range(2):
            progress("window", {"phase": "measure", "objective": 400.0, "margins": {}, "trial": i})
        result = TrialResult(
            i, {"rx_batch_size": value}, Summary(412.5, 7.0, slo, 2), True, False, meets_slo=True
        )
        progress("trial_done", {"result": result})


def _result(slo_lines: int) -> RunResult:
    slo = {i: (3012.0, 10.0) for i in range(slo_lines)}
    return RunResult(
        1,
        {"rx_batch_size": 64},
        Summary(1843.2, 21.5, slo, 4),
        Summary(412.5, 7.0, slo, 3),
        {"rx_batch_size": 16},
        [],
        0,
        [],
        ["func.serve_batch.rate >= 0.95 * baseline"] * slo_lines,
        "p99(func.serve_batch.latency)",
        -1.0,
    )


def test_units_from_catalog_and_file() -> None:
    units = {s.name: s.unit for s in CATALOG.signals}
    assert expression_unit("p99(func.serve_batch.latency)", units) == "us"
    assert expression_unit("0.5 * func.serve_batch.rate", units) == "calls/s"
    assert expression_unit("func.serve_batch.rate / p99(func.serve_batch.latency)", units) == ""
    slo = load_text(SLO.format(slo="slo:\n  - func.serve_batch.rate >= 0.95 * baseline\n"), "t.yaml")
    assert RunUnits.of(slo, CATALOG) == RunUnits("us", ["calls/s"])
    assert RunUnits.of(slo, None) == RunUnits("", [""])
    with_unit = load_text(SLO.format(slo="").replace("latency)\n", "latency)\n  unit: ms\n"), "t.yaml")
    assert RunUnits.of(with_unit, None).objective == "ms"


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [
        (2.183e05, "us", "218 ms"),
        (812.4321, "us", "812 µs"),
        (1843.2123456789, "us", "1.84 ms"),
        (2.183e05, "calls/s", "218,300 calls/s"),
        (11.72e6, "bytes/s", "93.8 Mbit/s"),
        (0.000123456, "", "0.000123"),
        (None, "us", "-"),
    ],
)
def test_format_value(value: float | None, unit: str, text: str) -> None:
    assert format_value(value, unit) == text
    assert "e+" not in format_value(value, unit) and "e-" not in format_value(value, unit)


def test_format_spread_keeps_the_prefix() -> None:
    assert format_spread(4100.0, 210.0, "us") == "4.10 ms ± 0.210 ms"
    assert format_spread(812.4, 12.1, "us", ascii=True) == "812 us +/- 12.1 us"


def test_progress_without_slo() -> None:
    console, raw = _console()
    slo = load_text(SLO.format(slo=""), "t.yaml")
    progress = Progress(console, slo, SimpleNamespace(catalog=CATALOG))  # type: ignore[arg-type]
    _events(progress, 0)
    lines = raw.getvalue().decode().splitlines()
    assert lines == [
        "baseline: objective 1.84 ms ± 0.0215 ms",
        "trial 0: rx_batch_size=16 -> objective 412 µs ok",
        "trial 1: rx_batch_size=8 -> objective 412 µs ok",
    ]


def test_progress_with_slo() -> None:
    console, raw = _console()
    slo = load_text(SLO.format(slo="slo:\n  - func.serve_batch.rate >= 0.95 * baseline\n"), "t.yaml")
    progress = Progress(console, slo, SimpleNamespace(catalog=CATALOG))  # type: ignore[arg-type]
    _events(progress, 1)
    lines = raw.getvalue().decode().splitlines()
    assert lines[0] == "baseline: objective 1.84 ms ± 0.0215 ms; SLO bounds 2,861 calls/s ± 31.0 calls/s"
    assert lines[1] == "trial 0: rx_batch_size=16 -> objective 412 µs (SLO left side 3,012 calls/s) ok"
    assert len(lines) == 3


@pytest.mark.parametrize("slo_lines", [0, 1])
def test_ascii_mode(slo_lines: int) -> None:
    console, raw = _console("ascii")  # strict: a non-ASCII character raises
    progress = Progress(console)
    progress.units = RunUnits("us", ["calls/s"] * slo_lines)
    _events(progress, slo_lines)
    before_after(_result(slo_lines), console, progress.units)
    text = raw.getvalue().decode("ascii")
    assert "812" not in text and "412 us" in text and "1.84 ms +/- 0.0215 ms" in text
    assert "+77.6 %" in text and ("SLO" in text) == bool(slo_lines)


def test_make_console_ascii(capsys: pytest.CaptureFixture[str]) -> None:
    console = make_console(ascii=True)
    assert console.encoding == "ascii"
    before_after(_result(1), console, RunUnits("us", ["calls/s"]))
    out = capsys.readouterr().out
    assert out.isascii() and "412 us +/- 7.00 us" in out and "+--" in out


def test_model_card_as_a_sentence() -> None:
    """A sweep-trained tree's card (as train_regimes writes it) read as a sentence, not a dict."""
    card = {
        "samples": 4439,
        "depth": 6,
        "leaves": 20,
        "regimes": {"4f_2k": 8, "64f_32k": 16},
        "labels_robust": {"4f_2k": 4, "64f_32k": 16},
        "fallback": 16,
        "training_accuracy": 0.9253830779480346,
        "heldout": {"accuracy": 0.4088541666666667, "windows": 1152, "regret_mean": 2.5698924731182795},
        "decision_us": {"p50": 0.12, "p99": 0.181},
    }
    assert card_text(card) == (
        "tree depth 6, 20 leaves from 4439 windows; labels per regime 4f_2k: 4, 64f_32k: 16; fallback 16;"
        " training accuracy 92.5 %; held-out accuracy 40.9 % over 1152 windows, mean regret 2.57x the"
        " best value's objective; a decision takes 120 ns (p50), 181 ns (p99)"
    )
