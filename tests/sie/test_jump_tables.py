"""Jump tables in the analysis: spans use a 5-byte jump where no table target (resolved from the ELF
file with the bound proven from the code) falls inside it; an indirect jump whose table or bound is
not proven keeps every span of the function an int3."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from targets import TARGETS
from xtune.sie.analyze import analyze_binaries
from xtune.sie.disasm import disassemble
from xtune.sie.elfcode import ElfCode
from xtune.sie.entries import function_entries
from xtune.sie.scope import SourceLocation
from xtune.sie.spans import ENTER_ANYWHERE
from xtune.testing import sie_oracle as oracle

VALUES = [64, 32, 16]  # imm8 in every build: the code's layout and the table stay the same


def build(tmp_path, guard: int) -> list[Path]:
    src = TARGETS / "jump_table.S"
    paths = []
    for v in VALUES:
        out = tmp_path / f"pick-{guard}-{v}"
        subprocess.run(["gcc", f"-DGUARD={guard}", f"-DK={v}", "-o", str(out), str(src)], check=True)
        paths.append(out)
    return paths


def spans(paths: list[Path]):  # type: ignore[no-untyped-def]
    const = analyze_binaries(paths, VALUES, "K", SourceLocation("jump_table.S", 0, "K")).consts[0]
    assert not const.refusals, const.refusals
    return sorted(const.spans, key=lambda s: s.start)


@pytest.mark.parametrize("guard", [0, 4])
def test_bounded_table_resolved(tmp_path, guard):
    paths = build(tmp_path, guard)
    case0, case2 = spans(paths)
    code = ElfCode(paths[0])
    fn = code.functions["pick"]
    entries = function_entries(code, fn, disassemble(code, fn))
    assert not entries.unknown
    [table] = entries.tables
    assert len(table.targets) == 4
    # Case 1 starts right after case 0's 4-byte `add` and only the table leads there: no jump fits.
    assert case0.end in entries.offsets
    assert (case0.patch, case0.end - case0.start) == ("int3", 4)
    # Case 2's `add` and the next instruction, which nothing jumps to, hold the jump.
    assert (case2.patch, case2.end - case2.start) == ("jump", 8)


@pytest.mark.parametrize("guard", [1, 2, 3, 5])
def test_unproven_bound_keeps_int3(tmp_path, guard):
    """No bound (1), the index changed after it (2), a path around it (3), a path that does not
    load the hoisted table address (5)."""
    for span in spans(build(tmp_path, guard)):
        assert span.patch == "int3"
        assert span.patch_reason.startswith(f"{ENTER_ANYWHERE}: jump table not resolved"), span.patch_reason


@pytest.mark.parametrize(
    "cc, flags",
    [
        ("gcc", "-O2"),
        ("clang", "-O2"),
        ("gcc", "-O2 -fno-pie -no-pie"),  # an absolute table: `jmp qword ptr [rax*8 + TABLE]`
        ("gcc", "-O2 -fcf-protection"),  # `notrack jmp`
    ],
)
def test_compiled_switch_resolved(tmp_path, cc, flags):
    """The corpus's switch on `n % 9` (cases 0..7 and a default) as compilers emit it."""
    out = tmp_path / "switch_table"
    src = oracle.CORPUS / "switch_table.c"
    subprocess.run([cc, *flags.split(), "-o", str(out), str(src)], check=True)
    code = ElfCode(out)
    fn = code.functions["compute"]
    insns = disassemble(code, fn)
    entries = function_entries(code, fn, insns)
    assert not entries.unknown
    [table] = entries.tables
    starts = {fn.vaddr + i.off for i in insns}
    assert len(table.targets) == 8 and set(table.targets) <= starts
