"""Lifting a seed instruction: the symbolic state expression and the update that realizes V'.

The expression is fitted from the builds: IV = a*V + b (affine), or IV = a*log2(V) + b when the
compiler strength-reduced a multiplication or division by V into a shift. The update is the seed's
own operation with V' in place of the original operand. In the paper's terms (§3.4.2) it is a single
write when the seed does not read its target, an inverse when it overwrites it reversibly (add/sub/
xor/lea), and dual-location otherwise (and/or/imul/shift: information is lost). In user space all
three are realized the same way: the trampoline runs the operation on the untouched inputs with a
scratch register holding IV, so no saved copy is needed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from capstone import x86_const as x

from xtune.sie.differ import Seed
from xtune.sie.disasm import Insn, family

SCRATCH = ("r11", "r10", "r9", "r8", "rax", "rdx", "rsi", "rdi")
SUB = {"r11": ("r11b", "r11w", "r11d"), "r10": ("r10b", "r10w", "r10d"), "r9": ("r9b", "r9w", "r9d")}
SUB |= {"r8": ("r8b", "r8w", "r8d"), "rax": ("al", "ax", "eax"), "rdx": ("dl", "dx", "edx")}
SUB |= {"rsi": ("sil", "si", "esi"), "rdi": ("dil", "di", "edi"), "rcx": ("cl", "cx", "ecx")}

READ_ONLY = ("cmp", "test")
REVERSIBLE = ("add", "sub", "xor")
LOSSY = ("and", "or", "imul")
SHIFTS = ("shl", "sal", "shr", "sar", "rol", "ror")
# The low n bytes of these results depend only on the low n bytes of the operands.
LOW_BITS = ("mov", "movabs", "add", "sub", "xor", "and", "or", "imul", "lea")


class Unsupported(Exception):
    """The seed cannot be made tunable; str() is the reason shown to the user."""


@dataclass
class Lifted:
    target: str  # register | memory | flags
    location: str
    form: str  # see scope.FORMS
    a: int
    b: int
    width: int
    kind: str  # single_write | inverse | dual_location
    scratch: str  # 64-bit register holding IV in the trampoline
    body: list[str]  # Intel-syntax instructions (scratch holds IV; rsp adjusted by FRAME)
    writes_flags: bool  # the body rewrites the flags, so computing IV may clobber them

    @property
    def text(self) -> str:
        v = {"affine": "V", "log2": "log2(V)"}.get(self.form, f"V/{self.form[3:]}")
        return f"{self.location} <- {self.a}*{v} + {self.b}"


# f(V) = V / d (C division of a positive V): `N / 7` in the source, or a bound the compiler
# derived as one (`used + 7 <= K` counting steps of 7).
DIVISORS_POW2 = (2, 4, 8)
DIVISORS_OTHER = (3, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15, 16)

FRAME = 136  # the trampoline's stack use below the thread's red zone: 128 + the saved scratch


def fit(values: list[int], ivs: list[int], width: int = 8) -> tuple[str, int, int]:
    """(form, a, b) with iv = a*f(V) + b (mod 2^(8*width)) for every build, f = identity, log2 or
    V / d. Validation builds (analyze.py) decide whether a fit holds beyond the values built."""
    mask = (1 << (8 * width)) - 1
    forms: list[tuple[str, list[int]]] = [("affine", values)]
    if all(v > 0 and v & (v - 1) == 0 for v in values):
        forms.append(("log2", [v.bit_length() - 1 for v in values]))
    if all(v > 0 for v in values):  # powers of two first: the others need a longer update
        forms += [(f"div{d}", [v // d for v in values]) for d in (*DIVISORS_POW2, *DIVISORS_OTHER)]
    for form, xs in forms:
        if xs[1] == xs[0]:
            continue
        da, dx = ivs[1] - ivs[0], xs[1] - xs[0]
        if da % dx:
            continue
        a = da // dx
        b = ivs[0] - a * xs[0]
        if all((a * xv + b - iv) & mask == 0 for xv, iv in zip(xs, ivs, strict=True)):
            return form, a, b
    raise Unsupported(
        f"operand values {ivs} for V = {values} fit no a*f(V) + b (f: V, log2 V, V/d for d <= 16):"
        " the compiler folded V into another function of it here (a remainder, a division by another"
        " number); keep this use of the constant in a variable"
    )


def reduced_multiplier(
    insns: list[Insn], seed: Seed, seeds: dict[int, Seed], values: list[int]
) -> int | None:
    """gcc's `(n * M) % K` for a power-of-two K: `imul R, X, M mod K; and R32, K - 1`, the
    multiplier reduced modulo each build's K. Any multiplier congruent to M modulo V' gives the
    same masked product, so the one of the largest K analyzed serves every power of two V' up to
    it (analyze.py sets both constraints). Only when the `and` with the mask V - 1 directly
    follows, on the product's register, rewriting the flags: nothing reads the unmasked product.
    Returns that multiplier, or None."""
    ins = insns[seed.index]
    if ins.mnemonic != "imul" or len(ins.ci.operands) != 3 or seed.index + 1 >= len(insns):
        return None
    if not all(v > 0 and v & (v - 1) == 0 for v in values) or max(values) > 2**31:
        return None
    mask = seeds.get(seed.index + 1)
    nxt = insns[seed.index + 1]
    if mask is None or nxt.mnemonic != "and" or mask.values != [v - 1 for v in values]:
        return None
    ops = nxt.ci.operands
    if ops[0].type != x.X86_OP_REG or family(nxt.ci.reg_name(ops[0].reg)) != family(
        ins.ci.reg_name(ins.ci.operands[0].reg)
    ):
        return None
    if ops[0].size < 4:  # a byte or word `and` keeps the product's upper bits
        return None
    widest = max(range(len(values)), key=lambda i: values[i])
    top = seed.values[widest] % values[widest]
    if any(iv != top % v for iv, v in zip(seed.values, values, strict=True)):
        return None
    return top


def lift(ins: Insn, seed: Seed, values: list[int], read_bytes: int = 8) -> Lifted:
    """`read_bytes`: how many low bytes of the result later code reads (liveness.result_bytes_read);
    builds that agree on those bytes compute the same (e.g. `add eax, -0x80` for V = 128 before
    only `al` is read)."""
    ci = ins.ci
    m = ins.mnemonic
    width = (ci.operands[0].size or 8) if seed.operand == "imm" else 8
    form, a, b = seed.fitted or fit(values, seed.values, min(width, read_bytes) if m in LOW_BITS else width)
    if ci.operands and ci.operands[0].type == x.X86_OP_REG and ci.reg_name(ci.operands[0].reg) == "rsp":
        raise Unsupported(
            f"`{m} {ins.op_str}`: the stack frame size depends on the constant (an array on the stack)"
        )
    ops = _split_ops(ins.op_str)
    if seed.operand == "disp":
        if m != "lea":
            raise Unsupported(
                f"`{m} {ins.op_str}`: the constant changes a memory offset (data layout: field offset"
                " or array stride), which differs for objects already in memory"
            )
        return _lift_lea(ins, ops, form, a, b)
    used = {family(ci.reg_name(r)) for r in _regs(ci)}
    dst = ci.operands[0]
    if m in SHIFTS:
        if "rcx" in used:
            return _lift_shift_of_rcx(ins, ops, used, form, a, b, width)
        scratch = "rcx"
    else:
        scratch = next((r for r in SCRATCH if r not in used), "")
        if not scratch:
            raise Unsupported(f"`{m} {ins.op_str}`: no free scratch register")
    reg = _sized(scratch, 1 if m in SHIFTS else width)
    loc = _rsp_adjust(ops[0])
    target = "memory" if dst.type == x.X86_OP_MEM else "register"
    if m in ("mov", "movabs"):
        if len(ops) != 2:
            raise Unsupported(f"`{m} {ins.op_str}`: unexpected operands")
        return Lifted(
            target, ops[0], form, a, b, width, "single_write", scratch, [f"mov {loc}, {reg}"], False
        )
    if m in READ_ONLY:
        return Lifted(
            "flags", "eflags", form, a, b, width, "single_write", scratch, [f"{m} {loc}, {reg}"], True
        )
    if m in REVERSIBLE or m in ("and", "or"):
        kind = "inverse" if m in REVERSIBLE else "dual_location"
        return Lifted(target, ops[0], form, a, b, width, kind, scratch, [f"{m} {loc}, {reg}"], True)
    if m == "imul" and len(ops) == 3:
        if dst.type != x.X86_OP_REG:
            raise Unsupported(f"`{m} {ins.op_str}`: unexpected destination")
        src = _rsp_adjust(ops[1])
        body = (
            [f"imul {ops[0]}, {reg}"]
            if ops[1] == ops[0]
            else [f"mov {ops[0]}, {src}", f"imul {ops[0]}, {reg}"]
        )
        kind = "dual_location" if ops[1] == ops[0] else "single_write"
        return Lifted("register", ops[0], form, a, b, width, kind, scratch, body, True)
    if m in SHIFTS and len(ops) == 2:
        # A shift by 0 leaves the flags alone: IV is computed with the flags saved (writes_flags False).
        return Lifted(target, ops[0], form, a, b, width, "dual_location", scratch, [f"{m} {loc}, cl"], False)
    raise Unsupported(f"`{m} {ins.op_str}`: the constant reaches an instruction SIE does not lift")


def _lift_shift_of_rcx(
    ins: Insn, ops: list[str], used: set[str], form: str, a: int, b: int, width: int
) -> Lifted:
    """A shift whose operand is (or is addressed by) rcx, which a shift by a register count needs
    for the count: IV goes to a scratch S, swapped with rcx around the shift, and the operand names
    S wherever it named rcx (S holds rcx's value then). xchg leaves the flags alone, and a shift by
    cl sets them as the shift by the same immediate does."""
    m = ins.mnemonic
    scratch = next((r for r in SCRATCH if r not in used), "")
    if not scratch:
        raise Unsupported(f"`{m} {ins.op_str}`: no free scratch register")
    if len(ops) != 2 or re.search(r"\bch\b", ops[0]):
        raise Unsupported(f"`{m} {ins.op_str}`: shift by V needs rcx, which the instruction uses")
    names = dict(zip(SUB["rcx"], SUB[scratch], strict=True)) | {"rcx": scratch}
    operand = re.sub(r"\b(rcx|ecx|cx|cl)\b", lambda g: names[g.group(1)], _rsp_adjust(ops[0]))
    target = "memory" if ins.ci.operands[0].type == x.X86_OP_MEM else "register"
    body = [f"xchg {scratch}, rcx", f"{m} {operand}, cl", f"xchg {scratch}, rcx"]
    # A shift by 0 leaves the flags alone: IV is computed with the flags saved (writes_flags False).
    return Lifted(target, ops[0], form, a, b, width, "dual_location", scratch, body, False)


def _lift_lea(ins: Insn, ops: list[str], form: str, a: int, b: int) -> Lifted:
    ci = ins.ci
    mem = ci.operands[1].mem
    used = {family(ci.reg_name(r)) for r in _regs(ci)}
    scratch = next(r for r in SCRATCH if r not in used)
    if mem.base and mem.index:
        raise Unsupported(f"`lea {ins.op_str}`: base, index and a tunable offset: no form with a register")
    addr_reg = ci.reg_name(mem.base or mem.index)
    if addr_reg == "rip":
        raise Unsupported(f"`lea {ins.op_str}`: the constant offsets a rip-relative address")
    scale = mem.scale if mem.index else 1
    if addr_reg == "rsp":
        raise Unsupported(f"`lea {ins.op_str}`: the constant offsets a stack address (frame layout)")
    width = ci.operands[0].size
    kind = "inverse" if family(ci.reg_name(ci.operands[0].reg)) == family(addr_reg) else "single_write"
    body = [f"lea {ops[0]}, [{scratch} + {addr_reg}*{scale}]"]
    return Lifted("register", ops[0], form, a, b, width, kind, scratch, body, False)


def _split_ops(op_str: str) -> list[str]:
    return [o.strip() for o in op_str.split(",")] if op_str else []


def _rsp_adjust(op: str) -> str:
    """Memory operands based on rsp move by the trampoline's frame."""
    return op.replace("[rsp", f"[rsp + {FRAME}") if "[rsp" in op else op


def _regs(ci) -> list[int]:  # type: ignore[no-untyped-def]
    read, written = ci.regs_access()
    return list(read) + list(written)


def _sized(reg64: str, width: int) -> str:
    if width == 8:
        return reg64
    return SUB[reg64][{1: 0, 2: 1, 4: 2}[width]]
