"""The callees of a function, found statically: every direct call (and tail jump) leaving it,
PLT stubs and GOT slots resolved to the imported symbol and the mapped file that defines it.
What cannot be followed is listed with the reason, never dropped."""

from __future__ import annotations

from dataclasses import dataclass

import capstone as cs
from capstone import x86_const as x

from xtune.drill.image import DrillError, Symbol, got_slot
from xtune.drill.process import Process

_MD = cs.Cs(cs.CS_ARCH_X86, cs.CS_MODE_64)
_MD.detail = True


@dataclass(frozen=True)
class Callee:
    name: str
    path: str  # the ELF file that holds its code, as the process maps it
    symbol: Symbol
    sites: int  # call sites in the caller


@dataclass(frozen=True)
class NotFollowed:
    site: str  # caller+offset
    instruction: str
    reason: str


def _branch_target(ins: cs.CsInsn) -> int | None:
    op = ins.operands[0] if len(ins.operands) == 1 else None
    return int(op.imm) if op is not None and op.type == x.X86_OP_IMM else None


def callees(proc: Process, path: str, caller: Symbol) -> tuple[list[Callee], list[NotFollowed]]:
    image = proc.image(path)
    found: dict[tuple[str, int], Callee] = {}
    skipped: list[NotFollowed] = []
    end = caller.vaddr + caller.size
    for ins in _MD.disasm(image.code(caller), caller.vaddr):
        call = ins.group(cs.CS_GRP_CALL)
        if not call and not (ins.group(cs.CS_GRP_JUMP) and ins.mnemonic.split()[-1] == "jmp"):
            continue
        site = f"{caller.name}+{ins.address - caller.vaddr:#x}"
        text = f"{ins.mnemonic} {ins.op_str}"
        target = _branch_target(ins)
        if target is not None and caller.vaddr <= target < end:
            continue  # a jump inside the function (or a call to the next instruction)
        if target is None:
            slot = got_slot(ins)
            name = image.slot_import.get(slot) if slot is not None else None
            if name is None:
                if call:  # an indirect jmp inside a function is mostly a switch table
                    skipped.append(
                        NotFollowed(site, text, "indirect call: its target is known only at run time")
                    )
                continue
            resolved = _imported(proc, name, site, text, skipped)
        elif (name := image.import_at(target)) is not None:
            resolved = _imported(proc, name, site, text, skipped)
        elif (sym := image.by_addr.get(target)) is not None:
            resolved = (path, sym)
        else:
            why = "no symbol at that address" + (
                "" if image.has_symtab else " (stripped: a static function?)"
            )
            skipped.append(NotFollowed(site, text, f"{why} in {path}"))
            continue
        if resolved is None:
            continue
        where, sym = resolved
        if sym.ifunc:
            skipped.append(
                NotFollowed(
                    site,
                    text,
                    f"{sym.name} is an IFUNC in {where}: the code run is chosen "
                    "at load time and has no symbol of that name",
                )
            )
            continue
        if sym == caller and where == path:
            continue  # recursion: the caller's own time already holds it
        key = (where, sym.vaddr)
        prev = found.get(key)
        found[key] = Callee(sym.name, where, sym, (prev.sites if prev else 0) + 1)
    return list(found.values()), skipped


def _imported(
    proc: Process, name: str, site: str, text: str, skipped: list[NotFollowed]
) -> tuple[str, Symbol] | None:
    try:
        hit = proc.defining(name)
    except DrillError as e:
        skipped.append(NotFollowed(site, text, str(e)))
        return None
    if hit is None:
        skipped.append(NotFollowed(site, text, f"{name}: no file the process maps defines it"))
    return hit
