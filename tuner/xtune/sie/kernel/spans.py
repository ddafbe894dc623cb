"""Critical spans for xsie.ko: what its kprobe handlers write into pt_regs, and where.

The shared engine finds the seed instructions (differ.py) and fits IV = a*V + b (lift.fit); a
kernel span adds the kprobe placement and one of the four updates the module implements:

  set    `mov $IV, reg`: before the next instruction, reg = a*V + b;
  cmp    `cmp $IV, reg` (the constant only decides a branch): the handler emulates the compare with
         IV(V) (EFLAGS of reg - IV(V) at the operand width) and resumes after it;
  shift  `shl|shr|sar $IV, reg` (the constant is a shift count): the handler computes the shift by
         IV(V) at the operand width and resumes after it. It leaves the flags as they were, so the
         span is taken only where no later instruction reads the flags the shift sets
         (liveness.flags_dead_after); the count stays in [0, width - 1] (v_range): C makes larger
         counts undefined and x86 masks them (mod 32, or 64 for a 64-bit operand);
  scale  a run of ALU instructions with constant operands on one register whose input takes a few
         known values (sbb r,r / setcc / mov $k): if for every input the result of each build is
         proportional to V (checked by evaluating the run), reg = reg * V / V0 before its consumer.

A span that a branch joins after its first instruction is refused (the probe would also run on a
path that did not load the constant). Each span bounds V to where its register holds the update
(v_range). Anything else is refused with the reason. The safe span is the whole function; its exits (ret,
return-thunk jumps, tail calls) are listed for the entry/exit monitors of the global transition.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from capstone import x86_const as x

from xtune.sie.differ import FunctionDiff, Seed
from xtune.sie.disasm import Insn, family
from xtune.sie.elfcode import Function
from xtune.sie.lift import Unsupported, fit
from xtune.sie.liveness import flags_dead_after

PT_REGS = (
    "rax",
    "rbx",
    "rcx",
    "rdx",
    "rsi",
    "rdi",
    "rbp",
    "r8",
    "r9",
    "r10",
    "r11",
    "r12",
    "r13",
    "r14",
    "r15",
)
XSIE_REG = dict(zip(PT_REGS, ("ax", "bx", "cx", "dx", "si", "di", "bp", *PT_REGS[7:]), strict=True))
ALU = ("and", "add", "sub", "or", "xor", "imul", "shl", "sal")
SHIFTS = ("shl", "sal", "shr", "sar")  # by an immediate count: the `shift` update
HIGH_BYTES = ("ah", "bh", "ch", "dh")  # bits 8..15 of a register: no pt_regs write for them


@dataclass
class KernelSpan:
    function: str
    update: str  # set | scale | cmp | shift
    check_start: int  # function-relative: bytes [check_start, probe_end) are verified before arming
    probe: int  # the instruction the update runs before
    probe_end: int
    reg: str  # 64-bit name
    width: int  # bits
    a: int
    b: int
    text: str
    pre_add: int = 0  # scale: the probe sits on a final `add $pre_add`, which still runs after it
    factor: int = 1  # scale: the register ends as at most factor * IV(V) (1 for set and cmp)

    def v_range(self) -> tuple[int, int]:
        """The values of V for which factor * (a*V + b) fits the register as a signed number; for
        a shift, for which the count a*V + b is in [0, width - 1]."""
        if self.update == "shift":
            lo, hi = 0, self.width - 1
        else:
            hi = ((1 << (self.width - 1)) - 1) // self.factor
            lo = -(1 << (self.width - 1)) // self.factor
        if self.a > 0:
            return -((self.b - lo) // self.a), (hi - self.b) // self.a
        return -((hi - self.b) // -self.a), (self.b - lo) // -self.a


@dataclass
class KernelFunction:
    name: str
    size: int
    exits: list[int]
    spans: list[KernelSpan] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)


def exits(insns: list[Insn], fn: Function, cold: Function | None = None) -> list[int]:
    """Offsets where execution leaves the function: ret, and jumps out of it, conditional ones
    too (return thunk, tail calls). A jump into the function's own out-of-line part (`cold`,
    FUNC.cold) does not leave it."""
    out = []
    for ins in insns:
        if ins.mnemonic == "ret":
            out.append(ins.off)
        elif ins.is_jump and ins.ci.operands and ins.ci.operands[0].type == x.X86_OP_IMM:
            if ins.target is not None:
                inside = fn.vaddr <= ins.target < fn.vaddr + len(fn.data)
            else:  # relocated: the return thunk, another function, or this function's cold part
                inside = _into(cold, fn.relocs.get(ins.off + ins.size - 4, ""))
            if not inside:
                out.append(ins.off)
    return out


def _into(cold: Function | None, reloc: str) -> bool:
    """Whether a rel32 relocation `symbol+addend` lands in `cold`."""
    m = re.fullmatch(r"(.*?)([+-]\d+)", reloc)
    if cold is None or m is None:
        return False
    name, target = m.group(1), int(m.group(2)) + 4  # the CPU adds rel32 to the next instruction
    if name == cold.name:
        return 0 <= target < len(cold.data)
    return name == cold.section and cold.vaddr <= target < cold.vaddr + len(cold.data)


def kernel_function(
    d: FunctionDiff, fn: Function, values: list[int], cold: Function | None = None
) -> KernelFunction:
    kf = KernelFunction(d.name, len(fn.data), exits(d.insns, fn, cold))
    seeds = sorted(d.seeds, key=lambda s: s.index)
    targets = {i.target - fn.vaddr for i in d.insns if i.target is not None}
    for run in _runs(d.insns, seeds):
        try:
            span = _span(d.insns, run, values)
        except Unsupported as e:
            kf.refusals.append(str(e))
            continue
        joins = sorted(t for t in targets if span.check_start < t <= span.probe)
        if joins:
            # A path jumping there skips the span's start, yet the probe would rewrite its state.
            kf.refusals.append(
                f"+{span.probe:#x}: a branch joins the span at +{joins[0]:#x}, so the probe "
                "would also run on a path that did not load the constant"
            )
            continue
        span.function = d.name
        if fn.masked(span.check_start, span.probe_end - span.check_start):
            kf.refusals.append(f"+{span.probe:#x}: a relocation falls inside the bytes to verify")
            continue
        kf.spans.append(span)
    return kf


def _runs(insns: list[Insn], seeds: list[Seed]) -> list[list[Seed]]:
    """Seeds of consecutive instructions that write the same register form one run."""
    runs: list[list[Seed]] = []
    for s in seeds:
        if (
            runs
            and s.index == runs[-1][-1].index + 1
            and _dst(insns[s.index]) == _dst(insns[runs[-1][-1].index])
        ):
            runs[-1].append(s)
        else:
            runs.append([s])
    return runs


def _dst(ins: Insn) -> str:
    op = ins.ci.operands[0] if ins.ci.operands else None
    if op is None or op.type != x.X86_OP_REG:
        return ""
    return family(ins.ci.reg_name(op.reg))


def _span(insns: list[Insn], run: list[Seed], values: list[int]) -> KernelSpan:
    first, last = insns[run[0].index], insns[run[-1].index]
    where = f"+{first.off:#x} `{first.mnemonic} {first.op_str}`"
    if any(s.operand != "imm" for s in run):
        raise Unsupported(f"{where}: the constant changes a memory offset (data layout)")
    reg = _dst(first)
    if reg not in PT_REGS:
        if first.mnemonic in SHIFTS:
            raise Unsupported(
                f"{where}: the constant is the shift count of `{first.mnemonic}` on memory: xsie.ko "
                "shifts registers only (a shift of a register would make it tunable)"
            )
        raise Unsupported(f"{where}: the constant's state is not a general-purpose register")
    width = first.ci.operands[0].size * 8
    form, a, b = fit(values, run[-1].values)
    if len(run) == 1 and first.mnemonic in SHIFTS and form == "affine":
        return _shift(insns, run[0].index, reg, width, a, b)
    if form != "affine":
        f = "log2 V" if form == "log2" else f"V/{form.removeprefix('div')}"
        raise Unsupported(f"{where}: IV = a*({f}) + b is not implemented by xsie.ko (a*V + b only)")
    nxt = insns[last.index + 1] if last.index + 1 < len(insns) else None
    if len(run) == 1 and first.mnemonic == "mov" and nxt:
        return KernelSpan(
            "", "set", first.off, nxt.off, nxt.off + nxt.size, reg, width, a, b, f"{reg} <- {a}*V + {b}"
        )
    if len(run) == 1 and first.mnemonic == "cmp":
        return KernelSpan(
            "",
            "cmp",
            first.off,
            first.off,
            first.off + first.size,
            reg,
            width,
            a,
            b,
            f"flags of {reg} - ({a}*V + {b})",
        )
    if nxt and all(insns[s.index].mnemonic in ALU for s in run):
        return _scale(insns, run, values, reg, width, nxt)
    raise Unsupported(f"{where}: no kernel update for this span shape")


def _shift(insns: list[Insn], k: int, reg: str, width: int, a: int, b: int) -> KernelSpan:
    """`shl|shr|sar $IV, reg`: xsie.ko shifts reg by IV(V) and resumes after the instruction."""
    ins = insns[k]
    where = f"+{ins.off:#x} `{ins.mnemonic} {ins.op_str}`"
    name = ins.ci.reg_name(ins.ci.operands[0].reg)
    if name in HIGH_BYTES:
        raise Unsupported(
            f"{where}: the shifted register is {name} (bits 8..15): xsie.ko writes low bytes only"
        )
    if not flags_dead_after(insns, k):
        raise Unsupported(
            f"{where}: the constant is the shift count (IV = {a}*V + {b}), but later code may read the "
            "flags the shift sets, and xsie.ko's shift update leaves the flags as they were (the "
            "span would be tunable where the flags are written again before any read)"
        )
    return KernelSpan(
        "", "shift", ins.off, ins.off, ins.off + ins.size, reg, width, a, b,
        f"{name} <- {name} {ins.mnemonic} ({a}*V + {b})",
    )  # fmt: skip


def _domain(ins: Insn, reg: str) -> list[int] | None:
    """The values `reg` can hold after `ins`, when `ins` fixes them to a few."""
    ops = ins.ci.operands
    if not ops or ops[0].type != x.X86_OP_REG or family(ins.ci.reg_name(ops[0].reg)) != reg:
        return None
    if ins.mnemonic == "sbb" and len(ops) == 2 and ops[1].type == x.X86_OP_REG and ops[1].reg == ops[0].reg:
        return [0, -1]
    if ins.mnemonic == "xor" and len(ops) == 2 and ops[1].type == x.X86_OP_REG and ops[1].reg == ops[0].reg:
        return [0]
    if ins.mnemonic.startswith("set") or ins.mnemonic in ("movzx", "movzbl"):
        return [0, 1]
    if ins.mnemonic == "mov" and ops[1].type == x.X86_OP_IMM:
        return [ops[1].imm]
    return None


def _eval(mnemonics: list[str], imms: list[int], value: int, width: int) -> int:
    mask = (1 << width) - 1
    for m, k in zip(mnemonics, imms, strict=True):
        if m == "and":
            value &= k
        elif m == "add":
            value += k
        elif m == "sub":
            value -= k
        elif m == "or":
            value |= k
        elif m == "xor":
            value ^= k
        elif m == "imul":
            value *= k
        else:
            value <<= k
        value &= mask
    return value - (1 << width) if value >> (width - 1) else value


def _scale(
    insns: list[Insn], run: list[Seed], values: list[int], reg: str, width: int, nxt: Insn
) -> KernelSpan:
    first = insns[run[0].index]
    before = insns[run[0].index - 1] if run[0].index else None
    domain = _domain(before, reg) if before else None
    if domain is None:
        raise Unsupported(f"+{first.off:#x}: the input of the span is not a known set of values")
    mnemonics = [insns[s.index].mnemonic for s in run]
    results = [
        [_eval(mnemonics, [s.values[k] for s in run], v, width) for v in domain] for k in range(len(values))
    ]
    for k, vk in enumerate(values):
        if any(r * values[0] != r0 * vk for r, r0 in zip(results[k], results[0], strict=True)):
            raise Unsupported(f"+{first.off:#x}: the span's result is not proportional to V ({results})")
    assert before is not None
    text = f"{reg} in {sorted(set(results[0]))} = k*V: {reg} <- {reg}*V/V0"
    factor = -(-max(abs(r) for r in results[0]) // abs(values[0]))
    last = insns[run[-1].index]
    if last.mnemonic in ("add", "sub"):
        # Probe the final add itself: the update pre-compensates its immediate. The probe then
        # covers `add` and the consumer instead of the consumer and a conditional jump after it,
        # so kprobes can jump-optimize it (cf. KernelX Appendix B).
        c = run[-1].values[0] * (1 if last.mnemonic == "add" else -1)
        return KernelSpan(
            "", "scale", before.off, last.off, nxt.off + nxt.size, reg, width, 1, 0, text, c, factor
        )
    return KernelSpan("", "scale", before.off, nxt.off, nxt.off + nxt.size, reg, width, 1, 0, text, 0, factor)
