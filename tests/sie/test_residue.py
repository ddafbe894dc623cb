"""The values the analysis tries when a loop's shape depends on K modulo an unroll or vector factor
(tuner/xtune/sie/residue.py)."""

from __future__ import annotations

from xtune.sie.residue import residue_values, unrolled, validation_values


def test_residue_values_near_the_spec_values():
    # Each other value becomes the nearest multiple of the factor in the spec's range (the lower on
    # a tie); the original must be a multiple itself.
    assert residue_values([128, 100, 200], 4) == [128, 100, 200]
    assert residue_values([128, 100, 200], 8) == [128, 104, 200]
    assert residue_values([128, 100, 200], 16) == [128, 112, 192]
    assert residue_values([128, 100, 200], 64) is None  # the range [100, 200] holds one multiple
    assert residue_values([64, 30, 100], 16) == [64, 32, 96]
    assert residue_values([100, 64, 200], 8) is None
    assert residue_values([64, 32, 128], 64) is None  # 32's nearest multiple is the original


def test_validation_values_are_multiples_not_analyzed():
    for values, f in (([128, 100, 200], 4), ([128, 96, 192], 16), ([64, 32, 128], 8)):
        checks = validation_values(values, f)
        assert checks and all(v % f == 0 and v not in values for v in checks)
        assert (checks[0] // f) % 2 == 1  # an odd multiple: no multiple of 2f
    assert validation_values([128, 96, 192], 16) == [144]  # the middle; 128 + 16 is 144 too


def test_unrolled_needs_a_rising_count_and_no_loop():
    counts = {32: 31, 48: 43, 64: 55, 128: 103}
    assert unrolled(counts, 64, looping=False)
    assert not unrolled(counts, 64, looping=True)
    assert not unrolled({32: 22, 48: 26, 64: 26, 128: 30}, 64, looping=False)  # flat around 64
    assert not unrolled({32: 31, 64: 55}, 64, looping=False)  # two points say nothing
