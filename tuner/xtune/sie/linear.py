"""Multiplications the compiler expanded differently for each value: a run of register arithmetic
(mov, add, sub, neg, shl, lea, imul by an immediate, on 64-bit registers) is evaluated exactly, as
linear forms modulo 2^64 of the registers at its start. When, in every build, the run leaves one
live register R = c·X with c differing between the builds (`n * (K + 3)` as shifts and adds), the
run is one multiplication whose factor c is fitted like any operand.
"""

from __future__ import annotations

from dataclasses import dataclass

from capstone import x86_const as x

from xtune.sie.disasm import Insn
from xtune.sie.liveness import bytes_read_after, flags_dead_after

MASK = (1 << 64) - 1
Form = dict[str, int]  # register (or "1", the constant) -> coefficient modulo 2^64


@dataclass
class Region:
    start: int  # index of the run's first instruction in the first build (Insn.index)
    last: int  # index of its last instruction there (inclusive)
    reg: str  # R, the one register the run leaves that later code reads
    src: str  # X
    factors: list[int]  # c in each build (signed)


def _op_form(ci, op, state: dict[str, Form]) -> Form | None:  # type: ignore[no-untyped-def]
    if op.type == x.X86_OP_IMM:
        return {"1": op.imm & MASK}
    if op.type == x.X86_OP_REG and op.size == 8:
        r = ci.reg_name(op.reg)
        return dict(state.get(r, {r: 1}))
    return None


def _add(f: Form, g: Form, k: int = 1) -> Form:
    out = dict(f)
    for r, c in g.items():
        out[r] = (out.get(r, 0) + k * c) & MASK
    return {r: c for r, c in out.items() if c}


def _scaled(f: Form, k: int) -> Form:
    return {r: c * k & MASK for r, c in f.items() if c * k & MASK}


def step(ins: Insn, state: dict[str, Form]) -> bool:
    """Apply ins to `state`; False when it is not linear register arithmetic on 64-bit registers."""
    ci, m = ins.ci, ins.mnemonic
    ops = ci.operands
    if not ops or ops[0].type != x.X86_OP_REG or ops[0].size != 8 or ci.prefix[0]:
        return False
    dst = ci.reg_name(ops[0].reg)
    if dst in ("rsp", "rip"):
        return False
    cur = _op_form(ci, ops[0], state)
    assert cur is not None
    if m == "lea" and len(ops) == 2 and ops[1].type == x.X86_OP_MEM:
        mem = ops[1].mem
        if mem.segment or mem.base == x.X86_REG_RIP or mem.index == x.X86_REG_RIP:
            return False
        f: Form = {"1": mem.disp & MASK} if mem.disp else {}
        for reg, k in ((mem.base, 1), (mem.index, mem.scale)):
            if reg:
                r = ci.reg_name(reg)
                if not r.startswith("r"):  # a 32-bit address
                    return False
                f = _add(f, state.get(r, {r: 1}), k)
        state[dst] = f
        return True
    if m == "neg" and len(ops) == 1:
        state[dst] = _scaled(cur, -1)
        return True
    if len(ops) == 3 and m == "imul" and ops[2].type == x.X86_OP_IMM:
        src = _op_form(ci, ops[1], state)
        if src is None:
            return False
        state[dst] = _scaled(src, ops[2].imm)
        return True
    if len(ops) != 2:
        return False
    src = _op_form(ci, ops[1], state)
    if src is None:
        return False
    if m == "mov":
        state[dst] = src
    elif m in ("add", "sub"):
        state[dst] = _add(cur, src, 1 if m == "add" else -1)
    elif m in ("shl", "sal") and ops[1].type == x.X86_OP_IMM:
        state[dst] = _scaled(cur, 1 << (ops[1].imm & 63))
    else:
        return False
    return True


def _same(a: Insn, b: Insn) -> bool:
    return a.key == b.key and a.imms == b.imms and a.disps == b.disps


def find_region(listings: list[list[Insn]]) -> Region | str:
    """The one run where the builds (padding nops left out) differ, as a multiplication R = c·X,
    or why it is none. The run may start earlier, at identical register arithmetic (the copy of X
    into R), when only then it leaves one register times a factor."""
    base = listings[0]
    n = min(len(lst) for lst in listings)
    p = 0
    while p < n and all(_same(base[p], lst[p]) for lst in listings[1:]):
        p += 1
    s = 0
    while s < n - p and all(_same(base[-1 - s], lst[-1 - s]) for lst in listings[1:]):
        s += 1
    first = _region(listings, p, s)
    while isinstance(first, str) and p > 0 and step(base[p - 1], {}):
        p -= 1
        if isinstance(r := _region(listings, p, s), Region):
            return r
    return first


def _region(listings: list[list[Insn]], p: int, s: int) -> Region | str:
    forms: list[Form] = []
    reg = ""
    for lst in listings:
        run = lst[p : len(lst) - s]
        if not run:
            return "a build has no instructions where the others differ"
        state: dict[str, Form] = {}
        for ins in run:
            if not step(ins, state):
                return f"`{ins.mnemonic} {ins.op_str}` at +{ins.off:#x} is no register arithmetic"
        last = len(lst) - s - 1
        if not flags_dead_after(lst, last):
            return "the flags the run sets are read after it"
        live = [r for r, f in state.items() if f != {r: 1} and bytes_read_after(lst, last, r)]
        if len(live) != 1 or (reg and live[0] != reg):
            return f"the run leaves {len(live)} registers that later code reads (a multiplication leaves one)"
        reg = live[0]
        forms.append(state[reg])
    if any(len(f) != 1 or "1" in f for f in forms) or len({next(iter(f)) for f in forms}) != 1:
        return f"{reg} is not one register times a factor in every build"
    src = next(iter(forms[0]))
    factors = [c - (1 << 64) if c >> 63 else c for f in forms for c in f.values()]
    base = listings[0]
    return Region(base[p].index, base[len(base) - s - 1].index, reg, src, factors)
