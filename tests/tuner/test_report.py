"""`xtune report`: the page says in one line what happened, shows tables (not dict reprs) with
units, and draws SLO margins only for a run that has SLO lines; its plots are in readable units
with plain tick labels (read as HTML, and as headless chromium shows it). `xtune trials` says the
same line, in ASCII where the locale has no more."""

from __future__ import annotations

import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By
from xtune import paths
from xtune.trials.report import write_report
from xtune.trials.store import Store, StoredTrial


class Page(HTMLParser):
    """Text by element: the summary paragraph, the headings, the images, the table cells."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[tuple[str, dict[str, str | None]]] = []
        self.summary = ""
        self.headings: list[str] = []
        self.images: list[str] = []
        self.cells: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "img":
            self.images.append(dict(attrs)["src"] or "")
        elif tag in ("p", "h2", "td", "th", "style"):
            self.stack.append((tag, dict(attrs)))
            if tag == "td":
                self.cells.append("")

    def handle_endtag(self, tag: str) -> None:
        if self.stack and self.stack[-1][0] == tag:
            self.stack.pop()

    def handle_data(self, data: str) -> None:
        tag, attrs = self.stack[-1] if self.stack else ("", {})
        if tag != "style":
            self.text.append(data)
        if tag == "p" and attrs.get("class") == "summary":
            self.summary += data
        elif tag == "h2":
            self.headings.append(data)
        elif tag == "td":
            self.cells[-1] += data


OBJECTIVES = (1843.21234567891, 412.3456789012, 398.0)  # us: one plot of a few ms


def _run(store: Store, slo: list[str], rollback: bool, objectives: tuple[float, ...] = OBJECTIVES) -> int:
    config = {
        "name": "r",
        "objective": {"minimize": "p99(func.serve_batch.latency)"},
        "slo": slo,
        "units": {"objective": "us", "slo": ["calls/s"] * len(slo)},
    }
    exp = store.new_experiment("r", config)
    # Each trial's SLO left sides, as the Runner stores them: {line index: [mean, sem]}.
    served = [[3010.0, 15.0], [2960.0, 12.0], [2500.0, 30.0]]
    for i, (value, obj) in enumerate(zip((64, 16, 8), objectives, strict=True)):
        status = "completed" if i < 2 else "infeasible"
        metrics = {"slo": {str(k): served[i] for k in range(len(slo))}, "windows": 3}
        store.add_trial(
            exp, StoredTrial(i, "bo", {"rx_batch_size": value}, status, obj, 21.123456, metrics), i, i + 1
        )
    for phase, obj in [("baseline", 1800.0), ("baseline", 1900.0), ("final", 410.0), ("final", 420.0)]:
        margins = {line: 0.1 for line in slo}
        store.add_measurement(
            exp, phase, obj, margins, {"rx_batch_size": 64 if phase == "baseline" else 16}, None
        )
    if rollback:
        store.add_rollback(
            exp, 2, "served rate below its bound", {"rx_batch_size": 8}, {"rx_batch_size": 64}, 2
        )
    store.update_experiment(
        exp,
        baseline={
            "values": {"rx_batch_size": 64},
            "objective": 1850.0,
            "bounds": [2850.0] * len(slo),
            "slack": [40.0] * len(slo),
        },
        result={"best": {"rx_batch_size": 16}, "before": 1850.0, "after": 415.0, "gain": 0.7757},
    )
    return exp


@pytest.mark.parametrize("with_slo", [False, True])
def test_report_page(tmp_path: Path, with_slo: bool) -> None:
    store = Store(f"sqlite:///{tmp_path / 'trials.db'}")
    slo = ["func.dp_round.taken.mean * func.dp_round.rate >= 0.95 * baseline"] if with_slo else []
    exp = _run(store, slo, rollback=with_slo)
    out = tmp_path / "report"
    page = Page()
    page.feed(write_report(store, exp, out).read_text())
    text = "".join(page.text)

    # one line: before -> after with units and spread, gain, trials, rollbacks
    assert "1.85 ms ± 0.0707 ms → 415 µs ± 7.07 µs" in page.summary, page.summary
    assert "+77.6 %" in page.summary and "rx_batch_size=16" in page.summary
    assert "3 trials (2 completed, 1 infeasible)" in page.summary
    assert ("rollbacks: 1" if with_slo else "rollbacks: none") in page.summary

    assert "{" not in text and "}" not in text, "a dict repr in the page"
    assert "(us)" not in text and "e+" not in text
    assert "412.3456" not in text and "1843.2123" not in text, "too many decimals"
    assert "1,843 µs ± 21.1 µs" not in page.cells and "1.84 ms ± 0.0211 ms" in page.cells
    assert "rx_batch_size=64" in page.cells

    margins = "SLO margins over time" in page.headings
    assert margins == with_slo and ("slo_margin.png" in page.images) == with_slo
    assert (out / "slo_margin.png").exists() == with_slo
    assert (out / "objective.png").stat().st_size > 0 and (out / "knobs.png").stat().st_size > 0
    if with_slo:  # before: the bound from the baseline; after: the best trial's (16) left side
        assert "bound 2,850 calls/s ± 40.0 calls/s" in page.cells
        assert "2,960 calls/s ± 12.0 calls/s in the best trial" in page.cells
    else:
        assert "SLO: none" in text and not any("bound" in c for c in page.cells)
        assert "None." in text  # no rollbacks: said, not an empty table


def test_trial_axis_has_whole_trial_numbers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Trials are numbered 0, 1, 2: the objective plot's x ticks are those, not 0.25 steps."""
    from matplotlib.figure import Figure

    ticks: dict[str, list[float]] = {}
    save = Figure.savefig

    def spy(fig: Figure, fname: Path, *args: object, **kwargs: object) -> None:
        ax = fig.axes[0]
        lo, hi = ax.get_xlim()
        ticks[Path(fname).name] = [t for t in ax.get_xticks() if lo <= t <= hi]
        save(fig, fname, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", spy)
    store = Store(f"sqlite:///{tmp_path / 'trials.db'}")
    write_report(store, _run(store, [], rollback=False), tmp_path / "report")
    assert ticks["objective.png"] and all(t == int(t) for t in ticks["objective.png"]), ticks


def _axes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, objectives: tuple[float, ...]) -> dict[str, Any]:
    """Each plot's y label and y tick labels (major and minor, as drawn), by file name."""
    from matplotlib.figure import Figure

    axes: dict[str, Any] = {}
    save = Figure.savefig

    def spy(fig: Figure, fname: Path, *args: object, **kwargs: object) -> None:
        fig.canvas.draw()
        ax = fig.axes[0]
        labels = ax.get_yticklabels() + ax.get_yticklabels(minor=True)
        axes[Path(fname).name] = (ax.get_ylabel(), [t.get_text() for t in labels if t.get_text()])
        save(fig, fname, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", spy)
    store = Store(f"sqlite:///{tmp_path / 'trials.db'}")
    write_report(store, _run(store, [], rollback=False, objectives=objectives), tmp_path / "report")
    return axes


@pytest.mark.parametrize("objectives", [OBJECTIVES, (218300.0, 412.3, 398.0)], ids=["linear", "log"])
def test_plots_in_readable_units(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, objectives: tuple[float, ...]
) -> None:
    """Objectives of 0.4 to 218 ms stored in us are plotted in ms; tick labels are plain numbers
    (0.5, 20, 1,000), never 2e+05 or 2 x 10^4, on the objective and the (log) knob axes."""
    axes = _axes(tmp_path, monkeypatch, objectives)
    label, ticks = axes["objective.png"]
    assert label == "p99(func.serve_batch.latency) (ms, minimize)", label
    for name in ("objective.png", "knobs.png"):
        ticks = axes[name][1]
        assert ticks, name
        for text in ticks:
            assert float(text.replace(",", "")) > 0 and "e" not in text and "$" not in text, (name, ticks)
            assert not text.endswith(".0"), (name, ticks)


def _xtune(locale: str, *args: str) -> str:
    xtune = str(paths.ROOT / ".venv/bin/xtune")
    env = {"PATH": "/usr/bin:/bin", "COLUMNS": "200", "LC_ALL": locale}
    return subprocess.run([xtune, *args], capture_output=True, env=env, check=True).stdout.decode("utf-8")


def test_trials_listing_follows_the_locale(tmp_path: Path) -> None:
    """`xtune trials` leads each run with its summary line; ASCII only under a locale that cannot show
    µs, ±, → and table borders (LC_ALL=C, where Python still writes UTF-8) or with --ascii; the
    commands' help in plain text there too."""
    db = f"sqlite:///{tmp_path / 'trials.db'}"
    _run(Store(db), [], rollback=False)
    utf8 = "1.85 ms ± 0.0707 ms → 415 µs ± 7.07 µs (+77.6 % better)"
    ascii = "1.85 ms +/- 0.0707 ms -> 415 us +/- 7.07 us (+77.6 % better)"

    out = _xtune("C.UTF-8", "trials", "--db", db)
    assert out.startswith("run 1: r: p99(func.serve_batch.latency): " + utf8), out
    assert "│ rx_batch_size=64 │" in out, out
    for out in (_xtune("C", "trials", "--db", db), _xtune("C.UTF-8", "trials", "--db", db, "--ascii")):
        assert out.isascii() and ascii in out and "| rx_batch_size=64 |" in out, out
    assert utf8 in _xtune("C", "trials", "--db", db, "--unicode")
    assert "╭─ Options" in _xtune("C.UTF-8", "trials", "--help")
    plain = _xtune("C", "trials", "--help")
    assert plain.isascii() and "--ascii / --unicode" in plain, plain


def test_report_in_a_browser(browser: webdriver.Chrome, tmp_path: Path) -> None:
    """As an operator opens it (headless chromium): the summary line right under the title, every
    plot drawn, SLO margins only for the run with SLO lines, "None." for no rollbacks."""
    store = Store(f"sqlite:///{tmp_path / 'trials.db'}")
    slo = ["func.dp_round.taken.mean * func.dp_round.rate >= 0.95 * baseline"]
    for with_slo in (False, True):
        exp = _run(store, slo if with_slo else [], rollback=with_slo)
        browser.get(write_report(store, exp, tmp_path / f"report{exp}").as_uri())
        first = browser.find_element(By.CSS_SELECTOR, "h1 + p")
        assert first.get_attribute("class") == "summary"
        assert first.text.startswith("p99(func.serve_batch.latency): 1.85 ms ± 0.0707 ms → 415 µs")
        assert ("rollbacks: 1." if with_slo else "rollbacks: none.") in first.text
        images = browser.find_elements(By.TAG_NAME, "img")
        drawn = [i.get_attribute("alt") for i in images if int(i.get_attribute("naturalWidth") or 0) > 0]
        assert len(drawn) == len(images) == (3 if with_slo else 2), drawn
        headings = [h.text for h in browser.find_elements(By.TAG_NAME, "h2")]
        assert ("SLO margins over time" in headings) == with_slo, headings
        body = browser.find_element(By.TAG_NAME, "body").text
        assert "{" not in body and "e+" not in body and "(SLO" not in body
        rollbacks = browser.find_element(By.XPATH, "//h2[.='Rollbacks']/following-sibling::*[1]")
        assert (rollbacks.tag_name == "table") == with_slo and (rollbacks.text == "None.") != with_slo
