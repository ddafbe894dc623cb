"""scripts/check-figures on a throwaway checkout: README blocks against their JSON, and staleness."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from xtune import paths

SCRIPT = paths.ROOT / "scripts" / "check-figures"
SPEC = """
[[block]]
id = "demo"
file = "README.md"

[[block.line]]
text = "| what | figure |"
[[block.line]]
text = "| decision p50 | {p50} |"
p50 = { json = "bench", key = "tree.p50_us", fmt = ".1f", unit = " µs" }
"""
README = """# demo

<!-- figures:demo -->
| what | figure |
| decision p50 | {} |
<!-- /figures -->

more text
"""


def checkout(tmp: Path, readme_value: str, data: dict) -> Path:
    (tmp / "experiments" / "results").mkdir(parents=True)
    (tmp / "experiments" / "figures.toml").write_text(SPEC)
    (tmp / "experiments" / "results" / "bench.json").write_text(json.dumps(data))
    (tmp / "README.md").write_text(README.format(readme_value))
    return tmp


def run(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--root", str(root), *args], capture_output=True, text=True, timeout=60
    )


def test_matching_block_passes_and_json_without_provenance_only_warns(tmp_path):
    root = checkout(tmp_path, "2.0 µs", {"tree": {"p50_us": 2.04}})
    out = run(root)
    assert out.returncode == 0, out.stderr
    assert "bench.json: no provenance" in out.stderr


def test_differing_block_fails_naming_readme_line_figure_key_and_values(tmp_path):
    root = checkout(tmp_path, "1.1 µs", {"tree": {"p50_us": 2.04}})
    out = run(root)
    assert out.returncode == 1
    assert (
        "README.md:5: figure 'p50' (bench.json:tree.p50_us): README says '1.1 µs', JSON gives '2.0 µs'"
        in out.stderr
    )
    assert run(root, "--write").returncode == 0
    assert (root / "README.md").read_text() == README.format("2.0 µs")
    assert run(root).returncode == 0


def test_missing_key_and_extra_line_fail(tmp_path):
    root = checkout(tmp_path, "2.0 µs", {"tree": {"p99_us": 3.0}})
    out = run(root)
    assert out.returncode == 1 and "no key 'p50_us'" in out.stderr
    root = checkout(tmp_path / "b", "2.0 µs", {"tree": {"p50_us": 2.04}})
    readme = root / "README.md"
    readme.write_text(
        readme.read_text().replace("<!-- /figures -->", "| hand-written | 84 % |\n<!-- /figures -->")
    )
    out = run(root)
    assert out.returncode == 1 and "README.md:6: line not generated from any JSON" in out.stderr


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def test_json_older_than_its_sources_fails(tmp_path):
    root = checkout(tmp_path, "2.0 µs", {"tree": {"p50_us": 2.04}})
    shutil.copy(paths.ROOT / "experiments" / "resultfile.py", root / "experiments")
    (root / "src.c").write_text("int v = 1;\n")
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    write = "import resultfile; resultfile.write_result('bench', {'tree': {'p50_us': 2.04}}, ['src.c'])"
    subprocess.run([sys.executable, "-c", write], cwd=root / "experiments", check=True)
    assert json.loads((root / "experiments/results/bench.json").read_text())["provenance"]["dirty"] is False
    assert run(root).returncode == 0
    (root / "src.c").write_text("int v = 2;\n")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-am", "two")
    out = run(root)
    assert out.returncode == 1 and "bench.json: stale" in out.stderr


def test_json_of_uncommitted_sources_only_warns(tmp_path):
    root = checkout(tmp_path, "2.0 µs", {"tree": {"p50_us": 2.04}})
    shutil.copy(paths.ROOT / "experiments" / "resultfile.py", root / "experiments")
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    (root / "new.c").write_text("int v;\n")
    write = "import resultfile; resultfile.write_result('bench', {'tree': {'p50_us': 2.04}}, ['new.c'])"
    subprocess.run([sys.executable, "-c", write], cwd=root / "experiments", check=True, capture_output=True)
    prov = json.loads((root / "experiments/results/bench.json").read_text())["provenance"]
    assert prov["tree"] is None and prov["dirty"] is True and prov["host"]["cpus"] >= 1
    out = run(root)
    assert out.returncode == 0 and "bench.json: no source tree hash" in out.stderr


def test_reductions_over_objects_and_lists(tmp_path):
    """`reduce`: min/max of an object's values, count of an object's or a list's entries."""
    spec = SPEC.replace(
        'p50 = { json = "bench", key = "tree.p50_us", fmt = ".1f", unit = " µs" }',
        'p50 = { json = "bench", key = "tree.runs", fmt = "d", reduce = "count", unit = " runs" }',
    )
    root = checkout(tmp_path, "3 runs", {"tree": {"runs": [4.0, 5.0, 6.0]}})
    (root / "experiments" / "figures.toml").write_text(spec)
    assert run(root).returncode == 0, run(root).stderr
    (root / "experiments" / "figures.toml").write_text(spec.replace('reduce = "count"', 'reduce = "max"'))
    out = run(root)
    assert out.returncode == 1 and "reduce needs an object" in out.stderr
