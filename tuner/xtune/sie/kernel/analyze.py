"""`xtune analyze --kernel`: the scope table of kernel perf-consts, from Debian's own kernel source.

Per perf-const: find its `#define`, compile each translation unit that uses it (units.py: the
whole tree, through headers, as kbuild builds Debian's config) with the original value and two
others (Debian's config, gcc-12: the distro's bytes, relocations aside), diff the machine code per
function and fit IV = a*V + b with the shared engine (sie/differ.py, sie/lift.py), place the kernel
spans (spans.py), check each function against the distro vmlinux (verify.py), and write
  - the scope table (scope.py, the format every SIE engine reads), and
  - the xsie spans file: the lines `xsiectl load` hands to /dev/xsie, one const id per perf-const.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import typer

from xtune.sie.analyze import binary_id
from xtune.sie.differ import diff_functions
from xtune.sie.elfcode import ElfCode
from xtune.sie.kernel.defines import find_define
from xtune.sie.kernel.site import find_site, site_units
from xtune.sie.kernel.source import Define, KernelBuildError, KernelEnv, build_unit
from xtune.sie.kernel.spans import XSIE_REG, KernelFunction, KernelSpan, kernel_function
from xtune.sie.kernel.units import Discovery, discover_units
from xtune.sie.kernel.validate import validate
from xtune.sie.kernel.verify import build_id, matches, vmlinux
from xtune.sie.scope import (
    BinaryId,
    PerfConst,
    Refusal,
    SafeRange,
    ScopeError,
    ScopeTable,
    SourceLocation,
    Span,
    StateExpr,
    Update,
)


@dataclass
class KernelAnalysis:
    table: ScopeTable
    seconds: dict[str, float]  # analysis time per perf-const (builds included)


def candidate_values(orig: int) -> list[list[int]]:
    """Value sets to build with, in order: the original and two others of the same magnitude.

    Far larger values change operand sizes (gcc turns `add eax, imm8` into `add ax, imm16` once
    2*V passes 127) and some values reorder cold blocks; the differ rightly calls both a different
    code shape, so the next set is tried."""
    return [
        [orig, orig // 2 + 1 if orig > 4 else orig + 3, orig + orig // 2 if orig > 2 else orig + 5],
        [orig, orig - 1, orig - 2] if orig > 3 else [orig, orig + 7, orig + 9],
        [orig, orig - 1 if orig > 2 else orig + 7, orig + 1],
        [orig, orig + 2, orig + 3],
    ]


def analyze_const(
    env: KernelEnv,
    name: str,
    values: list[int] | None = None,
    fresh: bool = False,
    site: str = "",
    notes: list[str] | None = None,
) -> PerfConst:
    """`name`'s #define, or with `site` (FILE:LINE:TOKEN, site.py) that literal, called `name`;
    its spans validated with one more build (validate.py), which adds to `notes`."""
    define = find_site(env, site, name) if site else find_define(env, name)
    if site and values and min(values) < 0:
        raise KernelBuildError(f"{name}: a site's literal takes values >= 0, got {values}")
    if values and values[0] != define.value:
        values = [define.value, *[v for v in values if v != define.value]]
    if values and len(values) < 3:
        raise KernelBuildError(f"{name}: need the original and two other values, got {values}")
    image = vmlinux(env)
    found = site_units(env, define) if site else discover_units(env, define)
    attempt: PerfConst | None = None
    for vals in [values] if values else candidate_values(define.value):
        attempt = _analyze_values(env, define, vals, found, image, fresh)
        if not any(r.reason.startswith("code shape") for r in attempt.refusals):
            break
    assert attempt is not None
    if attempt.tunable:
        said = validate(attempt, lambda vs: _analyze_values(env, define, vs, found, image, fresh))
        (notes if notes is not None else []).extend(said)
    return attempt


def _analyze_values(
    env: KernelEnv, define: Define, vals: list[int], found: Discovery, image: bytes, fresh: bool
) -> PerfConst:
    where = SourceLocation(define.file, define.line, define.token or define.name)
    const = PerfConst(define.name, where, vals, [], [])
    const.refusals += [Refusal("", reason, where) for where, reason in found.refusals]
    for u in found.units:
        if u.source.endswith(".S"):
            const.refusals.append(
                Refusal(
                    "",
                    f"assembly unit {u.source} uses it: spans are derived from gcc's code only",
                    "retune it after moving the use into C, or with a span written by hand",
                )
            )
        elif u.module:
            const.refusals.append(
                Refusal(
                    "",
                    f"module {u.module} uses it ({u.source}): spans are placed in vmlinux only",
                    "it would need the module's build id checked and its code compared like vmlinux's",
                )
            )
        else:
            codes = [ElfCode(build_unit(env, define, u.object, v, fresh)) for v in vals]
            _add_spans(codes, const, u.object, image)
    if not const.spans and not const.refusals:
        const.refusals.append(Refusal("", "no function's code depends on the constant"))
    return const


def analyze_objects(name: str, objects: list[Path], values: list[int], source: str) -> KernelAnalysis:
    """The same analysis for objects built elsewhere, e.g. a module built with -DNAME=value: its
    code is checked in the guest (kallsyms + live bytes) rather than against the distro vmlinux."""
    t0 = time.monotonic()
    const = PerfConst(name, SourceLocation(source, 0, name), list(values), [], [])
    codes = [ElfCode(p) for p in objects]
    _add_spans(codes, const, str(objects[0]), None)
    table = ScopeTable(binary_id(codes[0]), [const], analysis_seconds=round(time.monotonic() - t0, 2))
    return KernelAnalysis(table, {name: table.analysis_seconds})


def _add_spans(codes: list[ElfCode], const: PerfConst, unit: str, image: bytes | None) -> None:
    """Kernel spans of every function the builds (of `const.values`) differ in, and refusals."""
    vals = const.values
    for d in diff_functions(codes):
        if d.shape_error:
            const.refusals.append(
                Refusal(d.name, "code shape depends on the constant", f"{unit}: {d.shape_error}")
            )
            continue
        fn = codes[0].functions[d.name]
        kf = kernel_function(d, fn, vals, codes[0].functions.get(f"{d.name}.cold"))
        const.refusals += [Refusal(d.name, r, unit) for r in kf.refusals]
        if kf.spans and image is not None and matches(image, fn) != 1:
            const.refusals.append(
                Refusal(d.name, "the unit's code is not found once in the distro vmlinux", unit)
            )
            continue
        const.spans += [_scope_span(kf, fn.vaddr, fn.section, fn.data, s, vals[0]) for s in kf.spans]
        for s in kf.spans:
            _bound(const, *s.v_range())


def _bound(const: PerfConst, low: int, high: int) -> None:
    """Narrow the valid range of V to [low, high]. V keeps the sign of the analyzed values: a
    count analyzed at positive values may mean something else at 0 (SHRINK_BATCH = 0 never
    advances its loop) or below."""
    if all(v > 0 for v in const.values):
        low = max(low, 1)
    const.min_value = low if const.min_value is None else max(const.min_value, low)
    const.max_value = high if const.max_value is None else min(const.max_value, high)


# Updates whose handler emulates the probed instruction and moves the instruction pointer past
# it: kprobes must not jump-optimize their probes (int3).
EMULATED = {
    "cmp": "the handler emulates the compare, resuming after it",
    "shift": "the handler emulates the shift, resuming after it",
}


def _scope_span(kf: KernelFunction, vaddr: int, section: str, data: bytes, s: KernelSpan, v0: int) -> Span:
    kind = "single_write" if s.update == "set" else s.update
    return Span(
        function=kf.name,
        section=section,
        func_vaddr=vaddr,
        start=s.check_start,
        end=s.probe_end,
        expected=data[s.check_start : s.probe_end].hex(),
        state=StateExpr(
            "flags" if s.update == "cmp" else "register", s.reg, "affine", s.a, s.b, s.width // 8, s.text
        ),
        update=Update(
            kind,
            f"xsie {s.update} {s.reg} before +{s.probe:#x}",
            register=s.reg,
            probe=s.probe,
            v0=None if s.update == "set" else v0,
            pre_add=s.pre_add,
        ),
        patch="int3" if s.update in EMULATED else "jump",
        patch_reason=EMULATED.get(s.update, ""),
        trampoline="",
        relocs=[],
        safe=[SafeRange(0, kf.size)],
        safe_reason=f"whole function: entry and {len(kf.exits)} exits monitored",
        exits=list(kf.exits),
    )


def analyze(
    names: list[str], values: dict[str, list[int]], fresh: bool = False, sites: dict[str, str] | None = None
) -> KernelAnalysis:
    """The table of the #defines `names` and of the `sites` (name -> FILE:LINE:TOKEN)."""
    env = KernelEnv.fetch()
    t0 = time.monotonic()
    consts, seconds = [], {}
    notes = [f"kernel {env.release}: units built from linux-source-6.1 with Debian's config and gcc-12"]
    sites = sites or {}
    for name in [*names, *sites]:
        t = time.monotonic()
        consts.append(analyze_const(env, name, values.get(name), fresh, sites.get(name, ""), notes))
        seconds[name] = round(time.monotonic() - t, 2)
    binary = BinaryId(f"{env.package} {env.package_version}", build_id(vmlinux(env)), "", "EXEC", 0)
    table = ScopeTable(binary, consts, analysis_seconds=round(time.monotonic() - t0, 2))
    table.notes += notes
    return KernelAnalysis(table, seconds)


