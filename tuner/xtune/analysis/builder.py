"""From builds of one unit to the scope table: diff, lift, place spans, synthesize, slice."""

from __future__ import annotations

import time
from pathlib import Path

from xtune.analysis.build import build_one, build_variants
from xtune.analysis.differ import FunctionDiff, diff_functions
from xtune.analysis.elfcode import ElfCode
from xtune.analysis.lift import Unsupported, lift
from xtune.analysis.scope import (
    BinaryId,
    PerfConst,
    Refusal,
    SafeRange,
    ScopeTable,
    SourceLocation,
    Span,
    StateExpr,
    Update,
)
from xtune.analysis.spans import place, safe_span, start_location
from xtune.analysis.spec import Spec
from xtune.analysis.synth import SynthError, relocated, seed_piece, trampoline


def analyze(spec: Spec) -> ScopeTable:
    """Build with every value of the spec and derive the scope table of the first build.

    Expressions fitted from a few builds may hold only for the kind and range of values analyzed,
    so validation builds decide what `set` accepts:
    - when every value is a power of two, masks (V - 1) and shifts (log2 V) fit exactly but mean
      something else for other values: a value that is not a power of two decides whether the
      expressions hold for any V, or only for powers of two;
    - compilers fold facts that hold for the values built (e.g. `7 <= V` removing a first loop
      test): builds with smaller and larger values bound the range where the same spans hold."""
    t0 = time.monotonic()
    src = SourceLocation(str(spec.source), spec.line, spec.constant)
    values = spec.values
    outputs = build_variants(spec)
    table = analyze_binaries(outputs, values, spec.constant, src, spec.function_filter)
    const = table.consts[0]
    if not const.tunable:
        table.analysis_seconds = round(time.monotonic() - t0, 3)
        return table

    def why_not(extra: int) -> str:
        """Why a build with `extra` does not give the same spans ("" when it does)."""
        wide = analyze_binaries(
            [*outputs, build_one(spec, extra)], [*values, extra], spec.constant, src, spec.function_filter
        )
        w = wide.consts[0]
        if not w.tunable:
            return _first_refusal(wide)
        if [(s.function, s.start) for s in w.spans] != [(s.function, s.start) for s in const.spans]:
            return "the spans differ"
        return ""

    pow2 = all(v > 0 and v & (v - 1) == 0 for v in values)
    if pow2:
        odd = values[0] + values[0] // 2 + 1
        why = why_not(odd)
        if why:
            const.constraint = "power of two"
            table.notes.append(f"with {spec.constant}={odd}: {why}; values must be powers of two")
    low, high = min(values), max(values)
    for probe in (1, low // 4):
        if 0 < probe < low and not why_not(probe):
            const.min_value = probe
            break
    else:
        const.min_value = low
        table.notes.append(f"the spans hold for the values analyzed, not below {low}")
    probe = high * 4
    if why_not(probe):
        const.max_value = high
        table.notes.append(f"the spans hold for the values analyzed, not above {high}")
    else:
        const.max_value = probe
    table.analysis_seconds = round(time.monotonic() - t0, 3)
    return table


def _first_refusal(table: ScopeTable) -> str:
    r = table.consts[0].refusals[0]
    return f"{r.function}: {r.reason}"


def analyze_binaries(
    paths: list[Path], values: list[int], name: str, source: SourceLocation, only: str = ""
) -> ScopeTable:
    """Scope table for `name` from builds `paths` (same unit, constant = `values[i]` in paths[i])."""
    t0 = time.monotonic()
    codes = [ElfCode(p) for p in paths]
    const = PerfConst(name, source, list(values), [], [])
    for obj, size in codes[0].objects.items():
        sizes = [c.objects.get(obj) for c in codes]
        if any(sz != size for sz in sizes):
            const.refusals.append(
                Refusal(
                    obj, "the constant changes data layout", f"object {obj} has sizes {sizes} in the builds"
                )
            )
    for d in diff_functions(codes, only):
        _function(d, codes[0], values, const)
    if not const.spans and not const.refusals:
        const.refusals.append(Refusal("", "no function's code depends on the constant in these builds"))
    if any(s.state.form == "log2" for s in const.spans):
        const.constraint = "power of two"
    return ScopeTable(binary_id(codes[0]), [const], analysis_seconds=round(time.monotonic() - t0, 3))


def binary_id(code: ElfCode) -> BinaryId:
    """The identity of the binary a scope table describes (the build with the compiled value)."""
    return BinaryId(str(code.path), code.build_id, code.sha256, code.elf_type, code.load_vaddr)


def _function(d: FunctionDiff, code: ElfCode, values: list[int], const: PerfConst) -> None:
    if d.shape_error:
        const.refusals.append(Refusal(d.name, "code shape depends on the constant", d.shape_error))
        return
    fn = code.functions[d.name]
    covered: set[int] = set()
    seeds = {s.index: s for s in d.seeds}
    for seed in d.seeds:
        if seed.index in covered:
            continue
        ins = d.insns[seed.index]
        try:
            span = _span(d, fn.vaddr, fn.section, seed.index, seeds, values)
        except (Unsupported, SynthError) as e:
            const.refusals.append(Refusal(d.name, str(e), f"+{ins.off:#x}: {ins.mnemonic} {ins.op_str}"))
            continue
        covered |= {i.index for i in d.insns if span.start <= i.off < span.end}
        const.spans.append(span)


def _span(d: FunctionDiff, vaddr: int, section: str, first: int, seeds: dict, values: list[int]) -> Span:  # type: ignore[type-arg]
    insns = d.insns
    where = place(insns, first, vaddr)
    lifted = lift(insns[first], seeds[first], values)
    pieces = []
    texts = []
    exprs = []
    for k in range(where.first, where.last + 1):
        if k in seeds:
            lk = lifted if k == first else lift(insns[k], seeds[k], values)
            exprs.append(lk.text)
            code, relocs, text = seed_piece(lk, insns[k])
            pieces.append((code, relocs))
            texts.append(text)
        else:
            pieces.append(relocated(insns[k]))
    code, relocs = trampoline(pieces)
    start, end = insns[where.first].off, insns[where.last].off + insns[where.last].size
    loc = start_location(lifted.target, lifted.location, insns[first])
    if "<memory>" in loc:
        ranges, reason = (
            [(0, insns[-1].off + insns[-1].size)],
            "the constant is stored to non-stack memory: whole function",
        )
    else:
        ranges, reason = safe_span(insns, where.first, where.last, loc, vaddr)
    raw = b"".join(i.raw for i in insns[where.first : where.last + 1])
    return Span(
        function=d.name,
        section=section,
        func_vaddr=vaddr,
        start=start,
        end=end,
        expected=raw.hex(),
        state=StateExpr(
            lifted.target, lifted.location, lifted.form, lifted.a, lifted.b, lifted.width, "; ".join(exprs)
        ),
        update=Update(lifted.kind, " | ".join(texts)),
        patch=where.patch,
        patch_reason=where.reason,
        trampoline=code.hex(),
        relocs=relocs,
        safe=[SafeRange(s, e) for s, e in ranges],
        safe_reason=reason,
    )
