"""From builds of one unit to the scope table: diff, lift, place spans, synthesize, slice."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from pathlib import Path

from xtune.sie.band import MIN_BAND, edge, fit_values, validation_value
from xtune.sie.datavalues import DataRead, data_words, read_piece
from xtune.sie.differ import FunctionDiff, diff_data, diff_functions
from xtune.sie.disasm import disassemble
from xtune.sie.elfcode import ElfCode
from xtune.sie.entries import Entries, function_entries
from xtune.sie.lift import DIVISORS_POW2, SCRATCH, Lifted, Unsupported, fit, lift, reduced_multiplier
from xtune.sie.linear import Region
from xtune.sie.liveness import result_bytes_read
from xtune.sie.residue import FACTORS, branches_back, residue_values, shapes_text, unrolled, validation_values
from xtune.sie.scope import (
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
from xtune.sie.spans import JMP_LEN, STORED, Placement, place, safe_span, start_location
from xtune.sie.spec import Spec, SpecError
from xtune.sie.synth import DIV_EXACT_BELOW, SynthError, relocated, seed_piece, trampoline
from xtune.sie.variants import build_one, build_variants

SHAPE = "code shape depends on the constant"
SAME_CODE = "no function's code depends on the constant in these builds"
SHAPE_HINT = (
    ": the compiler emits other instructions for other values, and SIE retunes operands only;"
    " analyze values that give the same code, or keep the constant in a variable here"
)


def analyze(spec: Spec) -> ScopeTable:
    """Build with every value of the spec and derive the scope table of the first build.

    Expressions fitted from a few builds may hold only for the kind and range of values analyzed,
    so validation builds decide what `set` accepts:
    - a value coprime to every analyzed value decides whether the expressions hold for any V (a
      mask V - 1, a shift by log2 V or a vectorized loop fit the analyzed values and mean
      something else for others); if not, an odd multiple of their gcd decides between "multiples
      of the gcd" and "powers of two" (the only other form the fit knows), else the constant is
      refused;
    - compilers fold facts that hold for the values built (e.g. `7 <= V` removing a first loop
      test): builds with smaller and larger values bound the range where the same spans hold."""
    t0 = time.monotonic()
    src = SourceLocation(str(spec.source), spec.line, spec.constant)
    values = spec.values
    outputs = build_variants(spec)
    shared = ElfCode(outputs[0]).shared_library
    if spec.library and not shared:
        raise SpecError(
            f"{spec.path}: field `library`: the build made no shared library (build with -shared -fPIC)"
        )
    if shared and not spec.library:
        raise SpecError(
            f'{spec.path}: the build made a shared library: name it with `library = "lib....so"`'
            " (the name processes load it under)"
        )

    def scope(paths: list[Path], vals: list[int]) -> ScopeTable:
        return analyze_binaries(
            paths, vals, spec.constant, src, spec.function_filter, spec.persistent, spec.library
        )

    outputs, values, (lowest, highest), notes, seen = _same_shape(spec, outputs)
    table = scope(outputs, values)
    table.notes += notes
    const = table.consts[0]
    residue = 1
    if const.refusals and all(r.reason == SHAPE + SHAPE_HINT for r in const.refusals):
        found = _by_residue(spec, scope, values[0], seen)
        banded = _by_band(spec, scope, values[0], seen) if isinstance(found, str) else None
        if isinstance(banded, str):
            _name_shapes(const, spec.constant, values[0], seen, f"{found}; {banded}")
        elif banded is not None:
            table = banded
            table.notes[:0] = notes
            const = table.consts[0]
            if const.tunable:
                const.min_value = max(const.min_value or lowest, lowest)
                const.max_value = min(const.max_value or highest, highest, _division_limit(const))
            table.analysis_seconds = round(time.monotonic() - t0, 3)
            return table
        elif isinstance(found, str):
            _name_shapes(const, spec.constant, values[0], seen, found)
        else:
            outputs, values, residue, table = found
            table.notes[:0] = notes
            const = table.consts[0]
    if not const.tunable:
        table.analysis_seconds = round(time.monotonic() - t0, 3)
        return table

    def why_not(extra: int) -> str:
        return _why_not(spec, scope, outputs, values, const, extra)

    if residue > 1:  # validated by _by_residue with an odd multiple of the factor
        const.multiple_of = residue
        _add_constraint(const, f"multiple of {residue}")
    coprime = _coprime_to(values)
    why = why_not(coprime) if residue == 1 else ""
    if why:
        table.notes.append(f"with {spec.constant}={coprime} (coprime to the values analyzed): {why}")
        g = math.gcd(*values)
        odd = next(g * m for m in range(3, 1000, 2) if g * m not in values)
        why_odd = why_not(odd) if g > 1 else "the values analyzed have no common divisor"
        if not why_odd:
            const.multiple_of = g
            _add_constraint(const, f"multiple of {g}")
        elif all(v > 0 and v & (v - 1) == 0 for v in values):
            const.power_of_two = True
            _add_constraint(const, "power of two")
            table.notes.append(f"with {spec.constant}={odd}: {why_odd}; values must be powers of two")
        elif isinstance(found := _by_residue(spec, scope, values[0], seen), str):
            const.refusals.append(
                Refusal(
                    "",
                    "the code holds only for the values analyzed",
                    f"with {spec.constant}={coprime}: {why}; with {spec.constant}={odd}: {why_odd};"
                    f" tried {found}",
                )
            )
            table.analysis_seconds = round(time.monotonic() - t0, 3)
            return table
        else:
            outputs, values, residue, wider = found
            wider.notes[:0] = table.notes
            table, const = wider, wider.consts[0]
            const.multiple_of = residue
            _add_constraint(const, f"multiple of {residue}")
    low, high = min(values), max(values)
    m = const.multiple_of  # the smallest allowed value and a quarter of the lowest, as allowed
    for probe in (m, low // 4 // m * m):
        if 0 < probe < low and _allowed(const, probe) and not why_not(probe):
            const.min_value = probe
            break
    else:
        table.notes.append(f"the spans hold for the values analyzed, not below {low}")
    probe = high * 4
    if _allowed(const, probe) and not why_not(probe):
        if any(s.state.form == "affine" and s.state.a == 0 for s in const.spans):
            # A reduced multiplier holds up to the largest value it is read from: read it from
            # this build (the same spans, why_not says), so that it serves the whole range.
            wide = scope([*outputs, build_one(spec, probe)], [*values, probe]).consts[0]
            const.spans, const.values = wide.spans, wide.values
        const.max_value = min(probe, _division_limit(const))
    else:
        table.notes.append(f"the spans hold for the values analyzed, not above {high}")
    if const.min_value is not None and const.max_value is not None:
        const.min_value, const.max_value = max(const.min_value, lowest), min(const.max_value, highest)
    table.analysis_seconds = round(time.monotonic() - t0, 3)
    return table


SUBSTITUTES = 3  # values tried in place of one whose build has another code shape


def _same_shape(
    spec: Spec, outputs: list[Path]
) -> tuple[list[Path], list[int], tuple[int, int], list[str], dict[int, Path]]:
    """Builds whose code has the original build's shape, with the range they bound.

    A compiler may emit other code for one value (clang's `movsx; xor rax, -0x80` for
    `(signed char)(n + 128)`, where other values give `add dil, K; movsx`). Such a value is
    replaced by one halfway to the original, up to SUBSTITUTES times, and the range then stays on
    the original's side of it: a retuned binary never runs a value whose rebuild is known to be
    other code. When no substitute has the shape, the value stays, and the shape refusal with it.
    Also returns every build made, by value."""
    values, outputs = list(spec.values), list(outputs)
    seen = dict(zip(values, outputs, strict=True))
    lowest, highest = -(2**63), 2**63 - 1
    notes: list[str] = []
    first = ElfCode(outputs[0])
    for i in range(1, len(values)):
        v, path = values[i], outputs[i]
        tried: list[int] = []
        while _shape_differs(first, ElfCode(path), spec.function_filter) and len(tried) < SUBSTITUTES:
            tried.append(v)
            v = (values[0] + v) // 2
            if v in values or v in tried or v == values[0]:
                break
            path = seen[v] = build_one(spec, v)
        if not tried or _shape_differs(first, ElfCode(path), spec.function_filter):
            continue
        if v > values[0]:
            highest = min(highest, min(tried) - 1)
        else:
            lowest = max(lowest, max(tried) + 1)
        notes.append(
            f"{spec.constant}={', '.join(map(str, tried))} gives code of another shape: analyzed with"
            f" {v} instead, and the range stays {'below' if v > values[0] else 'above'} {tried[-1]}"
        )
        values[i], outputs[i] = v, path
    return outputs, values, (lowest, highest), notes, seen


Scope = Callable[[list[Path], list[int]], ScopeTable]  # the table of these builds (analyze's `scope`)


def _why_not(
    spec: Spec, scope: Scope, outputs: list[Path], values: list[int], const: PerfConst, extra: int
) -> str:
    """Why a build with `extra` does not give the same spans as `const` ("" when it does)."""
    wide = scope([*outputs, build_one(spec, extra)], [*values, extra]).consts[0]
    return _spans_differ(wide, const)


def _spans_differ(wide: PerfConst, const: PerfConst) -> str:
    """Why `wide` (the table of more builds) does not give the same spans as `const` ("" when it does)."""
    if not wide.tunable:
        r = wide.refusals[0]
        return f"{r.function}: {r.reason.removesuffix(SHAPE_HINT)}"
    if [(s.function, s.start) for s in wide.spans] != [(s.function, s.start) for s in const.spans]:
        return "the spans differ"
    return ""


def _by_residue(
    spec: Spec, scope: Scope, v0: int, seen: dict[int, Path]
) -> tuple[list[Path], list[int], int, ScopeTable] | str:
    """(outputs, values, factor, table) of the first factor F of residue.FACTORS whose multiples
    near the spec's values (residue_values) have the original's shape and whose spans hold for a
    validation build with an odd multiple of F; else what each factor showed, as text. Builds made
    are added to `seen`."""
    first = ElfCode(seen[v0])
    tried: list[str] = []
    sets: list[list[int]] = []
    for f in FACTORS:
        vals = residue_values(spec.values, f)
        if vals is None or vals in sets:  # the same builds show the same
            continue
        sets.append(vals)
        for v in vals[1:]:
            seen.setdefault(v, build_one(spec, v))
        paths = [seen[v] for v in vals]
        other = [v for v in vals[1:] if _shape_differs(first, ElfCode(seen[v]), spec.function_filter)]
        if other:
            tried.append(f"multiples of {f} ({', '.join(map(str, vals))}): {other[0]} has another shape")
            continue
        table = scope(paths, vals)
        const = table.consts[0]
        if not const.tunable:
            tried.append(f"multiples of {f} ({', '.join(map(str, vals))}): {const.refusals[0].reason}")
            continue
        checks = validation_values(vals, f)
        why = ""
        for check in checks:
            why = _why_not(spec, scope, paths, vals, const, check)
            seen.setdefault(check, build_one(spec, check))
            if why:
                break
        if why:
            tried.append(f"multiples of {f} ({', '.join(map(str, vals))}): with {check}: {why}")
            continue
        table.notes.append(
            f"{spec.constant}={', '.join(map(str, spec.values))} give code of other shapes (a loop unrolled"
            f" or vectorized by a factor of {f}, its remainder depending on {spec.constant} mod {f}):"
            f" analyzed with {', '.join(map(str, vals))} and validated with {' and '.join(map(str, checks))};"
            f" values must be"
            f" multiples of {f}"
        )
        return paths, vals, f, table
    return "; ".join(tried) or f"no multiples ({v0} is no multiple of {FACTORS[0]})"


def _by_band(spec: Spec, scope: Scope, v0: int, seen: dict[int, Path]) -> ScopeTable | str:
    """The table of builds inside the band around `v0` whose builds have its shape (band.py),
    fitted on the original and two values of the band and validated with one more and with every
    other build of the band; its range is the band. Else why not, as text. Builds made are added to
    `seen`, and a note lists them."""
    first = ElfCode(seen[v0])

    def same(v: int) -> bool:
        seen.setdefault(v, build_one(spec, v))
        return not _shape_differs(first, ElfCode(seen[v]), spec.function_filter)

    known = {v: same(v) for v in seen}
    before = set(known)
    lo, hi = edge(v0, min(spec.values), known, same), edge(v0, max(spec.values), known, same)
    built = sorted(set(known) - before)
    band = f"the band of {spec.constant} with the original's shape is {lo}..{hi}"
    searched = f"(bisected with {', '.join(map(str, built)) or 'no build'} besides the values built before)"
    if hi - lo + 1 < MIN_BAND:
        return f"{band} {searched}: too narrow to fit on 2 values besides {v0} and validate on another"
    vals = fit_values(v0, lo, hi, known)
    other = [v for v in vals if not known.setdefault(v, same(v))]
    if other:  # a value between two builds of the shape has another: the band is no interval
        return f"{band} {searched}, but {spec.constant}={other[0]} inside it has another shape"
    check = validation_value(lo, hi, vals)
    assert check is not None  # MIN_BAND leaves a value
    table = scope([seen[v] for v in vals], vals)
    const = table.consts[0]
    fitted = f"{band} {searched}; fitted on {', '.join(map(str, vals))}"
    if not const.tunable:
        if [r.reason for r in const.refusals] == [SAME_CODE]:
            return (
                f"{fitted}: their builds are the same code (the code depends on a coarser function of"
                f" {spec.constant}), so there is no operand to retune inside the band"
            )
        r = const.refusals[0]
        return f"{fitted}: {r.function or 'the unit'}: {r.reason}"
    # Every same-shape build of the band is a check too: the spans must hold for it as fitted.
    checks = [check] + sorted(v for v in known if known[v] and lo <= v <= hi and v not in vals and v != check)
    seen.setdefault(check, build_one(spec, check))
    wide = scope([seen[v] for v in [*vals, *checks]], [*vals, *checks]).consts[0]
    why = _spans_differ(wide, const)
    if why:
        return f"{fitted}, with {', '.join(map(str, checks))}: {why}"
    const.min_value, const.max_value = lo, hi
    others = sorted(v for v in spec.values if not lo <= v <= hi)
    table.notes.append(
        f"{spec.constant}={', '.join(map(str, others))} give code of other shapes, and no factor's multiples"
        f" share the original's: {band} {searched}, analyzed with {', '.join(map(str, vals))} and validated"
        f" with {', '.join(map(str, checks))}; values outside it are refused (the shape is assumed constant"
        " between two builds of the original's shape)"
    )
    return table


def _name_shapes(const: PerfConst, name: str, v0: int, seen: dict[int, Path], tried: str) -> None:
    """The shape refusals name the instruction counts the builds showed, what the multiples of
    the factors showed, and say when the function looks fully unrolled."""
    codes = {v: ElfCode(p) for v, p in seen.items()}
    for r in const.refusals:
        listings = {
            v: disassemble(c, c.functions[r.function]) for v, c in codes.items() if r.function in c.functions
        }
        if v0 not in listings:
            continue
        counts = {v: sum(not i.is_nop for i in lst) for v, lst in listings.items()}
        if unrolled(counts, v0, branches_back(listings[v0], codes[v0].functions[r.function].vaddr)):
            r.reason = (
                f"{SHAPE}: the loop is fully unrolled: its code is one copy per iteration (it grows"
                f" with {name}), so every value has code of its own and SIE retunes operands only;"
                " keep the constant in a variable here, or cap the unrolling (`#pragma GCC unroll 4`)"
            )
        r.detail = f"{r.detail}; {shapes_text(name, counts)}; tried {tried}"


def _shape_differs(a: ElfCode, b: ElfCode, only: str) -> bool:
    return any(d.shape_error for d in diff_functions([a, b], only, regions=True))


def _coprime_to(values: list[int]) -> int:
    """A value near the original that shares no factor with any analyzed value."""
    v = values[0] + abs(values[0]) // 2 + 1
    while v in values or any(math.gcd(v, x) != 1 for x in values):
        v += 1
    return v


def _allowed(const: PerfConst, value: int) -> bool:
    """`value` meets the constraints found so far (the range aside)."""
    if const.power_of_two and (value <= 0 or value & (value - 1)):
        return False
    return value % const.multiple_of == 0


def _division_limit(const: PerfConst) -> int:
    """The largest V the spans' updates compute exactly: a division by a d that is not a power of
    two is a multiply-shift (synth.py); a reduced multiplier (IV = a constant, a = 0) holds for the
    powers of two up to the largest value it was read from (lift.reduced_multiplier)."""
    forms = {s.state.form for s in const.spans}
    limit = 2**63 - 1
    if any(f.startswith("div") and int(f[3:]) not in DIVISORS_POW2 for f in forms):
        limit = DIV_EXACT_BELOW - 1
    if any(s.state.form == "affine" and s.state.a == 0 for s in const.spans):
        limit = min(limit, max(const.values))
    return limit


def _add_constraint(const: PerfConst, text: str) -> None:
    if text not in const.constraint:
        const.constraint = f"{const.constraint}; {text}" if const.constraint else text


def analyze_binaries(
    paths: list[Path],
    values: list[int],
    name: str,
    source: SourceLocation,
    only: str = "",
    persistent: bool = False,
    library: str = "",
) -> ScopeTable:
    """Scope table for `name` from builds `paths` (same unit, constant = `values[i]` in paths[i]);
    `library`: they are shared libraries, loaded under that name."""
    t0 = time.monotonic()
    codes = [ElfCode(p) for p in paths]
    const = PerfConst(name, source, list(values), [], [])
    for obj, size in codes[0].objects.items():
        sizes = [c.objects.get(obj) for c in codes]
        if any(sz != size for sz in sizes):
            const.refusals.append(
                Refusal(
                    obj,
                    "the constant changes data layout: an object it sizes cannot be resized in a running"
                    " process; size the object by a fixed maximum and bound its index by the constant",
                    f"object {obj} has sizes {sizes} in the builds",
                )
            )
    reads: list[DataRead] = []
    for dd in diff_data(codes):
        try:
            reads += [r for w in data_words(codes, values, dd) for r in w.reads]
        except Unsupported as e:
            const.refusals.append(
                Refusal(
                    dd.where,
                    f"the constant also lives in data ({dd.section}): SIE retunes code, and data only"
                    " where every read is a scalar double that is c / V or c * V in every build",
                    f"{dd.detail}: {e}",
                )
            )
    for d in diff_functions(codes, only, regions=True):
        _function(d, codes[0], values, const, persistent)
    for r in reads:
        if only and not re.search(only, r.function):
            const.refusals.append(
                Refusal(
                    r.function,
                    "the constant's data word is read outside the `functions` filter: widen the filter to it",
                )
            )
            continue
        _data_read(r, codes[0], const, persistent)
    if not const.spans and not const.refusals:
        const.refusals.append(Refusal("", SAME_CODE))
    if any(s.state.form == "log2" for s in const.spans):
        const.power_of_two = True
        _add_constraint(const, "power of two")
    if const.spans:  # what the builds show; validation builds (analyze) may widen it
        const.min_value, const.max_value = min(values), max(values)
        if max(values) > _division_limit(const):
            const.refusals.append(
                Refusal("", f"V / d is synthesized exactly only below {DIV_EXACT_BELOW}", f"values {values}")
            )
    functions = list(dict.fromkeys(s.function for s in const.spans))
    for s in const.spans:  # spans of one function can run within one activation
        s.group = functions.index(s.function)
    table = ScopeTable(
        binary_id(codes[0], library), [const], analysis_seconds=round(time.monotonic() - t0, 3)
    )
    if library and not codes[0].build_id and const.spans:
        const.refusals.append(
            Refusal(
                "", "a shared library without a build id cannot be found in a process", "link with --build-id"
            )
        )
    return table


def binary_id(code: ElfCode, library: str = "") -> BinaryId:
    """The identity of the binary a scope table describes (the build with the compiled value)."""
    return BinaryId(str(code.path), code.build_id, code.sha256, code.elf_type, code.load_vaddr, library)


def _function(d: FunctionDiff, code: ElfCode, values: list[int], const: PerfConst, persistent: bool) -> None:
    if d.outside_filter:
        why = d.shape_error or f"{len(d.seeds)} operands differ"
        const.refusals.append(
            Refusal(
                d.name,
                "the code depends on the constant outside the `functions` filter: widen the filter to it",
                why,
            )
        )
        return
    if d.shape_error:
        const.refusals.append(Refusal(d.name, SHAPE + SHAPE_HINT, d.shape_error))
        return
    fn = code.functions[d.name]
    entries = function_entries(code, fn, d.insns)
    if d.region:
        try:
            const.spans.append(_region_span(d, d.region, fn.vaddr, fn.section, values, persistent, entries))
        except (Unsupported, SynthError, Escape) as e:
            where = d.insns[d.region.start]
            const.refusals.append(
                Refusal(d.name, str(e), f"+{where.off:#x}: {where.mnemonic} {where.op_str}")
            )
        return
    covered: set[int] = set()
    seeds = {s.index: s for s in d.seeds}
    for seed in d.seeds:
        top = reduced_multiplier(d.insns, seed, seeds, values)
        if top is not None:
            seed.fitted = ("affine", 0, top)
            const.power_of_two = True
            _add_constraint(const, "power of two")
    for seed in d.seeds:
        if seed.index in covered:
            continue
        ins = d.insns[seed.index]
        try:
            span = _span(d, fn.vaddr, fn.section, seed.index, seeds, values, persistent, entries)
        except (Unsupported, SynthError) as e:
            const.refusals.append(Refusal(d.name, str(e), f"+{ins.off:#x}: {ins.mnemonic} {ins.op_str}"))
            continue
        except Escape as e:
            const.refusals.append(
                Refusal(
                    d.name,
                    f"{e}: an old value would stay in use after a change",
                    "set `persistent = true` in the spec if the program copes with values of the"
                    " constant that outlive the function (the safe span is then the whole function)",
                )
            )
            continue
        covered |= {i.index for i in d.insns if span.start <= i.off < span.end}
        const.spans.append(span)


def _data_read(read: DataRead, code: ElfCode, const: PerfConst, persistent: bool) -> None:
    """A read of a data word that is f(V) (datavalues.py): a span computing f(V') for it."""
    fn = code.functions[read.function]
    insns = disassemble(code, fn)
    ins = insns[read.index]
    try:
        where = place(insns, read.index, function_entries(code, fn, insns))
        pieces = []
        for k in range(where.first, where.last + 1):
            if k == read.index:
                piece, relocs, text, lifted = read_piece(ins, read)
                pieces.append((piece, relocs))
            else:
                pieces.append(relocated(insns[k]))
        d = FunctionDiff(read.function, insns)
        span = _finish(
            d, fn.vaddr, fn.section, where, read.index, lifted, trampoline(pieces), text, text, persistent
        )
    except (Unsupported, SynthError) as e:
        const.refusals.append(Refusal(read.function, str(e), f"+{ins.off:#x}: {ins.mnemonic} {ins.op_str}"))
        return
    except Escape as e:
        const.refusals.append(Refusal(read.function, f"{e}: an old value would stay in use after a change"))
        return
    other = [
        s for s in const.spans if s.function == span.function and s.start < span.end and span.start < s.end
    ]
    if other:
        const.refusals.append(
            Refusal(
                read.function,
                f"the read of the data word shares instructions with the span at +{other[0].start:#x}",
                f"+{ins.off:#x}: {ins.mnemonic} {ins.op_str}",
            )
        )
        return
    const.spans.append(span)


class Escape(Exception):
    """The value outlives the span (stored to memory, passed to a callee) and the spec did not opt in."""


def _span(  # type: ignore[no-untyped-def]
    d: FunctionDiff,
    vaddr: int,
    section: str,
    first: int,
    seeds: dict,
    values: list[int],
    persistent: bool,
    entries: Entries,
) -> Span:
    insns = d.insns
    where = place(insns, first, entries)
    lifted = lift(insns[first], seeds[first], values, result_bytes_read(insns, first))
    pieces = []
    texts = []
    exprs = []
    for k in range(where.first, where.last + 1):
        if k in seeds:
            lk = lifted if k == first else lift(insns[k], seeds[k], values, result_bytes_read(insns, k))
            exprs.append(lk.text)
            code, relocs, text = seed_piece(lk, insns[k])
            pieces.append((code, relocs))
            texts.append(text)
        else:
            pieces.append(relocated(insns[k]))
    return _finish(
        d,
        vaddr,
        section,
        where,
        first,
        lifted,
        trampoline(pieces),
        "; ".join(exprs),
        " | ".join(texts),
        persistent,
    )


def _region_span(  # type: ignore[no-untyped-def]
    d: FunctionDiff, region: Region, vaddr: int, section: str, values: list[int], persistent: bool, entries
) -> Span:
    """A multiplication the builds expand differently (linear.py): the run becomes one span whose
    trampoline computes R = X * IV."""
    insns = d.insns
    first, last = insns[region.start], insns[region.last]
    start, end = first.off, last.off + last.size
    if entries.unknown:
        raise Unsupported(f"the multiplication spans several instructions and {entries.unknown}")
    inside = sorted(t for t in entries.offsets if start < t < end)
    if inside:
        raise Unsupported(f"+{inside[0]:#x} is a branch target inside the multiplication's instructions")
    if region.src == "rsp":
        raise Unsupported("the multiplication reads rsp, which the trampoline moves")
    form, a, b = fit(values, region.factors)
    scratch = next(r for r in SCRATCH if r not in (region.reg, region.src))
    body = ([f"mov {region.reg}, {region.src}"] if region.reg != region.src else []) + [
        f"imul {region.reg}, {scratch}"
    ]
    lifted = Lifted("register", region.reg, form, a, b, 8, "single_write", scratch, body, True)
    code, relocs, text = seed_piece(lifted, first)
    expr = f"{region.reg} <- {region.src} * ({lifted.text.split(' <- ')[1]})"
    where = (
        Placement(region.start, region.last, "jump", "")
        if end - start >= JMP_LEN
        else Placement(
            region.start, region.last, "int3", "the multiplication's instructions are shorter than a jump"
        )
    )
    return _finish(d, vaddr, section, where, region.start, lifted, (code, relocs), expr, text, persistent)


def _finish(  # type: ignore[no-untyped-def]
    d: FunctionDiff,
    vaddr: int,
    section: str,
    where: Placement,
    seed: int,
    lifted: Lifted,
    tramp: tuple[bytes, list],
    expr: str,
    update: str,
    persistent: bool,
) -> Span:
    """The span of `where`, with its trampoline and the safe span sliced from the seed's target."""
    insns = d.insns
    code, relocs = tramp
    start, end = insns[where.first].off, insns[where.last].off + insns[where.last].size
    loc = start_location(lifted.target, lifted.location, insns[seed])
    if "<memory>" in loc:
        ins = insns[seed]
        where_stored = f"{STORED} at +{ins.off:#x} (`{ins.mnemonic} {ins.op_str}`)"
        ranges, reason, escapes = (
            [(0, insns[-1].off + insns[-1].size)],
            f"{where_stored}: whole function",
            True,
        )
    else:
        ranges, reason, escapes = safe_span(insns, where.first, where.last, loc, vaddr)
    if escapes and not persistent:
        raise Escape(reason.removesuffix(": whole function"))
    raw = b"".join(i.raw for i in insns[where.first : where.last + 1])
    # Where a call inside the safe span (or the span, whose code runs from the trampoline) returns.
    returns = sorted(
        i.off + i.size
        for i in insns
        if i.is_call and (start <= i.off < end or any(s <= i.off + i.size < e for s, e in ranges))
    )
    return Span(
        function=d.name,
        section=section,
        func_vaddr=vaddr,
        start=start,
        end=end,
        expected=raw.hex(),
        state=StateExpr(lifted.target, lifted.location, lifted.form, lifted.a, lifted.b, lifted.width, expr),
        update=Update(lifted.kind, update),
        patch=where.patch,
        patch_reason=where.reason,
        trampoline=code.hex(),
        relocs=relocs,
        safe=[SafeRange(s, e) for s, e in ranges],
        safe_reason=reason,
        return_points=returns,
    )