XSIE_UPDATES = {"single_write": "set", "scale": "scale", "cmp": "cmp", "shift": "shift"}


def xsie_lines(result: KernelAnalysis, first_id: int = 0, kernel: str = "") -> list[str]:
    """The spans file for `xsiectl load`, from the scope table's fields: the build id of the
    kernel the spans are for (`kernel`, default the table's binary), then const ids in the order of
    the table, from `first_id`; each function's span lines, then its safe line (entry and exits),
    then the const's valid values (`range ID MIN MAX`: V in [MIN, MAX]; when validation found
    constraints, `range ID MIN MAX MULTIPLE_OF POWER_OF_TWO`: a multiple of MULTIPLE_OF too, and a
    power of two when POWER_OF_TWO is 1). A const with refusals has no spans file: some of its uses
    would keep the old value."""
    kernel = kernel or result.table.binary.build_id
    if not kernel:
        raise ScopeError("the scope table names no kernel build id (xsie.ko checks it)")
    lines = [f"kernel {kernel}"]
    for cid, const in enumerate(result.table.consts, first_id):
        if const.refusals or not const.spans:
            reasons = "; ".join(f"{r.function}: {r.reason}" for r in const.refusals) or "no spans"
            raise ScopeError(f"{const.name}: not tunable in the kernel ({reasons})")
        if const.min_value is None or const.max_value is None:
            raise ScopeError(f"{const.name}: the scope table gives no valid range of V")
        lines.append(f"const {cid} {const.name}")
        by_function: dict[str, list[Span]] = {}
        for sp in const.spans:
            by_function.setdefault(sp.function, []).append(sp)
        for function, spans in by_function.items():
            lines += [_xsie_span(cid, sp, const.values[0]) for sp in spans]
            lines.append(f"safe {cid} {function} {','.join(hex(e) for e in spans[0].exits)}")
        constrained = const.multiple_of != 1 or const.power_of_two
        rule = f" {const.multiple_of} {int(const.power_of_two)}" if constrained else ""
        lines.append(f"range {cid} {const.min_value} {const.max_value}{rule}")
    return lines


