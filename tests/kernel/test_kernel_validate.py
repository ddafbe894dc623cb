"""Validation of kernel spans with a value the analysis did not build (validate.py), and the valid
values the spans file carries to xsie.ko. The builds are stood in for by an analysis that holds
only for some values (no kernel tree needed)."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable

import pytest
from xtune.sie.kernel import analyze as kernel
from xtune.sie.kernel.spans import KernelFunction, KernelSpan
from xtune.sie.kernel.validate import SHAPE, validate, validation_values
from xtune.sie.scope import BinaryId, PerfConst, Refusal, ScopeTable, SourceLocation


def const_with_span(values: list[int]) -> PerfConst:
    """A const whose one `set` span writes eax = 2*V + 1 before +0x7 of f."""
    kf = KernelFunction("f", 0x20, [0x1F])
    span = KernelSpan("f", "set", 0x2, 0x7, 0xA, "rax", 32, 2, 1, "rax <- 2*V + 1")
    const = PerfConst("K", SourceLocation("k.c", 3, "K"), list(values), [], [])
    const.spans.append(kernel._scope_span(kf, 0x100, ".text", bytes(0x20), span, values[0]))
    const.min_value, const.max_value = 1, 1000
    return const


def holding_for(const: PerfConst, holds: Callable[[int], bool], built: list[int]) -> Callable:
    """An analysis of `const`'s unit whose fit holds for the extra value only when `holds` says so
    (else the extra build's immediate is off the line)."""

    def analyze_with(values: list[int]) -> PerfConst:
        built.append(values[-1])
        wide = copy.deepcopy(const)
        wide.values = values
        if not holds(values[-1]):
            wide.spans[0].state.b += 1 if values[-1] % 2 else 0
            if not values[-1] % 2:
                wide.refusals.append(Refusal("f", "+0x2 `mov eax, 0x61`: operand values fit no a*f(V) + b"))
        return wide

    return analyze_with


def test_validation_values_are_new_coprime_and_in_range() -> None:
    values = validation_values([32, 8, 48], 1, 1000)
    assert values == [49, 31, 35] and all(math.gcd(v, x) == 1 for v in values for x in [32, 8, 48])
    assert validation_values([10, 6, 15], 1, 15) == [7, 11]  # none above 1.5x inside the range
    assert validation_values([2, 4, 6], 2, 2) == []


def test_spans_that_hold_for_a_coprime_value_need_no_constraint() -> None:
    const, built = const_with_span([32, 8, 48]), []
    notes = validate(const, holding_for(const, lambda v: True, built))
    assert built == [49] and const.tunable
    assert (const.multiple_of, const.power_of_two, const.constraint) == (1, False, "")
    assert notes == ["K: the spans hold with V=49 (coprime to the values analyzed)"]


def test_spans_that_hold_for_multiples_of_the_gcd_record_it() -> None:
    const, built = const_with_span([32, 8, 48]), []
    notes = validate(const, holding_for(const, lambda v: v % 8 == 0, built))
    assert built == [49, 24] and const.tunable
    assert (const.multiple_of, const.power_of_two, const.constraint) == (8, False, "multiple of 8")
    assert "with V=49: the spans or their updates differ" in notes[0]


def test_spans_that_hold_for_powers_of_two_record_it() -> None:
    const, built = const_with_span([32, 8, 64]), []
    notes = validate(const, holding_for(const, lambda v: v & (v - 1) == 0, built))
    assert built == [49, 24, 128] and const.tunable
    assert (const.multiple_of, const.power_of_two, const.constraint) == (1, True, "power of two")
    assert notes[0].endswith("with V=128 they hold: V must be a power of two")


def test_spans_that_hold_only_for_the_values_analyzed_are_refused() -> None:
    const, built = const_with_span([10, 6, 15]), []
    validate(const, holding_for(const, lambda v: v in (10, 6, 15), built))
    assert built == [16 + 1] and not const.tunable
    [r] = const.refusals
    assert r.reason == "the spans hold only for the values analyzed"
    assert r.detail == "with V=17: the spans or their updates differ"
    even = const_with_span([10, 6, 16])  # gcd 2: an odd multiple is built too, and refused
    validate(even, holding_for(even, lambda v: v in (10, 6, 16), built := []))
    assert built == [17, 14]
    assert even.refusals[0].detail.endswith(
        "with V=14: f: +0x2 `mov eax, 0x61`: operand values fit no a*f(V) + b"
    )


def test_a_build_of_another_code_shape_is_skipped_for_the_next_value() -> None:
    """gcc allocates registers otherwise above 10 (as for MAX_SOFTIRQ_RESTART): the builds there
    say nothing about the update, the nearest coprime value below decides."""
    const, built = const_with_span([10, 9, 8]), []
    analyze_with = holding_for(const, lambda v: True, built)

    def shaped(values: list[int]) -> PerfConst:
        wide = analyze_with(values)
        if values[-1] > 10:
            wide.refusals.append(Refusal("f", SHAPE, "at +0xf: `mov r12, ...` vs `mov r15, ...`"))
        return wide

    notes = validate(const, shaped)
    assert built == [17, 7] and const.tunable and const.multiple_of == 1
    assert notes[0].startswith(
        "K: the spans hold with V=7 (coprime to the values analyzed) (with V=17: f: code"
    )
    nowhere, built = const_with_span([10, 9, 8]), []
    nowhere.min_value, nowhere.max_value = 8, 10
    validate(nowhere, holding_for(nowhere, lambda v: True, built))
    assert built == [] and nowhere.refusals[0].detail == "no value coprime to [10, 9, 8] lies in [8, 10]"


@pytest.mark.parametrize(
    ("multiple", "power", "line"),
    [(1, False, "1 1000"), (8, False, "1 1000 8 0"), (1, True, "1 1000 1 1")],
)
def test_the_spans_file_carries_the_valid_values(multiple: int, power: bool, line: str) -> None:
    const = const_with_span([32, 8, 64])
    const.multiple_of, const.power_of_two = multiple, power
    table = ScopeTable(BinaryId("linux", "ab" * 20, "", "EXEC", 0), [const])
    lines = kernel.xsie_lines(kernel.KernelAnalysis(table, {}), first_id=3)
    assert lines[0] == f"kernel {'ab' * 20}"
    assert lines[1] == "const 3 K"
    assert lines[2].startswith("span 3 set f 0x2 ")
    assert lines[-1] == f"range 3 {line}"
    back = ScopeTable.from_json(table.to_json()).consts[0]  # the scope table keeps them too
    assert (back.multiple_of, back.power_of_two) == (multiple, power)
