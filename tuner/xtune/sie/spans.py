"""Critical spans (where to patch) and safe spans (where a transition must not happen)."""

from __future__ import annotations

from dataclasses import dataclass

import capstone as cs
from capstone import x86_const as x

from xtune.sie.disasm import Insn, family
from xtune.sie.entries import Entries

JMP_LEN = 5
# SysV: xmm0-7 pass floating-point arguments, and no xmm register survives a call.
ARG_REGS = {"rdi", "rsi", "rdx", "rcx", "r8", "r9"} | {f"xmm{i}" for i in range(8)}
CALLER_SAVED = ARG_REGS | {"rax", "r10", "r11", "rflags"} | {f"xmm{i}" for i in range(16)}
RETURN_REGS = {"rax", "rdx", "xmm0", "xmm1"}
PASSED = "the value is passed to a callee"
STORED = "the value is stored to memory other than the stack"
ESCAPES = (PASSED, STORED)  # the value outlives the span: an old value stays in use after a change
ENTER_ANYWHERE = "control may enter anywhere"  # an indirect jump whose targets are not known


@dataclass
class Placement:
    first: int  # instruction index of the seed
    last: int  # inclusive
    patch: str  # jump | int3
    reason: str  # why int3


def place(insns: list[Insn], seed: int, entries: Entries) -> Placement:
    """The smallest run of whole instructions around the seed that holds a 5-byte jump.

    Only the first instruction of the run may be entered from elsewhere (`entries`: branch and
    jump-table targets); calls and indirect branches cannot be displaced; a direct jmp/jcc or a
    ret may end the run (a jump is relocated as rel32). Tried forward from the seed first, then
    starting earlier."""
    if entries.unknown:
        return Placement(seed, seed, "int3", f"{ENTER_ANYWHERE}: {entries.unknown}")
    targets = entries.offsets
    reason = "no run of instructions around it holds a 5-byte jump"
    for first in range(seed, max(-1, seed - 5), -1):
        if first < seed and not _displaceable(insns[first], last=False):
            reason = f"`{insns[first].mnemonic}` at +{insns[first].off:#x} cannot be displaced"
            break
        if first < seed and insns[first + 1].off in targets:
            break
        size = sum(i.size for i in insns[first:seed])
        for k in range(seed, len(insns)):
            ins = insns[k]
            if k > first and ins.off in targets:
                reason = f"+{ins.off:#x} is a branch target inside the 5 bytes"
                break
            if not _displaceable(ins, last=True):
                reason = f"`{ins.mnemonic}` at +{ins.off:#x} cannot be displaced"
                break
            size += ins.size
            if size >= JMP_LEN:
                return Placement(first, k, "jump", "")
            if ins.is_jump or ins.ends_flow:
                reason = "a branch follows within 5 bytes"
                break
    return Placement(seed, seed, "int3", reason)


def _displaceable(ins: Insn, last: bool) -> bool:
    """Can run from the trampoline; jumps and ret only as the last displaced instruction."""
    if ins.is_call or ins.indirect or ins.mnemonic in ("loop", "loope", "loopne", "jrcxz", "jecxz"):
        return False
    if ins.mnemonic in ("ud2", "hlt", "syscall", "int3"):
        return False
    return last or not (ins.is_jump or ins.ends_flow)


def _succ(insns: list[Insn], k: int, func_vaddr: int, index_of: dict[int, int]) -> list[int]:
    ins = insns[k]
    out = []
    if not ins.ends_flow and k + 1 < len(insns):
        out.append(k + 1)
    if ins.is_jump and ins.target is not None:
        t = index_of.get(ins.target - func_vaddr)
        if t is not None:
            out.append(t)
    return out


def _mem_key(ci: cs.CsInsn, op) -> str | None:  # type: ignore[no-untyped-def]
    """A stack slot (rsp/rbp based, no index) as a key; None for other memory."""
    m = op.mem
    if m.base in (x.X86_REG_RSP, x.X86_REG_RBP) and not m.index:
        return f"{ci.reg_name(m.base)}{m.disp:+d}"
    return None


