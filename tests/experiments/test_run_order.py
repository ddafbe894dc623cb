"""The case studies' run order (experiments/cases/interleave.py): a Williams design, so that no
contender always runs right after the same other one (what a run leaves behind would otherwise
fall on one contender only)."""

from __future__ import annotations

from collections import Counter

import pytest
from cases.interleave import run_order, williams_rows
from cases.profiles import Contender


@pytest.mark.parametrize("n", range(1, 11))
def test_every_contender_follows_every_other_equally_often(n: int) -> None:
    rows = williams_rows(n)
    assert len(rows) == (2 * n if n % 2 else n)
    assert all(sorted(row) == list(range(n)) for row in rows)
    follows = Counter((row[i], row[i + 1]) for row in rows for i in range(n - 1))
    assert n == 1 or (len(follows) == n * (n - 1) and len(set(follows.values())) == 1)


def test_repetitions_past_the_last_row_start_over() -> None:
    contenders = [Contender(name, name) for name in "abcd"]
    orders = [[c.name for c in run_order(contenders, rep)] for rep in range(8)]
    assert orders[:4] == orders[4:] and orders[0] == ["a", "b", "d", "c"]
    assert len({tuple(o) for o in orders}) == 4
