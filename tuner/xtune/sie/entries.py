"""Where control can enter a function's code other than at its start: a 5-byte jump must not cover
any of these places after its first instruction."""

from __future__ import annotations

from dataclasses import dataclass

from xtune.sie.disasm import Insn, disassemble
from xtune.sie.elfcode import ElfCode, Function
from xtune.sie.jumptables import JumpTable, Unresolved, resolve


@dataclass
class Entries:
    offsets: set[int]  # function-relative
    unknown: str  # why control may arrive anywhere ("" when every entry is known)
    tables: list[JumpTable]


def function_entries(code: ElfCode, fn: Function, insns: list[Insn]) -> Entries:
    """Targets of the function's direct branches, of the direct branches of its split-off cold part
    (`FUNC.cold`, which jumps back into it) and of its jump tables."""
    offsets = _direct_targets(insns, fn)
    cold: list[Insn] = []
    for part in _cold_parts(code, fn):
        cold += disassemble(code, part)
        if any(i.is_jump and i.indirect for i in cold):
            return Entries(offsets, f"its cold part {part.name} has an indirect jump", [])
    offsets |= _direct_targets(cold, fn)
    if not any(i.is_jump and i.indirect for i in insns):
        return Entries(offsets, "", [])
    try:
        tables = resolve(code, fn, insns, offsets, cold)
        inside = _inside(tables, fn, insns)
        # A table's target may begin another table's block: check again with every entry known.
        if resolve(code, fn, insns, offsets | inside, cold) != tables:
            raise Unresolved("the tables' targets change what the blocks prove")
    except Unresolved as e:
        return Entries(offsets, f"jump table not resolved: {e}", [])
    return Entries(offsets | inside, "", tables)


def _direct_targets(insns: list[Insn], fn: Function) -> set[int]:
    end = fn.vaddr + len(fn.data)
    return {
        i.target - fn.vaddr
        for i in insns
        if i.target is not None and (i.is_jump or i.is_call) and fn.vaddr <= i.target < end
    }


def _cold_parts(code: ElfCode, fn: Function) -> list[Function]:
    """Every `NAME.cold` part a function of this name may own (several static functions may share
    it: all of them, to be safe)."""
    base = fn.name.split("@")[0]
    return [f for key, f in code.functions.items() if key.split("@")[0] in (f"{base}.cold", f"{base}.cold.0")]


def _inside(tables: list[JumpTable], fn: Function, insns: list[Insn]) -> set[int]:
    """The function-relative targets inside the function, each the start of an instruction."""
    starts = {i.off for i in insns}
    out = set()
    for t in tables:
        for target in t.targets:
            off = target - fn.vaddr
            if 0 <= off < len(fn.data):
                if off not in starts:
                    raise Unresolved(f"the table at {t.table:#x} points inside an instruction (+{off:#x})")
                out.add(off)
    return out
