"""The case studies' page and plot, drawn from the committed case_studies.json: one table per case
with a row per contender (its values applied, the perf-const marked as SIE), the verdict line, and
the plot beside it; both come from the JSON alone."""

from __future__ import annotations

import json
import shutil
from html.parser import HTMLParser
from pathlib import Path

import case_report
import plots

RESULTS = Path(case_report.__file__).resolve().parent / "results"


class Tables(HTMLParser):
    """Each table as rows of cell texts; the headings and the images."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self.headings: list[str] = []
        self.images: list[str] = []
        self._cell: list[str] | None = None
        self._heading = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "h2":
            self._heading = True
        elif tag == "img":
            self.images.append(dict(attrs).get("src") or "")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "h2":
            self._heading = False

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        if self._heading:
            self.headings.append(data)


def test_page_and_plot_from_the_committed_json(tmp_path: Path) -> None:
    shutil.copy(RESULTS / "case_studies.json", tmp_path)
    png = plots.render("case_studies", tmp_path)
    assert png.stat().st_size > 10_000
    doc = json.loads((tmp_path / "case_studies.json").read_text())
    page = Tables()
    page.feed(case_report.write(tmp_path).read_text())
    assert page.images == ["case_studies.png"]
    assert page.headings == list(doc["cases"])
    assert len(page.tables) == len(doc["cases"])
    for (name, case), table in zip(doc["cases"].items(), page.tables, strict=True):
        head, *rows = table
        assert head[:3] == ["contender", "objective", "/ defaults, paired"], name
        assert [r[0].removesuffix(" (xtune)") for r in rows] == list(case["contenders"]), name
        for row, c in zip(rows, case["contenders"].values(), strict=True):
            applied = row[head.index("values applied")]
            for target in c["values"]:
                assert target in applied, (name, target)
            for knob in c["perf_consts"]:
                assert f"{knob} = {c['perf_consts'][knob]} (SIE)" in applied, (name, knob)
            slo = row[head.index("SLO")]
            assert slo.startswith("broken") == (row[0].split()[0] in case["verdict"]["excluded"]), name