def _xsie_span(cid: int, sp: Span, compiled: int) -> str:
    u, st = sp.update, sp.state
    if u.kind not in XSIE_UPDATES or u.probe is None or u.register not in XSIE_REG:
        raise ScopeError(f"{sp.function}+{sp.start:#x}: not a kernel span ({u.kind}, probe {u.probe})")
    v0 = compiled if u.v0 is None else u.v0  # `set` does not use it
    return (
        f"span {cid} {XSIE_UPDATES[u.kind]} {sp.function} {sp.start:#x} {sp.expected} {u.probe:#x} "
        f"{XSIE_REG[u.register]} {st.width * 8} {st.a} {st.b} {v0} {u.pre_add}"
    )


def analyze_command(
    const: list[str],
    output: Path,
    xsie: Path | None,
    value: list[str] | None,
    fresh: bool,
    site: list[str] | None = None,
) -> None:
    """Analyze kernel perf-consts (#defines by name, literals by `site` NAME=FILE:LINE:TOKEN)
    against Debian's current kernel (per translation unit)."""
    vals = {}
    for item in value or []:
        name, _, csv = item.partition("=")
        try:
            vals[name] = [int(v, 0) for v in csv.split(",")]
        except ValueError as e:
            typer.echo(f"error: --values {item!r}: expected NAME=V0,V1,V2", err=True)
            raise typer.Exit(2) from e
    sites = {}
    for item in site or []:
        name, eq, where = item.partition("=")
        if not eq or not name or name in sites or name in const:
            typer.echo(
                f"error: --kernel-site {item!r}: expected NAME=FILE:LINE:TOKEN with a name of its own "
                "(e.g. HYSTART_DELAY_MIN_SHIFT=net/ipv4/tcp_cubic.c:439:3)",
                err=True,
            )
            raise typer.Exit(2)
        sites[name] = where
    if not const and not sites:
        typer.echo("error: name a kernel perf-const or give --kernel-site", err=True)
        raise typer.Exit(2)
    try:
        result = analyze(const, vals, fresh, sites)
    except KernelBuildError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from e
    output.write_text(result.table.to_json())
    refused = ""
    if xsie:
        xsie.unlink(missing_ok=True)  # never leave the spans of an earlier analysis behind
        try:
            xsie.write_text("\n".join(xsie_lines(result)) + "\n")
        except ScopeError as e:
            refused = f"error: no spans file written: {e}"
    for c in result.table.consts:
        typer.echo(
            f"{c.name}: {len(c.spans)} span(s), {len(c.refusals)} refusal(s), {result.seconds[c.name]} s"
        )
        for s in c.spans:
            typer.echo(f"  span {s.function}+{s.start:#x}..{s.end:#x} [{s.update.text}] {s.state.text}")
        for r in c.refusals:
            typer.echo(f"  refused {r.function}: {r.reason} {r.detail}")
    if refused:
        typer.echo(refused, err=True)
    if refused or not any(c.spans for c in result.table.consts):
        raise typer.Exit(1)
