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


def analyze(tmp_path: Path, join: bool) -> kernel.KernelAnalysis:
    src = tmp_path / "spans.S"
    src.write_text(SOURCE)
    objects = []
    for v in VALUES:
        obj = tmp_path / f"{v}-{int(join)}.o"
        flags = ["-DJOIN"] if join else []
        subprocess.run(["gcc", "-c", f"-DVAL={v}", *flags, str(src), "-o", str(obj)], check=True)
        objects.append(obj)
    return kernel.analyze_objects("VAL", objects, VALUES, "spans.S")


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
