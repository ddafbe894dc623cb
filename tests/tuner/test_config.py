"""SLO files: good examples load; each bad one fails with file:line: field and exit code 2."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from xtune import paths
from xtune.config import ConfigError, load

HERE = Path(__file__).parent
EXAMPLES = sorted((paths.ROOT / "experiments" / "slo").glob("*.yaml"))
GOOD = (
    sorted((HERE / "slo_good").glob("*.yaml"))
    + EXAMPLES
    + [paths.package_data("demo", "data", "bufferbloat.yaml")]
)
VARS = {
    "RECEIVER_NETNS": "/run/netns/r",
    "SENDER_NETNS": "/run/netns/s",
    "RECEIVER_ADDR": "10.0.0.1",
    "BULK": "/bin/true",
    "SHM": "xt",
    "BUDGET": "5",
    "MODEL": "models/m.json",
    "RECORDING": "r.xtrec",
    "SERVER_NETNS": "/run/netns/sv",
    "SERVER_NETNS_NAME": "sv",
    "CLIENT_NETNS": "cl",
    "SERVER_ADDR": "10.0.0.2",
    "PYTHON": "/usr/bin/python3",
    "SERVE_DIR": "/tmp/serve",
    "CASES": "experiments/cases",
    "SECONDS": "2",
    "REQUESTS": "1000",
    "DEVICE": "loop9",
    "SERVER_PID": "4242",
    "PLAN": "/tmp/serve/iobuf.plan",
    "PERF_CONST_MIN": "2048",
    "PERF_CONST_MAX": "32768",
}

# file -> (line, field, words of the message)
BAD = {
    "backend_unknown.yaml": (4, "knobs.0.backend", "sysctl"),
    "bench_promql_no_server.yaml": (6, "benchmark", "have a promql query: give 'prometheus: {url: ...}'"),
    "bench_regex_no_group.yaml": (9, "benchmark.metrics.0", "no named group (?P<value>...)"),
    "bench_unknown_metric.yaml": (5, "slo.0", "reads ['bench.p99'], not a metric of the benchmark"),
    "expr_operator.yaml": (2, "objective.minimize", "unexpected '*' at column 4"),
    "expr_unclosed.yaml": (3, "objective.minimize", "expected ')'"),
    "log_nonpositive.yaml": (4, "knobs.0", "log-scale range must be positive"),
    "objective_both.yaml": (2, "objective", "exactly one of"),
    "policy_typo.yaml": (7, "policy.budjet", "Extra inputs"),
    "range_empty.yaml": (4, "knobs.0", "is empty"),
    "slo_baseline_left.yaml": (5, "slo.1", "only allowed on the right"),
    "tree_no_model.yaml": (5, "policy", "needs 'model'"),
    "var_unknown.yaml": (4, "knobs.0.netns", "unknown variable ${NO_SUCH_VAR_XT4}"),
    "yaml_broken.yaml": (4, "", "not valid YAML"),
}


@pytest.mark.parametrize("path", GOOD, ids=lambda p: p.name)
def test_good_files_load(path: Path) -> None:
    slo = load(path, VARS)
    assert slo.knobs and slo.objective.expression


def test_every_bad_file_has_an_expectation() -> None:
    assert sorted(p.name for p in (HERE / "slo_bad").glob("*.yaml")) == sorted(BAD)


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_file_names_file_line_field(name: str) -> None:
    line, field, words = BAD[name]
    path = HERE / "slo_bad" / name
    with pytest.raises(ConfigError) as err:
        load(path)
    prefix = f"{path}:{line}: " + (f"{field}: " if field else "")
    first = err.value.problems[0]
    assert first.startswith(prefix), first
    assert words in first


def test_cli_exits_2_and_touches_nothing(tmp_path: Path) -> None:
    """`xtune run` on a bad file: exit code 2, the message on stderr, no trial store created."""
    db = tmp_path / "t.db"
    res = subprocess.run(
        [
            str(paths.ROOT / ".venv/bin/xtune"),
            "run",
            str(HERE / "slo_bad/range_empty.yaml"),
            "--db",
            f"sqlite:///{db}",
        ],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 2
    assert "range_empty.yaml:4: knobs.0: range [10, 1] is empty" in res.stderr
    assert not db.exists()
