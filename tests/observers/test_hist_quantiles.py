"""The log-linear histogram of the BPF side: its buckets tile the range, and its quantiles are
within 1/32 (3.1 %) of the exact quantiles of known distributions (README claim: <= 5 %)."""

from __future__ import annotations

import math
import random
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
OBSERVERS = HERE.parents[1] / "observers"
BOUND = 1 / 32


@pytest.fixture(scope="module")
def hist_check(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("hist") / "hist_check"
    subprocess.run(
        [
            "cc",
            "-O2",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-I",
            str(OBSERVERS),
            "-I",
            str(HERE.parents[1] / "include"),
            "-o",
            str(out),
            str(HERE / "hist_check.c"),
            str(OBSERVERS / "hist.c"),
        ],
        check=True,
    )
    return out


def test_buckets_tile_the_range_and_are_at_most_a_sixteenth_wide(hist_check):
    rows = subprocess.run([str(hist_check), "buckets"], capture_output=True, text=True, check=True).stdout
    buckets = [tuple(map(int, line.split())) for line in rows.splitlines()]
    expected_lo = 0
    for idx, (lo, width, first, last) in enumerate(buckets):
        assert lo == expected_lo, f"bucket {idx} starts at {lo}, not {expected_lo}"
        assert (first, last) == (idx, idx), f"values of bucket {idx} map to {first}..{last}"
        assert width == 1 or width * 16 <= lo, f"bucket {idx} [{lo}, +{width}) wider than lo/16"
        expected_lo = lo + width
    assert expected_lo == 2**36, "the histogram ends at 2^36"


def exact(values: list[int], q: float) -> int:
    """The value of rank ceil(q * n), the quantile the histogram estimates."""
    ordered = sorted(values)
    return ordered[max(math.ceil(q * len(ordered)), 1) - 1]


def distributions() -> dict[str, list[int]]:
    rng = random.Random(20261123)
    n = 20000
    return {
        "exponential 50 us": [int(rng.expovariate(1 / 50_000)) for _ in range(n)],
        "lognormal around 1 ms": [int(rng.lognormvariate(math.log(1e6), 0.8)) for _ in range(n)],
        "pareto tail from 10 us": [int(10_000 * rng.paretovariate(1.5)) for _ in range(n)],
        "bimodal 5 us / 2 ms": [
            int(rng.gauss(5_000, 300)) if rng.random() < 0.9 else int(rng.gauss(2e6, 1e5)) for _ in range(n)
        ],
        "uniform small integers": [rng.randint(0, 100) for _ in range(n)],
        "bucket edges": [v for k in range(4, 36) for v in (2**k, 2**k + 2 ** (k - 4) - 1, 2 ** (k + 1) - 1)],
    }


@pytest.mark.parametrize("name", list(distributions()))
def test_quantiles_within_a_thirty_second_of_exact(hist_check, name):
    values = distributions()[name]
    qs = [0.5, 0.9, 0.99, 0.999]
    out = subprocess.run(
        [str(hist_check), *map(str, qs)],
        input="\n".join(map(str, values)),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for q, got in zip(qs, map(float, out.split()), strict=True):
        want = exact(values, q)
        err = abs(got - want) / want if want else got
        assert err <= BOUND, f"{name}: q{q} = {got}, exact {want}: error {err:.2%} > {BOUND:.2%}"
