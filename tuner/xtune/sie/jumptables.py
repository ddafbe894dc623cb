"""Targets of a function's jump tables, read from the ELF file with the bound proven from the code.

gcc and clang compile a dense `switch` on x86-64 to one of two forms, each guarded by a bound check
in the same basic block:

    cmp IDX, N ; ja DEFAULT                    cmp IDX, N ; ja DEFAULT
    lea T, [rip + TABLE]                       jmp qword ptr [IDX*8 + TABLE]
    movsxd E, dword ptr [T + IDX*4]            (absolute: a non-PIE executable)
    add E, T
    jmp E                                      (position independent)

The fall-through of `ja` bounds IDX to 0..N, so the table holds N + 1 entries in `.rodata`. A small
abstract interpretation over the block, from its first instruction to the `jmp`, proves this: any
instruction it does not recognise that writes a register of the pattern drops what is known of it,
and then the jump is left unresolved (its targets unknown). No entry inside the block may be a
branch target, so the bound holds on every path to the jump. The table's address may also be in a
callee-saved register loaded once before the block (gcc hoists it out of loops): then every path
to the jump must pass that load after any other value of the register (`_only_definition`)."""

from __future__ import annotations

from dataclasses import dataclass

from capstone import x86_const as x

from xtune.sie.disasm import Insn, family
from xtune.sie.elfcode import DataSection, ElfCode, Function

MAX_ENTRIES = 4096  # a bound above this is no switch table a compiler would emit
BLOCK_LIMIT = 32  # instructions looked at before the jump
CALLEE_SAVED = {"rbx", "rbp", "r12", "r13", "r14", "r15"}


@dataclass(frozen=True)
class Index:
    """A register bounded to 0..bound: as compared (`reg`, e.g. al of rax), or as a whole (`full`)."""

    bound: int
    reg: int  # capstone register id
    full: bool


@dataclass(frozen=True)
class Table:
    addr: int  # `lea T, [rip + TABLE]`


@dataclass(frozen=True)
class Entry:
    """An entry of `table` loaded with a bounded index; `added`: the table's address added to it."""

    table: int
    bound: int
    added: bool


Value = Index | Table | Entry


@dataclass
class JumpTable:
    jump: int  # function-relative offset of the indirect jump
    table: int  # ELF address of the table
    targets: list[int]  # ELF addresses, one per entry


class Unresolved(Exception):
    """An indirect jump whose targets cannot be proven; the message says why."""


def resolve(
    code: ElfCode, fn: Function, insns: list[Insn], entries: set[int], cold: list[Insn]
) -> list[JumpTable]:
    """The table of every indirect jump of `fn`; raises Unresolved for the first that has none.

    `entries`: function-relative offsets that branches (direct ones and other tables) reach; none
    may fall inside a jump's block after its first instruction. `cold`: the function's split-off
    cold part, which it jumps to and which jumps back."""
    jumps = [k for k, ins in enumerate(insns) if ins.is_jump and ins.indirect]
    if jumps and code.elf_type == "REL":
        raise Unresolved("jump tables of an object file are relocations")
    bases = _hoisted_bases(insns)
    tables: dict[int, JumpTable] = {}
    why: dict[int, str] = {}
    progress = True
    while progress:  # a hoisted base is proven with the edges of the tables resolved so far
        progress = False
        for k in (k for k in jumps if k not in tables):
            try:
                tables[k] = _resolve_one(code, insns, k, entries, {})
            except Unresolved as e:
                why[k] = str(e)
                for fam, (lea, table) in bases.items():
                    try:
                        found = _resolve_one(code, insns, k, entries, {fam: table})
                    except Unresolved:
                        continue
                    if _only_definition(insns, fn, lea, k, fam, cold, tables):
                        tables[k] = found
                        break
            progress = progress or k in tables
    for k in jumps:
        if k not in tables:
            ins = insns[k]
            raise Unresolved(f"`{ins.mnemonic} {ins.op_str}` at +{ins.off:#x}: {why[k]}")
    return [tables[k] for k in jumps]


def _hoisted_bases(insns: list[Insn]) -> dict[str, tuple[int, Table]]:
    """Callee-saved registers loaded with a table's address once in the function (`lea R,
    [rip + TABLE]`), e.g. before a loop; other writes (the epilogue's pop) are checked by
    `_only_definition`."""
    leas: dict[str, list[tuple[int, Table]]] = {}
    for ins in insns:
        ops = ins.ci.operands
        if ins.mnemonic == "lea" and ops[0].size == 8 and ops[1].mem.base == x.X86_REG_RIP:
            fam = family(ins.ci.reg_name(ops[0].reg))
            if fam in CALLEE_SAVED and not ops[1].mem.index:
                addr = ins.ci.address + ins.size + ops[1].mem.disp
                leas.setdefault(fam, []).append((ins.index, Table(addr)))
    return {fam: found[0] for fam, found in leas.items() if len(found) == 1}


