"""Trampoline synthesis: the displaced instructions with the update, as bytes plus relocations.

Layout (the engine appends `jmp span_end` and fills the relocations):
    lea rsp, [rsp - 128]        ; step over the thread's red zone
    push S                      ; S: a scratch register the seed does not use
    movabs S, <knob applied>    ; knob_abs64 relocation
    mov S, qword ptr [S]        ; V', one aligned 8-byte load
    <IV = a*f(V') + b in S>     ; lea when possible; flags saved if the seed does not rewrite them
    <the seed's operation with S in place of its constant>
    pop S
    lea rsp, [rsp + 128]
    <the other displaced instructions, relocated; a final jmp/jcc as rel32>
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path

import capstone as cs

from xtune.sie.disasm import Insn
from xtune.sie.lift import Lifted
from xtune.sie.scope import Reloc

KNOB_PLACEHOLDER = 0x1122334455667788
_MD = cs.Cs(cs.CS_ARCH_X86, cs.CS_MODE_64)
_MD.detail = True


class SynthError(RuntimeError):
    pass


def assemble(lines: list[str]) -> bytes:
    """Intel-syntax lines to raw bytes with GNU as."""
    with tempfile.TemporaryDirectory() as d:
        src, obj, raw = Path(d, "t.s"), Path(d, "t.o"), Path(d, "t.bin")
        src.write_text(".intel_syntax noprefix\n.text\n" + "\n".join(lines) + "\n")
        r = subprocess.run(["as", "--64", "-o", str(obj), str(src)], capture_output=True, text=True)
        if r.returncode != 0:
            raise SynthError(f"as rejected {lines}: {r.stderr.strip()}")
        subprocess.run(["objcopy", "-O", "binary", "-j", ".text", str(obj), str(raw)], check=True)
        return raw.read_bytes()


def iv_code(lifted: Lifted) -> list[str]:
    """Instructions turning V (in S) into IV (in S); the flags are kept unless the seed rewrites them."""
    s, a, b = lifted.scratch, lifted.a, lifted.b
    fits = lambda v: -(2**31) <= v < 2**31  # noqa: E731
    out: list[str] = []
    if lifted.form == "log2":
        out.append(f"bsr {s}, {s}")
    elif lifted.form.startswith("div"):
        out += _divide(s, int(lifted.form[3:]))
    if a in (1, 2, 4, 8) and fits(b):
        if a != 1 or b:
            out.append(f"lea {s}, [{s}*{a} + {b}]")
    else:
        if not (fits(a) and fits(b)):
            raise SynthError(f"IV = {a}*V + {b} does not fit 32-bit immediates")
        out.append(f"imul {s}, {s}, {a}")
        if b:
            out.append(f"add {s}, {b}")
    if not lifted.writes_flags and any(not line.startswith("lea") for line in out):
        out = ["pushfq", *out, "popfq"]
    return out


# V / d for d not a power of two: V * m >> k, exact for 0 < V < DIV_EXACT_BELOW (analyze.py caps
# the range there): with m = ceil(2^k / d) and e = m*d - 2^k, the error V*e / (d*2^k) stays below
# 1/d while V*e < 2^k.
DIV_EXACT_BELOW = 1 << 26


def _divide(s: str, d: int) -> list[str]:
    if d & (d - 1) == 0:
        return [f"shr {s}, {d.bit_length() - 1}"]
    k = 30 + d.bit_length() - 1
    m = -(-(1 << k) // d)
    if m >= 1 << 31 or (m * d - (1 << k)) * DIV_EXACT_BELOW >= 1 << k:
        raise SynthError(f"no exact multiply-shift for V / {d}")
    return [f"imul {s}, {s}, {m}", f"shr {s}, {k}"]


def seed_piece(lifted: Lifted, ins: Insn) -> tuple[bytes, list[Reloc], str]:
    """The seed's replacement: bytes, relocations and the readable update text."""
    s = lifted.scratch
    body = list(lifted.body)
    rip_target = None
    for k, line in enumerate(body):
        if "[rip" in line:
            m = ins.ci.operands[0].mem if ins.ci.operands[0].type == 3 else ins.ci.operands[1].mem
            rip_target = ins.ci.address + ins.ci.size + m.disp
            body[k] = re.sub(r"\[rip[^\]]*\]", "[rip + 0x7fffffff]", line)
    lines = (
        [
            "lea rsp, [rsp - 128]",
            f"push {s}",
            f"movabs {s}, {KNOB_PLACEHOLDER:#x}",
            f"mov {s}, qword ptr [{s}]",
        ]
        + iv_code(lifted)
        + body
        + [f"pop {s}", "lea rsp, [rsp + 128]"]
    )
    code = assemble(lines)
    relocs = [Reloc(code.index(KNOB_PLACEHOLDER.to_bytes(8, "little")), "knob_abs64", 0)]
    if rip_target is not None:
        pos = 0
        for ci in _MD.disasm(code, 0):
            if ci.disp_size == 4 and "rip" in ci.op_str:
                extra = ci.size - ci.disp_offset - 4
                relocs.append(Reloc(ci.address + ci.disp_offset, "rip32", rip_target - extra))
            pos = ci.address + ci.size
        assert pos == len(code)
    return code, relocs, "; ".join(iv_code(lifted) + body)


def relocated(ins: Insn) -> tuple[bytes, list[Reloc]]:
    """A displaced non-seed instruction, runnable from the trampoline."""
    ci = ins.ci
    if ins.is_jump and ins.target is not None:
        if ins.mnemonic == "jmp":
            return b"\xe9\0\0\0\0", [Reloc(1, "rel32", ins.target)]
        cc = _JCC.get(ins.mnemonic)
        if cc is None:
            raise SynthError(f"`{ins.mnemonic}` cannot be relocated")
        return bytes([0x0F, 0x80 | cc]) + b"\0\0\0\0", [Reloc(2, "rel32", ins.target)]
    if "rip" in ci.op_str and ci.disp_size == 4:
        for op in ci.operands:
            if op.type == 3 and op.mem.base == cs.x86_const.X86_REG_RIP:
                target = ci.address + ci.size + op.mem.disp
                extra = ci.size - ci.disp_offset - 4
                return ins.raw, [Reloc(ci.disp_offset, "rip32", target - extra)]
    if "rip" in ci.op_str:
        raise SynthError(f"`{ins.mnemonic} {ins.op_str}` cannot be relocated")
    return ins.raw, []


_JCC = {
    "jo": 0, "jno": 1, "jb": 2, "jae": 3, "je": 4, "jne": 5, "jbe": 6, "ja": 7,
    "js": 8, "jns": 9, "jp": 10, "jnp": 11, "jl": 12, "jge": 13, "jle": 14, "jg": 15,
}  # fmt: skip


def trampoline(pieces: list[tuple[bytes, list[Reloc]]]) -> tuple[bytes, list[Reloc]]:
    code = b""
    relocs: list[Reloc] = []
    for data, rs in pieces:
        relocs += [Reloc(r.offset + len(code), r.kind, r.target) for r in rs]
        code += data
    return code, relocs
