"""What the code after an instruction reads of its results, along the straight line that follows it.

Two questions decide whether two encodings of a constant are the same computation:
- `flags_dead_after`: the status flags the instruction writes are never read (written again, or
  the function returns: the ABI passes no flags) before control leaves the straight line;
- `bytes_read_after`: how many low bytes of a register are read before the register is written
  whole (a 32- or 64-bit write) or dies at a return.

Both stop, answering conservatively, at the first branch or call: past it, other paths would have to
be followed too.
"""

from __future__ import annotations

import capstone as cs
from capstone import x86_const as x

from xtune.sie.disasm import Insn, family

_FLAGS = ("OF", "SF", "ZF", "AF", "PF", "CF")
_WRITES = ("MODIFY", "RESET", "SET", "UNDEFINED")
_TESTS = 0
for _f in _FLAGS:
    _TESTS |= getattr(x, f"X86_EFLAGS_TEST_{_f}")
# Registers a return leaves live: the return value and the callee-saved ones.
LIVE_AT_RETURN = {"rax", "rdx", "rbx", "rbp", "rsp", "r12", "r13", "r14", "r15"}


def _reads_flags(ci: cs.CsInsn) -> bool:
    return bool(ci.eflags & _TESTS) or any(ci.reg_name(r) == "rflags" for r in ci.regs_access()[0])


def _writes_all_flags(ci: cs.CsInsn) -> bool:
    f = ci.eflags
    return all(any(f & getattr(x, f"X86_EFLAGS_{w}_{fl}", 0) for w in _WRITES) for fl in _FLAGS)


def _leaves_line(ins: Insn) -> bool:
    """A branch, or a system call or interrupt (whose register reads capstone does not list)."""
    system = ins.ci.group(cs.CS_GRP_INT) or ins.mnemonic in ("syscall", "sysenter", "int3")
    return ins.is_jump or ins.is_call or ins.ends_flow or ins.indirect or bool(system)


def _returns(ins: Insn) -> bool:
    return bool(ins.ci.group(cs.CS_GRP_RET))


def flags_dead_after(insns: list[Insn], k: int) -> bool:
    """No instruction reads the flags that insns[k] leaves before they are all written again."""
    for ins in insns[k + 1 :]:
        if _reads_flags(ins.ci):
            return False
        if _returns(ins) or _writes_all_flags(ins.ci):
            return True
        if _leaves_line(ins):
            return False
    return False


def reg_bytes(name: str) -> int:
    """The width of a register name in bytes; ah..dh count as 2 (they are bits 8..15)."""
    r = name.lower()
    if r in ("ah", "bh", "ch", "dh"):
        return 2
    if r in ("al", "bl", "cl", "dl", "sil", "dil", "bpl", "spl") or (r.startswith("r") and r.endswith("b")):
        return 1
    if r in ("ax", "bx", "cx", "dx", "si", "di", "bp", "sp") or (r.startswith("r") and r.endswith("w")):
        return 2
    if r.startswith("e") or (r.startswith("r") and r.endswith("d")):
        return 4
    return 8


def bytes_read_after(insns: list[Insn], k: int, reg: str) -> int:
    """How many low bytes of `reg`'s family (as insns[k] leaves it) later code reads: 0 (none), 1,
    2, 4 or 8."""
    fam = family(reg)
    need = 0
    for ins in insns[k + 1 :]:
        read, written = ins.ci.regs_access()
        for r in read:
            if family(ins.ci.reg_name(r)) == fam:
                need = max(need, reg_bytes(ins.ci.reg_name(r)))
        if _returns(ins):
            return 8 if fam in LIVE_AT_RETURN else need
        if _leaves_line(ins):
            return 8
        if any(family(ins.ci.reg_name(r)) == fam and reg_bytes(ins.ci.reg_name(r)) >= 4 for r in written):
            return need
    return 8


def result_bytes_read(insns: list[Insn], k: int) -> int:
    """How many low bytes of insns[k]'s result later code reads: of its destination register, or 8
    when the destination is memory or the flags it writes are read."""
    ci = insns[k].ci
    if not ci.operands or ci.operands[0].type != x.X86_OP_REG:
        return 8
    if ci.eflags and not flags_dead_after(insns, k):
        return 8
    return max(1, bytes_read_after(insns, k, ci.reg_name(ci.operands[0].reg)))