def _only_definition(
    insns: list[Insn],
    fn: Function,
    lea: int,
    jump: int,
    fam: str,
    cold: list[Insn],
    tables: dict[int, JumpTable],
) -> bool:
    """Does every path to `jump` pass `lea` after any other value of `fam`? The paths searched
    start where the register holds something else: the function's entry and after every other
    write; they stop at `lea`. Calls keep a callee-saved register. A jump into the cold part
    leads to every place it jumps back to, which start paths of their own if it writes `fam`."""
    index_of = {i.off: i.index for i in insns}
    returns = (i.target - fn.vaddr for i in cold if i.target is not None)
    back = [index_of[off] for off in returns if off in index_of]
    cold_addrs = {i.ci.address for i in cold}
    work = [0, *back] if any(_writes(i, fam) for i in cold) else [0]
    for ins in insns:
        if ins.index != lea and _writes(ins, fam):
            succ = _successors(insns, ins.index, fn, index_of, tables, cold_addrs, back)
            if succ is None:
                return False
            work.extend(succ)
    seen: set[int] = set()
    while work:
        k = work.pop()
        if k == jump:
            return False
        if k in seen or k == lea:
            continue
        seen.add(k)
        succ = _successors(insns, k, fn, index_of, tables, cold_addrs, back)
        if succ is None:  # an indirect jump not resolved yet: it may lead anywhere
            return False
        work.extend(succ)
    return True


def _writes(ins: Insn, fam: str) -> bool:
    return any(family(ins.ci.reg_name(r)) == fam for r in ins.ci.regs_access()[1])


def _successors(
    insns: list[Insn],
    k: int,
    fn: Function,
    index_of: dict[int, int],
    tables: dict[int, JumpTable],
    cold_addrs: set[int],
    back: list[int],
) -> list[int] | None:
    """Instructions of the function that can run after insns[k] (None: not known)."""
    ins = insns[k]
    if ins.is_jump and ins.indirect:
        if k not in tables:
            return None
        targets = tables[k].targets
    else:
        targets = [ins.target] if ins.target is not None else []
    out = [index_of[t - fn.vaddr] for t in targets if t - fn.vaddr in index_of]
    if any(t in cold_addrs for t in targets):
        out.extend(back)
    if not ins.ends_flow and k + 1 < len(insns):
        out.append(k + 1)
    return out


def _resolve_one(
    code: ElfCode, insns: list[Insn], jump: int, entries: set[int], state: dict[str, Value]
) -> JumpTable:
    """The table of insns[jump] from its block; `state`: what is known on entry to the block."""
    first = jump
    while first > 0 and jump - first < BLOCK_LIMIT:
        prev = insns[first - 1]
        # A conditional jump's fall-through continues the block; its taken path leaves it.
        if insns[first].off in entries or prev.ends_flow or prev.is_call or prev.indirect:
            break
        first -= 1
    state = dict(state)
    upper_zero: set[str] = set()  # families whose last write zeroed bits 32..63
    k = first
    while k < jump:
        ins = insns[k]
        if ins.mnemonic == "cmp" and insns[k + 1].mnemonic == "ja" and k + 1 < jump:
            if insns[k + 1].off in entries:
                raise Unresolved(f"the bound's `ja` at +{insns[k + 1].off:#x} is a branch target")
            _bound(ins, state, upper_zero)
            k += 2
            continue
        if not ins.is_jump:  # the block's conditional jumps write no register
            _step(ins, state, upper_zero)
        k += 1
    ins = insns[jump]
    op = ins.ci.operands[0]
    if op.type == x.X86_OP_REG:
        v = state.get(family(ins.ci.reg_name(op.reg)))
        if not (isinstance(v, Entry) and v.added and op.size == 8):
            raise Unresolved("no bounded table entry plus table address reaches the jump's register")
        return JumpTable(ins.off, v.table, _read(code, v.table, v.bound, 4, relative=True))
    if op.type == x.X86_OP_MEM and code.elf_type == "EXEC":
        m = op.mem
        idx = state.get(_reg64(ins.ci, m.index))
        if m.base or m.segment or m.scale != 8 or not isinstance(idx, Index) or not idx.full:
            raise Unresolved("the memory operand is no bounded index into an absolute table")
        return JumpTable(ins.off, m.disp, _read(code, m.disp, idx.bound, 8, relative=False))
    raise Unresolved("not a jump-table pattern this analysis knows")


