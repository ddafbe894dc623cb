"""Data words that are a function of the constant, e.g. the double `1.0 / K` that the compiler
folds into `.rodata`: instead of the word (a data write is not scoped by spans), each instruction
that reads it becomes a critical span whose trampoline computes the word from V' and runs the
instruction on that value.

A word is retuned only when
- it is read-only data (`.rodata*`, `.data.rel.ro`: the program cannot change it, so computing
  it from V' at each read is the word);
- every build (validation builds too) holds exactly the double nearest c / V or c · V, one c
  for all (IEEE division and multiplication are correctly rounded, so the trampoline's
  divsd/mulsd under round-to-nearest gives the compiler's bits for any V);
- every instruction that addresses it is a scalar SSE read of the whole word (`movsd`,
  `mulsd`, ... xmm, qword ptr [rip + X]) at the same place in every build, and no pointer can
  reach it (`lea` or an indexed operand in the code, a pointer stored in data);
- every differing byte lies in such a word.
Anything else is refused with the reason."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from capstone import x86_const as x

from xtune.sie.differ import DataDiff
from xtune.sie.disasm import Insn, disassemble
from xtune.sie.elfcode import ElfCode
from xtune.sie.lift import Lifted, Unsupported
from xtune.sie.scope import Reloc
from xtune.sie.synth import KNOB_PLACEHOLDER, assemble

# Scalar double reads of a memory operand: `OP xmm, m64` runs as `OP xmm, xmmF` with F = f(V').
SCALAR_F64 = ("mulsd", "divsd", "addsd", "subsd", "minsd", "maxsd", "ucomisd", "comisd", "sqrtsd")
LOAD_F64 = "movsd"  # xmm <- m64 (the upper half zeroed), as `movq xmm, xmmF` does
XMM_SCRATCH = ("xmm15", "xmm14", "xmm13", "xmm12")
MXCSR_DEFAULT = 0x1F80  # round to nearest, exceptions masked: the compiler's folding


@dataclass
class DataRead:
    function: str
    index: int  # instruction index in the first build's listing
    form: str  # f64_div | f64_mul
    c: float


@dataclass
class DataWord:
    section: str
    vaddr: int  # in the first build
    reads: list[DataRead]


def data_words(codes: list[ElfCode], values: list[int], dd: DataDiff) -> list[DataWord]:
    """The words of `dd` the code can be retuned for, or Unsupported with the reason."""
    if not dd.vaddr:
        raise Unsupported("the section has no address (an object file): its readers are relocations")
    if not dd.section.startswith((".rodata", ".data.rel.ro")):
        raise Unsupported(
            f"{dd.section} is writable: the program may change the word, which reads computing it from V"
            " would miss (a `const` object lands in .rodata)"
        )
    differing = {dd.vaddr + o for o in dd.offsets}
    section = (dd.vaddr, dd.vaddr + len(codes[0].data_sections[dd.section].data))
    listings: dict[str, list[list[Insn]]] = {}
    words: dict[int, DataWord] = {}
    for name, fn in codes[0].functions.items():
        first = disassemble(codes[0], fn)
        for ins in first:
            where = f"{name}+{ins.off:#x} (`{ins.mnemonic} {ins.op_str}`)"
            for pointer in _pointers(ins):
                inside = section[0] <= pointer <= section[1]
                lo, hi = _reach(codes[0], pointer, section[1]) if inside else (0, 0)
                if any(lo <= a < hi for a in differing):
                    raise Unsupported(
                        f"{where} takes an address from which a pointer or index may read the word"
                    )
            hit = _addressed(ins)
            if hit is None or not any(hit[0] <= a < hit[0] + hit[1] for a in differing):
                continue
            if not _scalar_read(ins) or hit[1] != 8:
                raise Unsupported(f"{where} uses it otherwise than as a scalar double read of the word")
            if name not in listings:
                listings[name] = [first] + [disassemble(c, c.functions[name]) for c in codes[1:]]
            read = _fit(listings[name], ins.index, values, codes, where)
            read.function = name
            words.setdefault(hit[0], DataWord(dd.section, hit[0], [])).reads.append(read)
    for ds in codes[0].data_sections.values():  # pointers in data (relocated ones hold their value too)
        for off in range(0, len(ds.data) - 7, 8):
            value = int.from_bytes(ds.data[off : off + 8], "little")
            lo, hi = _reach(codes[0], value, section[1]) if section[0] <= value <= section[1] else (0, 0)
            if any(lo <= a < hi for a in differing):
                raise Unsupported(f"{ds.name}+{off:#x} holds a pointer from which the word may be read")
    for w in words:
        sym = codes[0].symbol_at(w)
        if sym and sym[2] in codes[0].global_objects:
            raise Unsupported(
                f"the word is in the global object {sym[2]}, which other units may read through"
                " a pointer (the GOT in a library): make it static"
            )
    uncovered = sorted(a for a in differing if not any(w <= a < w + 8 for w in words))
    if uncovered:
        raise Unsupported(f"no instruction reads the differing byte at {uncovered[0]:#x} as a double")
    return list(words.values())


def _addressed(ins: Insn) -> tuple[int, int] | None:
    """(address, size) of the rip-relative memory operand, or of an absolute one."""
    ci = ins.ci
    for op in ci.operands:
        if op.type != x.X86_OP_MEM:
            continue
        m = op.mem
        if m.base == x.X86_REG_RIP:
            return ci.address + ci.size + m.disp, op.size
        if not m.base and not m.index:
            return m.disp, op.size
    return None


def _pointers(ins: Insn) -> list[int]:
    """Addresses the instruction makes without reading the whole word there: `lea` of a
    rip-relative or absolute operand, an operand indexed from such an address, an immediate
    (`mov esi, OFFSET word` in an executable that is no PIE; the caller keeps those that fall
    into the word's section)."""
    ci = ins.ci
    out = []
    for op in ci.operands:
        if op.type == x.X86_OP_IMM and not ins.is_jump and not ins.is_call:
            out.append(int(op.imm))
        if op.type != x.X86_OP_MEM:
            continue
        m = op.mem
        base = ci.address + ci.size if m.base == x.X86_REG_RIP else 0 if not m.base else None
        if base is not None and (ins.mnemonic == "lea" or m.index):
            out.append(base + m.disp)
    return out


def _reach(code: ElfCode, pointer: int, section_end: int) -> tuple[int, int]:
    """The bytes code may read through `pointer`: its object (a sized symbol, one past its end
    included), a string literal up to its NUL, else everything after it in the section."""
    sym = code.symbol_at(pointer)
    if sym:
        return sym[0], sym[0] + sym[1] + 1
    for ds in code.data_sections.values():
        rel = pointer - ds.vaddr
        if ds.vaddr and 0 <= rel < len(ds.data):
            end = ds.data.find(b"\0", rel)
            text = ds.data[rel:end] if end >= 0 else b""
            if text and all(32 <= c < 127 or c in b"\t\n\r" for c in text):
                return pointer, pointer + len(text) + 1
    return pointer, section_end


def _scalar_read(ins: Insn) -> bool:
    ops = ins.ci.operands
    if len(ops) != 2 or ops[0].type != x.X86_OP_REG or ops[1].type != x.X86_OP_MEM:
        return False
    if not ins.ci.reg_name(ops[0].reg).startswith("xmm"):
        return False
    return ins.mnemonic in SCALAR_F64 or ins.mnemonic == LOAD_F64


def _fit(
    listings: list[list[Insn]], index: int, values: list[int], codes: list[ElfCode], where: str
) -> DataRead:
    words = []
    for lst, code in zip(listings, codes, strict=True):
        if index >= len(lst) or lst[index].mnemonic != listings[0][index].mnemonic:
            raise Unsupported(f"{where}: the read is elsewhere in another build")
        hit = _addressed(lst[index])
        raw = _read(code, hit[0]) if hit else None
        if raw is None:
            raise Unsupported(f"{where}: the word is missing from another build")
        words.append(struct.unpack("<d", raw)[0])
    v0, w0 = float(values[0]), words[0]
    candidates = [("f64_div", w0 * v0), ("f64_div", 1.0), ("f64_mul", w0 / v0 if v0 else 0.0)]
    for form, c in candidates:
        op = (lambda v, c=c: c / v) if form == "f64_div" else (lambda v, c=c: c * v)  # noqa: E731
        try:
            if all(_bits(op(float(v))) == _bits(w) for v, w in zip(values, words, strict=True)):
                return DataRead("", index, form, c)
        except ZeroDivisionError:
            continue
    raise Unsupported(f"{where}: the doubles {words} for V = {values} are neither c / V nor c * V")


def _read(code: ElfCode, vaddr: int) -> bytes | None:
    """The 8 bytes at `vaddr` of a data section (relocated bytes count as missing)."""
    for ds in code.data_sections.values():
        off = vaddr - ds.vaddr
        if ds.vaddr and 0 <= off and off + 8 <= len(ds.data):
            return None if ds.relocs & set(range(off, off + 8)) else ds.data[off : off + 8]
    return None


def _bits(f: float) -> int:
    return int.from_bytes(struct.pack("<d", f), "little")


def read_piece(ins: Insn, read: DataRead) -> tuple[bytes, list[Reloc], str, Lifted]:
    """The read's replacement: f(V') computed into a scratch xmm under round-to-nearest (the
    thread's MXCSR, sticky flags included, restored before the read runs), then the read from it."""
    used = {ins.ci.reg_name(r) for r in ins.ci.regs_access()[0] + ins.ci.regs_access()[1]}
    fv, fc = [r for r in XMM_SCRATCH if r not in used][:2]
    dst = ins.ci.reg_name(ins.ci.operands[0].reg)
    op = "divsd" if read.form == "f64_div" else "mulsd"
    run = f"movq {dst}, {fc}" if ins.mnemonic == LOAD_F64 else f"{ins.mnemonic} {dst}, {fc}"
    compute = [
        "mov r11, qword ptr [r11]",
        f"cvtsi2sd {fv}, r11",
        f"movabs r11, {_bits(read.c):#x}",
        f"movq {fc}, r11",
        f"{op} {fc}, {fv}",
    ]
    lines = [
        "lea rsp, [rsp - 128]",
        "push r11",
        "lea rsp, [rsp - 48]",
        f"movdqu xmmword ptr [rsp], {fc}",
        f"movdqu xmmword ptr [rsp + 16], {fv}",
        "stmxcsr dword ptr [rsp + 32]",
        f"mov dword ptr [rsp + 36], {MXCSR_DEFAULT:#x}",
        "ldmxcsr dword ptr [rsp + 36]",
        f"movabs r11, {KNOB_PLACEHOLDER:#x}",
        *compute,
        "ldmxcsr dword ptr [rsp + 32]",
        f"movdqu {fv}, xmmword ptr [rsp + 16]",
        run,
        f"movdqu {fc}, xmmword ptr [rsp]",
        "lea rsp, [rsp + 48]",
        "pop r11",
        "lea rsp, [rsp + 128]",
    ]
    code = assemble(lines)
    relocs = [Reloc(code.index(KNOB_PLACEHOLDER.to_bytes(8, "little")), "knob_abs64", 0)]
    f = f"{read.c!r} / V" if read.form == "f64_div" else f"{read.c!r} * V"
    lifted = Lifted("register", dst, read.form, _bits(read.c), 0, 8, "single_write", "r11", [run], False)
    return code, relocs, f"{fc} <- {f} (double, round to nearest); {run}", lifted
