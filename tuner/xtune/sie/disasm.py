"""Capstone disassembly of one function, with operands normalized so builds can be compared."""

from __future__ import annotations

from dataclasses import dataclass

import capstone as cs
from capstone import x86_const as x

from xtune.sie.elfcode import ElfCode, Function

_MD = cs.Cs(cs.CS_ARCH_X86, cs.CS_MODE_64)
_MD.detail = True

BRANCH_GROUPS = (cs.CS_GRP_JUMP, cs.CS_GRP_CALL, cs.CS_GRP_RET, cs.CS_GRP_IRET)


@dataclass
class Insn:
    index: int
    off: int  # function-relative
    size: int
    raw: bytes
    mnemonic: str
    op_str: str
    ci: cs.CsInsn
    key: str  # normalized text: equal across builds unless the code's shape differs
    imms: list[int]  # immediates (not branch targets), sign-normalized, relocated ones excluded
    disps: list[int]  # memory displacements of non-rip operands
    target: int | None  # direct branch target (absolute ELF address), None otherwise
    negated: bool = False  # `sub x, imm` read as `add x, -imm` (compilers pick either by encoding size)

    @property
    def is_nop(self) -> bool:
        return self.mnemonic == "nop"

    @property
    def is_jump(self) -> bool:
        return self.ci.group(cs.CS_GRP_JUMP)

    @property
    def is_call(self) -> bool:
        return self.ci.group(cs.CS_GRP_CALL)

    @property
    def ends_flow(self) -> bool:
        """No fall-through: ret, unconditional jmp, ud2/hlt."""
        # The last word: `notrack jmp` (CET) and `bnd jmp` are jumps too.
        return self.mnemonic.split()[-1] in ("jmp", "ret", "ud2", "hlt") or self.ci.group(cs.CS_GRP_RET)

    @property
    def indirect(self) -> bool:
        return (self.is_jump or self.is_call) and self.target is None


def signed(v: int, width: int) -> int:
    bits = 8 * width
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def family(reg: str) -> str:
    """The 64-bit register a register name is part of (al, ax, eax -> rax); others unchanged."""
    table = {
        "a": "rax",
        "b": "rbx",
        "c": "rcx",
        "d": "rdx",
    }
    r = reg.lower()
    for k, fam in table.items():
        if r in (f"{k}l", f"{k}h", f"{k}x", f"e{k}x", f"r{k}x"):
            return fam
    for base in ("si", "di", "bp", "sp"):
        if r in (base, f"{base}l", f"e{base}", f"r{base}"):
            return f"r{base}"
    if r.startswith("r") and r[1:].rstrip("bwd").isdigit():
        return r.rstrip("bwd")
    return r


def disassemble(code: ElfCode, fn: Function) -> list[Insn]:
    out: list[Insn] = []
    end = fn.vaddr + len(fn.data)
    starts: dict[int, int] = {}
    real = 0  # instructions other than padding nops: labels count these, so padding never matters
    for ci in _MD.disasm(fn.data, fn.vaddr):
        starts[ci.address] = real
        real += ci.mnemonic != "nop"
        off = ci.address - fn.vaddr
        parts = [ci.mnemonic]
        imms: list[int] = []
        disps: list[int] = []
        target = None
        branch = any(ci.group(g) for g in BRANCH_GROUPS)
        for n, op in enumerate(ci.operands):
            if op.type == x.X86_OP_IMM:
                relocated = fn.masked(off + ci.imm_offset, ci.imm_size) if ci.imm_size else False
                if branch:
                    target = op.imm
                    if relocated or fn.masked(off + 1, 1):
                        target = None
                        parts.append("reloc:" + fn.relocs.get(off + ci.size - 4, "?"))
                    else:
                        parts.append(f"@{op.imm}")  # resolved below to an index or a symbol
                elif relocated:
                    parts.append("reloc:" + fn.relocs[off + ci.imm_offset])
                else:
                    imms.append(signed(op.imm, op.size or ci.imm_size or 8))
                    parts.append(f"imm{n}")
            elif op.type == x.X86_OP_REG:
                parts.append(ci.reg_name(op.reg))
            elif op.type == x.X86_OP_MEM:
                m = op.mem
                base = ci.reg_name(m.base) if m.base else ""
                index = ci.reg_name(m.index) if m.index else ""
                if ci.disp_size and fn.masked(off + ci.disp_offset, ci.disp_size):
                    d = "reloc:" + fn.relocs[off + ci.disp_offset]
                elif m.base == x.X86_REG_RIP:
                    d = "rip:" + code.symbolize(ci.address + ci.size + m.disp)
                else:
                    disps.append(m.disp)
                    d = "disp"
                parts.append(f"{op.size}[{base}+{index}*{m.scale}+{d}]")
        negated = ci.mnemonic == "sub" and len(imms) == 1 and "imm1" in parts
        if negated:
            parts[0], imms = "add", [-imms[0]]
        out.append(
            Insn(len(out), off, ci.size, bytes(ci.bytes), ci.mnemonic, ci.op_str, ci, "", imms, disps, target)
        )
        out[-1].key = " ".join(parts)
        out[-1].negated = negated
    # Branch targets: an instruction index inside the function, a symbol outside it.
    for ins in out:
        if ins.target is not None:
            if fn.vaddr <= ins.target < end and ins.target in starts:
                label = f"L{starts[ins.target]}"
            else:
                label = code.symbolize(ins.target)
            ins.key = ins.key.replace(f"@{ins.target}", label)
    return out
