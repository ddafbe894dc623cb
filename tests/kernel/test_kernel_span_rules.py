"""Rules of the kernel spans file, on small assembled objects (no kernel needed): a probe never
sits where a branch joins its span, a const with refusals gets no spans file, and the file carries
the kernel build and the valid range of V."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from xtune.sie.kernel import analyze as kernel
from xtune.sie.kernel.spans import KernelSpan
from xtune.sie.scope import ScopeError

VALUES = [32, 8, 48]
BUILD_ID = "ab" * 20
# `joined`: the `add` after the constant's `mov` is also reached by the `je` that skips the mov.
SOURCE = """
	.text
#ifdef JOIN
	.globl joined
	.type joined, @function
joined:
	test %edi, %edi
	je 1f
	mov $VAL, %eax
1:
	add %esi, %eax
	ret
	.size joined, .-joined
#endif
	.globl straight
	.type straight, @function
straight:
	mov $VAL, %eax
	add %esi, %eax
	ret
	.size straight, .-straight
"""


def analyze_source(
    tmp_path: Path, name: str, source: str, values: list[int], flags: list[str]
) -> kernel.KernelAnalysis:
    """Assembles `source` once per value of VAL (with the -D `flags`) and analyzes the objects."""
    src = tmp_path / name
    src.write_text(source)
    objects = []
    for v in values:
        obj = tmp_path / f"{src.stem}-{v}-{'-'.join(flags)}.o"
        subprocess.run(["gcc", "-c", f"-DVAL={v}", *flags, str(src), "-o", str(obj)], check=True)
        objects.append(obj)
    return kernel.analyze_objects("VAL", objects, values, name)


def analyze(tmp_path: Path, join: bool) -> kernel.KernelAnalysis:
    return analyze_source(tmp_path, "spans.S", SOURCE, VALUES, ["-DJOIN"] if join else [])


def test_probe_on_a_join_point_is_refused(tmp_path: Path) -> None:
    const = analyze(tmp_path, join=True).table.consts[0]
    assert [s.function for s in const.spans] == ["straight"]
    [refusal] = const.refusals
    assert refusal.function == "joined" and "a branch joins the span at +0x9" in refusal.reason


def test_no_spans_file_while_refusals_stand(tmp_path: Path) -> None:
    with pytest.raises(ScopeError, match=r"VAL: not tunable in the kernel \(joined: \+0x9: a branch joins"):
        kernel.xsie_lines(analyze(tmp_path, join=True), 0, BUILD_ID)


def test_spans_file_carries_kernel_and_range(tmp_path: Path) -> None:
    result = analyze(tmp_path, join=False)
    const = result.table.consts[0]
    # `mov $V, %eax`: IV = V must fit a signed 32-bit register; V keeps the analyzed sign.
    assert (const.min_value, const.max_value) == (1, 2**31 - 1)
    lines = kernel.xsie_lines(result, 3, BUILD_ID)
    assert lines[0] == f"kernel {BUILD_ID}"
    assert lines[1] == "const 3 VAL"
    assert lines[2].startswith("span 3 set straight 0x0 ")
    assert lines[-1] == f"range 3 1 {2**31 - 1}"
    with pytest.raises(ScopeError, match="names no kernel build id"):
        kernel.xsie_lines(result)  # an object's table has no kernel build id


def test_value_range_of_an_update() -> None:
    def span(width: int, a: int, b: int, factor: int = 1) -> KernelSpan:
        return KernelSpan("f", "set", 0, 5, 6, "rax", width, a, b, "", factor=factor)

    assert span(32, 1, 0).v_range() == (-(2**31), 2**31 - 1)
    assert span(32, 1, 1).v_range() == (-(2**31) - 1, 2**31 - 2)  # `cmp $V+1; jge`
    assert span(32, 1, 0, factor=2).v_range() == (-(2**30), 2**30 - 1)  # scale to 2*V
    assert span(16, -2, 10).v_range() == (-16378, 16389)
    assert span(64, 8, 0).v_range() == (-(2**60), 2**60 - 1)


# `leaves`: a conditional tail call (je ext_fn), a conditional jump into its own cold part, a ret.
EXITS_SOURCE = """
	.text
	.globl leaves
	.type leaves, @function
leaves:
	mov $VAL, %eax
	add %esi, %eax
	test %edi, %edi
	je ext_fn
	cmp $1, %edi
	jne leaves.cold
	ret
	.size leaves, .-leaves
	.section .text.unlikely
	.type leaves.cold, @function
leaves.cold:
	ud2
	.size leaves.cold, .-leaves.cold
