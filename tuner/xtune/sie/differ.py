"""Per-function diff of several builds of one unit: seed instructions, or why the shapes differ."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from capstone import x86_const as x

from xtune.sie.disasm import Insn, disassemble, family
from xtune.sie.elfcode import ElfCode
from xtune.sie.linear import Region, find_region
from xtune.sie.liveness import flags_dead_after, reg_bytes


@dataclass
class Seed:
    index: int  # instruction index in the function (same in every build)
    operand: str  # "imm" or "disp"
    # The operand in each build, in the order of the builds, as the first build's instruction reads
    # it (a build that chose `sub x, -k` where the first has `add x, k` counts as k).
    values: list[int]
    # (form, a, b) when the analysis knows the operand's expression otherwise than by fitting it
    # (lift.reduced_multiplier), else None.
    fitted: tuple[str, int, int] | None = None


@dataclass
class FunctionDiff:
    name: str
    insns: list[Insn]  # of the first build (the one the engine patches)
    seeds: list[Seed] = field(default_factory=list)
    shape_error: str = ""  # non-empty: the builds differ beyond operands
    region: Region | None = None  # they differ by a multiplication expanded in other instructions
    outside_filter: bool = False  # differs, but the `functions` filter leaves it out


def diff_functions(codes: list[ElfCode], only: str = "", regions: bool = False) -> list[FunctionDiff]:
    """Functions whose code differs between the builds (by bytes, relocations masked).
    `regions`: a multiplication expanded into other instructions comes back as `region` (the
    user-space engine can replace it; the kernel's cannot).

    Functions that the `only` filter leaves out are still compared: one that differs is returned
    with `outside_filter` set, since retuning the others alone would leave it behind."""
    first = codes[0]
    pattern = re.compile(only) if only else None
    out: list[FunctionDiff] = []
    for name, fn in first.functions.items():
        outside = bool(pattern and not pattern.search(name))
        others = [c.functions.get(name) for c in codes[1:]]
        if any(o is None for o in others):
            out.append(
                FunctionDiff(name, [], shape_error="function is missing from a build", outside_filter=outside)
            )
            continue
        masked = [_masked_bytes(f) for f in [fn, *others]]  # type: ignore[list-item]
        if all(m == masked[0] for m in masked[1:]):
            continue
        listings = [disassemble(first, fn)] + [disassemble(c, c.functions[name]) for c in codes[1:]]
        d = _compare(name, listings, regions)
        d.outside_filter = outside
        if d.seeds or d.shape_error or d.region:
            out.append(d)
    missing = [n for c in codes[1:] for n in c.functions if n not in first.functions]
    for n in sorted(set(missing)):
        outside = bool(pattern and not pattern.search(n))
        out.append(
            FunctionDiff(
                n, [], shape_error="function exists only in a non-original build", outside_filter=outside
            )
        )
    return out


@dataclass
class DataDiff:
    section: str
    where: str  # `section+offset`, with the symbol or address
    detail: str
    vaddr: int = 0  # the section's ELF address in the first build (0 in a .o)
    offsets: list[int] = field(default_factory=list)  # section offsets that differ in some build


def diff_data(codes: list[ElfCode]) -> list[DataDiff]:
    """Data sections whose bytes differ between the builds (relocations masked): the constant also
    lives in data (e.g. a folded `1.0 / K` in `.rodata`), which retuning the code would leave behind."""
    first = codes[0]
    out: list[DataDiff] = []
    for name, ds in first.data_sections.items():
        others = [c.data_sections.get(name) for c in codes[1:]]
        if any(o is None or len(o.data) != len(ds.data) for o in others):
            sizes = [len(o.data) if o else None for o in [ds, *others]]
            out.append(DataDiff(name, name, f"{name} has sizes {sizes} in the builds"))
            continue
        base = ds.masked()
        diff: set[int] = set()
        for o in others:
            m = o.masked()  # type: ignore[union-attr]
            diff |= {i for i in range(len(base)) if base[i] != m[i] and i not in o.relocs}  # type: ignore[union-attr]
        if diff:
            off = min(diff)
            at = f"{name}+{off:#x}"
            sym = first.symbolize(ds.vaddr + off) if ds.vaddr else ""
            if sym and not sym.startswith("0x"):
                at += f" ({sym})"
            elif ds.vaddr:
                at += f" (address {ds.vaddr + off:#x})"
            out.append(DataDiff(name, at, f"{len(diff)} bytes differ, first at {at}", ds.vaddr, sorted(diff)))
    for name in sorted({n for c in codes[1:] for n in c.data_sections} - set(first.data_sections)):
        out.append(DataDiff(name, name, f"{name} exists only in a non-original build"))
    return out


def _masked_bytes(fn) -> bytes:  # type: ignore[no-untyped-def]
    return bytes(0 if i in fn.relocs else b for i, b in enumerate(fn.data))


def _compare(name: str, listings: list[list[Insn]], regions: bool = False) -> FunctionDiff:
    """Compare instruction by instruction, padding nops left out (alignment differs freely)."""
    d = FunctionDiff(name, listings[0])
    real = [[i for i in lst if not i.is_nop] for lst in listings]
    base = real[0]
    for other in real[1:]:
        if len(other) != len(base):
            d.shape_error = (
                f"instruction count differs ({len(base)} vs {len(other)}): the compiler chose other code"
            )
            return _as_region(d, real) if regions else d
        for n, (a, b) in enumerate(zip(base, other, strict=True)):
            if a.key != b.key:
                wide = _as_wide(base, other, n)
                if wide is None:
                    d.shape_error = f"at +{a.off:#x}: `{a.mnemonic} {a.op_str}` vs `{b.mnemonic} {b.op_str}`"
                    return _as_region(d, real) if regions else d
                other[n] = wide
    for i in range(len(base)):
        for kind, get in (("imm", lambda n: n.imms), ("disp", lambda n: n.disps)):
            cols = [get(lst[i]) for lst in real]
            for k in range(len(cols[0])):
                vals = [c[k] for c in cols]
                if any(v != vals[0] for v in vals[1:]):
                    if kind == "imm" and base[i].negated:  # back to the sign of the first build's `sub`
                        vals = [-v for v in vals]
                    d.seeds.append(Seed(base[i].index, kind, vals))
    return d  # no seeds: only addresses moved (the layout around the function changed)


def _as_wide(base: list[Insn], other: list[Insn], n: int) -> Insn | None:
    """other[n] read as base[n] when it is the same computation in a shorter encoding, else None.

    `or al, 0x80` where the first build has `or rax, 0x40` (compilers use the byte form when the
    constant does not fit a sign-extended imm8): on the register, or/xor of the low byte with an
    imm8 is or/xor of the whole register with it zero-extended; only SF and ZF differ, so the flags
    must be dead after the instruction in both builds."""
    a, b = base[n], other[n]
    if a.mnemonic != b.mnemonic or a.mnemonic not in ("or", "xor") or len(a.imms) != 1 or len(b.imms) != 1:
        return None
    oa, ob = a.ci.operands, b.ci.operands
    if len(oa) != 2 or len(ob) != 2 or {oa[0].type, ob[0].type} != {x.X86_OP_REG}:
        return None
    wide, byte = a.ci.reg_name(oa[0].reg), b.ci.reg_name(ob[0].reg)
    if oa[0].size != 8 or reg_bytes(byte) != 1 or family(byte) != family(wide):
        return None
    if not (flags_dead_after(base, n) and flags_dead_after(other, n)):
        return None
    return replace(b, key=a.key, imms=[ob[1].imm & 0xFF])


def _as_region(d: FunctionDiff, listings: list[list[Insn]]) -> FunctionDiff:
    """The shape error stands unless the builds differ by one multiplication (linear.py)."""
    region = find_region(listings)
    if isinstance(region, Region):
        d.region, d.shape_error = region, ""
    else:
        d.shape_error += f" (not one multiplication: {region})"
    return d