def _bound(ins: Insn, state: dict[str, Value], upper_zero: set[str]) -> None:
    """`cmp REG, N ; ja`: REG ≤ N (unsigned) on the fall-through path."""
    a, b = ins.ci.operands
    if a.type != x.X86_OP_REG or b.type != x.X86_OP_IMM:
        return
    fam = family(ins.ci.reg_name(a.reg))
    bound = b.imm & ((1 << (8 * a.size)) - 1)
    if bound >= MAX_ENTRIES:
        return
    full = a.size == 8 or (a.size == 4 and fam in upper_zero)
    state[fam] = Index(bound, a.reg, full)


def _reg64(ci, reg: int) -> str:  # type: ignore[no-untyped-def]
    """The name of a 64-bit register used in an address ("" for none, or a 32-bit one: an
    address-size prefix, which this analysis does not follow)."""
    name = ci.reg_name(reg) if reg else ""
    return name if name and family(name) == name else ""


def _bounded(v: Value | None, reg: int, size: int) -> int | None:
    """The bound of register `reg` (`size` bytes) when it holds a bounded index, whole or part
    (any part of a whole index ≤ bound < 2**(8·size) is ≤ bound too)."""
    if not isinstance(v, Index):
        return None
    if v.reg == reg or (v.full and v.bound < 1 << (8 * size)):
        return v.bound
    return None


def _step(ins: Insn, state: dict[str, Value], upper_zero: set[str]) -> None:
    """Forget what `ins` overwrites; keep what it computes when that is part of the pattern."""
    ci = ins.ci
    ops = ci.operands
    dst = ops[0] if len(ops) == 2 and ops[0].type == x.X86_OP_REG else None
    new = _value(ins, state) if dst is not None else None
    for r in ci.regs_access()[1]:
        fam = family(ci.reg_name(r))
        state.pop(fam, None)
        upper_zero.discard(fam)
    if dst is None or dst.reg not in ci.regs_access()[1]:
        return
    fam = family(ci.reg_name(dst.reg))
    if dst.size == 4 or (ins.mnemonic == "movzx" and ops[1].size < 4):
        upper_zero.add(fam)
    if new is not None:
        state[fam] = new


def _value(ins: Insn, state: dict[str, Value]) -> Value | None:
    """What `ins` (two operands, a register destination) leaves in its destination, from `state`
    before it."""
    ci = ins.ci
    m = ins.mnemonic
    dst, src = ci.operands
    if src.type == x.X86_OP_MEM:
        mem = src.mem
        if m == "lea" and mem.base == x.X86_REG_RIP and not mem.index and dst.size == 8:
            return Table(ci.address + ci.size + mem.disp)
        if m == "movsxd" and dst.size == 8 and src.size == 4 and not mem.segment and mem.disp == 0:
            base = state.get(_reg64(ci, mem.base))
            idx = state.get(_reg64(ci, mem.index))
            if isinstance(base, Table) and isinstance(idx, Index) and idx.full and mem.scale == 4:
                return Entry(base.addr, idx.bound, added=False)
        return None
    if src.type != x.X86_OP_REG:
        return None
    held = state.get(family(ci.reg_name(src.reg)))
    if m == "movzx" and src.size < 4 or m == "mov" and dst.size == src.size and dst.size in (4, 8):
        bound = _bounded(held, src.reg, src.size)  # zero-extended to 64 bits by the write
        return None if bound is None else Index(bound, dst.reg, True)
    if m == "add" and dst.size == 8 and src.size == 8:
        pair = (state.get(family(ci.reg_name(dst.reg))), held)
        for entry, table in (pair, pair[::-1]):
            if isinstance(entry, Entry) and not entry.added and isinstance(table, Table):
                if table.addr == entry.table:
                    return Entry(entry.table, entry.bound, added=True)
    return None


def _read(code: ElfCode, addr: int, bound: int, size: int, relative: bool) -> list[int]:
    """The bound + 1 entries of a table in a read-only data section, as target addresses."""
    n = bound + 1
    sec = _section(code, addr, n * size)
    off = addr - sec.vaddr
    if any(o in sec.relocs for o in range(off, off + n * size)):
        raise Unresolved(f"the table at {addr:#x} is filled in by relocations")
    raw = sec.data[off : off + n * size]
    vals = [int.from_bytes(raw[i : i + size], "little", signed=relative) for i in range(0, len(raw), size)]
    return [addr + v if relative else v for v in vals]


def _section(code: ElfCode, addr: int, length: int) -> DataSection:
    for sec in code.data_sections.values():
        if (
            sec.name.startswith((".rodata", ".lrodata"))
            and sec.vaddr <= addr
            and addr + length <= sec.vaddr + len(sec.data)
        ):
            return sec
    raise Unresolved(f"the table at {addr:#x} ({length} bytes) is not inside a read-only data section")