def safe_span(insns: list[Insn], first: int, last: int, start_locs: set[str], func_vaddr: int):  # type: ignore[no-untyped-def]
    """Forward slice of the span's result inside the function (registers, flags, stack slots).

    Returns (function-relative ranges, reason, escapes). When the value leaves what an
    intra-procedural slice can bound (stored to non-stack memory, passed to a callee, returned,
    indirect jump) the safe span is the whole function and the reason says why; `escapes` is set
    when the value outlives the function's activation (a store, a call argument such as an
    allocation size), where even the whole function does not bound it."""
    index_of = {i.off: i.index for i in insns}
    whole = [(0, insns[-1].off + insns[-1].size)]
    live_in: dict[int, frozenset[str]] = {}
    included = set(range(first, last + 1))
    widened = ""
    work = [(s, frozenset(start_locs)) for s in _succ(insns, last, func_vaddr, index_of)]
    if insns[last].ends_flow and not insns[last].is_jump:
        return whole, "the span ends the function", False
    while work:
        k, taint = work.pop()
        old = live_in.get(k, frozenset())
        new = old | taint
        if k in live_in and new == old:
            continue
        live_in[k] = new
        ins = insns[k]
        out, escape = _transfer(ins, set(new))
        if escape:
            why = f"{escape} at +{ins.off:#x} (`{ins.mnemonic} {ins.op_str}`): whole function"
            if escape in ESCAPES:
                return whole, why, True
            widened = widened or why  # keep slicing: another path may still let the value escape
            continue
        if new:
            included.add(k)
        if out:
            for s in _succ(insns, k, func_vaddr, index_of):
                work.append((s, frozenset(out)))
    if widened:
        return whole, widened, False
    return (
        _ranges(insns, included),
        "forward slice of the span's result (registers, flags, stack slots)",
        False,
    )


def _transfer(ins: Insn, taint: set[str]) -> tuple[set[str], str]:
    ci = ins.ci
    if not taint:
        return set(), ""
    read, written = ci.regs_access()
    rd = {family(ci.reg_name(r)) for r in read}
    wr = {family(ci.reg_name(r)) for r in written}
    mem_r: list[str | None] = []
    mem_w: list[str | None] = []
    for op in ci.operands:
        if op.type == x.X86_OP_MEM:
            key = _mem_key(ci, op)
            (mem_w if op.access & cs.CS_AC_WRITE else mem_r).append(key)
            if op.access & cs.CS_AC_READ and op.access & cs.CS_AC_WRITE:
                mem_r.append(key)
            rd |= {family(ci.reg_name(r)) for r in (op.mem.base, op.mem.index) if r}
    if ins.mnemonic == "lea":
        mem_r = []
    uses = bool(rd & taint) or any(k in taint for k in mem_r if k)
    if ins.is_call:
        if taint & ARG_REGS or any(t.startswith("rsp") for t in taint):
            return set(), PASSED
        return taint - CALLER_SAVED, ""
    if ins.ci.group(cs.CS_GRP_RET):
        return set(), "the value is returned to callers" if taint & RETURN_REGS else ""
    if ins.indirect and ins.is_jump:
        return set(), "an indirect jump follows"
    out = set(taint)
    if uses:
        out |= wr
        for k in mem_w:
            if k is None:
                return set(), STORED
            out.add(k)
    else:
        if ins.mnemonic.startswith("mov") or ins.mnemonic == "lea" or ins.mnemonic.startswith("set"):
            out -= {r for r in wr if not _partial(ci)}
        else:
            out -= {"rflags"} & wr
            out -= {r for r in wr if not _partial(ci)}
        out -= {k for k in mem_w if k}
    return out, ""


def _partial(ci: cs.CsInsn) -> bool:
    """An 8/16-bit register write keeps the rest of the register."""
    return bool(ci.operands) and ci.operands[0].type == x.X86_OP_REG and ci.operands[0].size < 4


def _ranges(insns: list[Insn], included: set[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for k in sorted(included):
        s, e = insns[k].off, insns[k].off + insns[k].size
        if out and out[-1][1] == s:
            out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
    return out


def start_location(lifted_target: str, location: str, ins: Insn) -> set[str]:
    """The taint seed for the safe-span slice: the register family, stack slot, or flags."""
    if lifted_target == "flags":
        return {"rflags"}
    if lifted_target == "register":
        return {family(location)}
    op = ins.ci.operands[0]
    key = _mem_key(ins.ci, op) if op.type == x.X86_OP_MEM else None
    return {key} if key else {"<memory>"}