"""


def test_exits_include_conditional_ones_not_the_cold_part(tmp_path: Path) -> None:
    src = tmp_path / "exits.S"
    src.write_text(EXITS_SOURCE)
    objects = []
    for v in VALUES:
        obj = tmp_path / f"exits-{v}.o"
        subprocess.run(["gcc", "-c", f"-DVAL={v}", str(src), "-o", str(obj)], check=True)
        objects.append(obj)
    [span] = kernel.analyze_objects("VAL", objects, VALUES, "exits.S").table.consts[0].spans
    # mov (5) add (2) test (2) je rel32 at +0x9 (6), cmp (3), jne rel32 into leaves.cold at +0x12, ret +0x18.
    assert span.exits == [0x9, 0x18]


SHIFT_VALUES = [3, 2, 5]
# Shift counts: `shifted` (32-bit shr, flags written again by the add) and `wide` (64-bit sar,
# flags dead at the ret) are spans; with -DREFUSED, `flags_read` (the jz reads the shift's ZF)
# and `in_memory` (a shift of memory) are refused.
SHIFT_SOURCE = """
	.text
	.globl shifted
	.type shifted, @function
shifted:
	mov %edi, %eax
	shr $VAL, %eax
	add %esi, %eax
	ret
	.size shifted, .-shifted
	.globl wide
	.type wide, @function
wide:
	mov %rdi, %rax
	sar $VAL, %rax
	ret
	.size wide, .-wide
#ifdef REFUSED
	.globl flags_read
	.type flags_read, @function
flags_read:
	shl $VAL, %edi
	jz 1f
	mov %edi, %eax
1:
	ret
	.size flags_read, .-flags_read
	.globl in_memory
	.type in_memory, @function
in_memory:
	shrl $VAL, (%rdi)
	ret
	.size in_memory, .-in_memory
#endif
"""


def analyze_shifts(tmp_path: Path, refused: bool) -> kernel.KernelAnalysis:
    return analyze_source(tmp_path, "shifts.S", SHIFT_SOURCE, SHIFT_VALUES, ["-DREFUSED"] if refused else [])


def test_shift_count_spans(tmp_path: Path) -> None:
    """A shift by an immediate count is a `shift` span on the instruction itself (xsie.ko
    emulates it, so int3); the count must stay in [0, width - 1], V >= 1 as analyzed."""
    result = analyze_shifts(tmp_path, refused=False)
    const = result.table.consts[0]
    assert const.refusals == []
    by_fn = {s.function: s for s in const.spans}
    shr, sar = by_fn["shifted"], by_fn["wide"]
    assert (shr.start, shr.end, shr.expected, shr.update.probe) == (2, 5, "c1e803", 2)
    assert (sar.start, sar.end, sar.expected, sar.update.probe) == (3, 7, "48c1f803", 3)
    assert shr.update.kind == "shift" and shr.patch == "int3" and shr.update.v0 == 3
    assert (shr.state.a, shr.state.b, shr.state.width) == (1, 0, 4) and sar.state.width == 8
    # The 32-bit count bounds the const: [1, 31] (the 64-bit one alone would allow 63).
    assert (const.min_value, const.max_value) == (1, 31)
    lines = kernel.xsie_lines(result, 0, BUILD_ID)
    assert "span 0 shift shifted 0x2 c1e803 0x2 ax 32 1 0 3 0" in lines
    assert "span 0 shift wide 0x3 48c1f803 0x3 ax 64 1 0 3 0" in lines
    assert lines[-1] == "range 0 1 31"


def test_shift_count_refusals(tmp_path: Path) -> None:
    """A shift whose flags a later instruction reads, and a shift of memory, are refused with
    what would make them work; the const then has no spans file."""
    const = analyze_shifts(tmp_path, refused=True).table.consts[0]
    reasons = {r.function: r.reason for r in const.refusals}
    assert set(reasons) == {"flags_read", "in_memory"}
    flags, memory = reasons["flags_read"], reasons["in_memory"]
    assert "`shl edi, 3`" in flags and "may read the flags the shift sets" in flags
    assert "shift count of `shr` on memory" in memory and "registers only" in memory


def test_value_range_of_a_shift() -> None:
    def span(width: int, a: int, b: int) -> KernelSpan:
        return KernelSpan("f", "shift", 0, 0, 3, "rax", width, a, b, "")

    assert span(32, 1, 0).v_range() == (0, 31)
    assert span(64, 1, 0).v_range() == (0, 63)
    assert span(8, 1, 1).v_range() == (-1, 6)  # count V + 1 in [0, 7]
    assert span(16, -1, 20).v_range() == (5, 20)  # count 20 - V in [0, 15]
    assert span(32, 2, 0).v_range() == (0, 15)
