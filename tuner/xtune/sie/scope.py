"""The scope table: what `xtune analyze` produces and every SIE engine (user and kernel) consumes.

One table describes one binary (an executable, a shared library or a relocatable object) and the
perf-consts found in it.
Per perf-const: where it is in the source, and for each critical span (one place where the constant
enters the machine state): the function and offsets, the exact bytes the engine must find before it
patches anything, the symbolic state expression IV = a*V + b (or a named non-linear form), the
synthesized update, and the safe span ranges outside of which a transition may happen.

Updates in user space are trampolines (paper §3.4.2: single write, inverse, dual location). Kernel
spans (xsie.ko) are kprobes instead: their update names the register the probe handler writes, the
instruction it runs before, and for the kinds only the kernel has (scale, cmp) the compiled value V0.

Offsets are relative to the function; `vaddr` fields are ELF addresses (section-relative in a .o file).
The JSON form is `ScopeTable.to_json()`; `ScopeTable.from_json()` validates and names the bad field.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

SCOPE_VERSION = 2  # 2: kernel update fields (register, probe, v0, pre_add) and exits

TARGET_KINDS = ("register", "memory", "flags")
# IV = a*f(V) + b with f(V) = V (affine), log2(V) (V a power of two), or V/2, V/4, V/8 (C integer
# division of a positive V, as in `N / 2` in the source).
FORMS = ("affine", "log2", "div2", "div4", "div8")
# single_write | inverse | dual_location: user-space trampolines, and the kernel's `set`
# (reg = IV(V) before the probe); scale: reg = (reg + pre_add) * IV(V) / IV(V0) - pre_add before
# the probe; cmp: for the probed compare only, reg is offset by IV(V0) - IV(V), then restored.
UPDATE_KINDS = ("single_write", "inverse", "dual_location", "scale", "cmp")
KERNEL_ONLY_KINDS = ("scale", "cmp")
PATCH_KINDS = ("jump", "int3")
RELOC_KINDS = ("knob_abs64", "rel32", "rip32")


class ScopeError(ValueError):
    """A scope table that is malformed; the message names the field (JSON path)."""


@dataclass
class SourceLocation:
    file: str
    line: int  # 0 when the constant was named as a macro/variable and not located
    token: str


@dataclass
class BinaryId:
    path: str
    build_id: str  # hex of NT_GNU_BUILD_ID, "" when the binary has none
    sha256: str  # of the whole file the table was derived from
    elf_type: str  # "EXEC", "DYN" (PIE / shared object) or "REL" (object file)
    load_vaddr: int  # lowest PT_LOAD p_vaddr, page aligned (0 for PIE and .o)
    # A shared library: the name processes load it under (e.g. "libk.so"); "" for an executable.
    # Its spans are relative to the library's load address, found by `build_id` in the process.
    library: str = ""


@dataclass
class StateExpr:
    """How the constant reaches the state: IV = a*f(V) + b, f given by `form` (see FORMS)."""

    target: str  # register | memory | flags
    location: str  # e.g. "eax", "dword ptr [rbp - 0x14]", "eflags"
    form: str
    a: int
    b: int
    width: int  # operand size in bytes; IV is truncated to it
    text: str  # readable, e.g. "ecx = 1*V + -1"


@dataclass
class Reloc:
    """A field of the trampoline the engine fills in at arm time."""

    offset: int  # into Span.trampoline
    kind: str  # knob_abs64: address of the slot's `applied`; rel32/rip32: to `target` (ELF vaddr)
    target: int = 0


@dataclass
class Update:
    kind: str  # see UPDATE_KINDS
    text: str  # the update in assembly, for people
    # Kernel spans only ("" / None / 0 in user space, where the trampoline holds the update):
    register: str = ""  # 64-bit name of the register the probe handler writes
    probe: int | None = None  # function-relative offset of the instruction the update runs before
    v0: int | None = None  # scale, cmp: the compiled value, the reference of the update
    pre_add: int = 0  # scale: immediate the probed instruction still adds (pre-compensated)


@dataclass
class SafeRange:
    start: int  # function-relative offsets, [start, end)
    end: int


@dataclass
class Span:
    """One critical span: the engine patches [vaddr, vaddr + len(expected)) with a jump or int3."""

    function: str
    section: str
    func_vaddr: int
    start: int  # function-relative, inclusive
    end: int  # function-relative, exclusive; end - start == len(expected bytes)
    expected: str  # hex of the original bytes of [start, end)
    state: StateExpr
    update: Update
    patch: str  # jump (5-byte jmp to the trampoline) | int3 (ptrace fallback)
    patch_reason: str  # why int3, "" for jump
    trampoline: str  # hex: displaced code with the update; the engine appends `jmp end`
    relocs: list[Reloc]
    safe: list[SafeRange]
    safe_reason: str  # how the safe span was bounded
    exits: list[int] = field(default_factory=list)  # kernel: offsets leaving the safe function
    # Spans of one constant that can run within one activation share a group: a transition keeps
    # the value of a group fixed for a thread inside any of its safe spans (one group per function).
    group: int = 0
    # Function-relative return addresses inside the safe span (after calls there; None: not
    # known). A uretprobe hides a return address from the engine's stack scan: with none of
    # these, what it hides cannot be inside the safe span.
    return_points: list[int] | None = None

    @property
    def vaddr(self) -> int:
        return self.func_vaddr + self.start


@dataclass
class Refusal:
    """A place where the constant changes the code but SIE cannot make the change safe."""

    function: str
    reason: str
    detail: str = ""


@dataclass
class PerfConst:
    name: str
    source: SourceLocation
    values: list[int]  # analyzed values; the first is the one compiled into `binary`
    spans: list[Span]
    refusals: list[Refusal]
    constraint: str = ""  # the conditions on V below, readable (e.g. "power of two"), "" if none
    # The range of V over which validation builds gave the same spans (None: not validated).
    min_value: int | None = None
    max_value: int | None = None
    multiple_of: int = 1  # V must be a multiple of it (the code holds only under divisibility)
    power_of_two: bool = False  # V must be a power of two (the compiler made V a shift or mask)

    @property
    def tunable(self) -> bool:
        return bool(self.spans) and not self.refusals

    def check_value(self, value: int) -> None:
        """Raise ScopeError when the scope table's expressions are not known to hold for `value`."""
        if value <= 0 and any(s.state.form.startswith("div") for s in self.spans):
            raise ScopeError(f"{self.name}: {value}: the analysis divides V, which must be positive")
        if self.power_of_two and (value <= 0 or value & (value - 1)):
            raise ScopeError(
                f"{self.name}: {value} is not a power of two (the compiler made V a shift or mask)"
            )
        if value % self.multiple_of:
            raise ScopeError(
                f"{self.name}: {value} is not a multiple of {self.multiple_of} (the code holds only for"
                " multiples)"
            )
        if self.min_value is not None and value < self.min_value:
            raise ScopeError(f"{self.name}: {value} is below {self.min_value}, where the analysis holds")
        if self.max_value is not None and value > self.max_value:
            raise ScopeError(f"{self.name}: {value} is above {self.max_value}, where the analysis holds")


@dataclass
class ScopeTable:
    binary: BinaryId
    consts: list[PerfConst]
    version: int = SCOPE_VERSION
    tool: str = "xtune analyze"
    analysis_seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1)

    @classmethod
    def from_dict(cls, data: Any) -> ScopeTable:
        return _parse_table(data)

    @classmethod
    def from_json(cls, text: str) -> ScopeTable:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise ScopeError(f"scope table is not JSON: line {e.lineno} column {e.colno}: {e.msg}") from e
        return _parse_table(data)

    def const(self, name: str) -> PerfConst:
        for c in self.consts:
            if c.name == name:
                return c
        known = ", ".join(c.name for c in self.consts) or "none"
        raise ScopeError(f"no perf-const {name!r} in the scope table (it has: {known})")


def merge(tables: list[ScopeTable]) -> ScopeTable:
    """Several perf-consts of one binary (analyzed one by one) as one table, armed as one transaction."""
    first = tables[0]
    for t in tables[1:]:
        if t.binary.sha256 != first.binary.sha256:
            raise ScopeError(
                f"scope tables of different binaries: {first.binary.path} ({first.binary.sha256[:12]})"
                f" and {t.binary.path} ({t.binary.sha256[:12]})"
            )
    consts = [c for t in tables for c in t.consts]
    if len({c.name for c in consts}) != len(consts):
        raise ScopeError("the scope tables name the same perf-const twice")
    return ScopeTable(first.binary, consts, analysis_seconds=sum(t.analysis_seconds for t in tables))


def load(path: str) -> ScopeTable:
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        raise ScopeError(f"{path}: {e.strerror}") from e
    try:
        return ScopeTable.from_json(text)
    except ScopeError as e:
        raise ScopeError(f"{path}: {e}") from e


# --- validation: every field is checked for type, and the message says where it is ---


def _obj(d: Any, where: str, keys: dict[str, type | tuple[type, ...]]) -> dict[str, Any]:
    if not isinstance(d, dict):
        raise ScopeError(f"{where}: expected an object, got {type(d).__name__}")
    for k, t in keys.items():
        if k not in d:
            raise ScopeError(f"{where}.{k}: missing")
        v = d[k]
        ok = isinstance(v, t) and not (t is int and isinstance(v, bool))
        if not ok:
            raise ScopeError(f"{where}.{k}: expected {getattr(t, '__name__', t)}, got {type(v).__name__}")
    return d


def _choice(v: str, allowed: tuple[str, ...], where: str) -> str:
    if v not in allowed:
        raise ScopeError(f"{where}: {v!r} is not one of {', '.join(allowed)}")
    return v


def _hex(v: str, where: str) -> str:
    try:
        bytes.fromhex(v)
    except ValueError as e:
        raise ScopeError(f"{where}: not a hex byte string") from e
    return v


def _nullable_int(d: dict[str, Any], k: str, where: str) -> int | None:
    v = d.get(k)
    if v is not None and (not isinstance(v, int) or isinstance(v, bool)):
        raise ScopeError(f"{where}.{k}: expected an integer or null")
    return v


def _optional_int(d: dict[str, Any], k: str, where: str, default: int, least: int) -> int:
    """An optional integer key (tables written before it existed load with `default`)."""
    v = d.get(k, default)
    if not isinstance(v, int) or isinstance(v, bool) or v < least:
        raise ScopeError(f"{where}.{k}: expected an integer >= {least}")
    return v


def _parse_update(d: Any, w: str, start: int, end: int, state: StateExpr) -> Update:
    up = _obj(d, w, {"kind": str, "text": str, "register": str, "pre_add": int})
    probe, v0 = _nullable_int(up, "probe", w), _nullable_int(up, "v0", w)
    u = Update(up["kind"], up["text"], up["register"], probe, v0, up["pre_add"])
    _choice(u.kind, UPDATE_KINDS, w + ".kind")
    if u.kind in KERNEL_ONLY_KINDS and (not u.register or u.probe is None or u.v0 is None):
        raise ScopeError(f"{w}: a {u.kind} update needs register, probe and v0")
    if u.probe is not None and not start <= u.probe < end:
        raise ScopeError(f"{w}.probe: {u.probe:#x} is outside the span [{start:#x}, {end:#x})")
    if u.pre_add and u.kind != "scale":
        raise ScopeError(f"{w}.pre_add: only a scale update has one")
    if u.kind == "scale" and u.v0 is not None and state.a * u.v0 + state.b == 0:
        raise ScopeError(f"{w}.v0: IV(V0) is 0, a scale update divides by it")
    return u


def _parse_span(d: Any, w: str) -> Span:
    _obj(
        d,
        w,
        {
            "function": str,
            "section": str,
            "func_vaddr": int,
            "start": int,
            "end": int,
            "expected": str,
            "state": dict,
            "update": dict,
            "patch": str,
            "patch_reason": str,
            "trampoline": str,
            "relocs": list,
            "safe": list,
            "safe_reason": str,
            "exits": list,
        },
    )
    st = _obj(
        d["state"],
        w + ".state",
        {"target": str, "location": str, "form": str, "a": int, "b": int, "width": int, "text": str},
    )
    _choice(st["target"], TARGET_KINDS, w + ".state.target")
    _choice(st["form"], FORMS, w + ".state.form")
    if st["width"] not in (1, 2, 4, 8):
        raise ScopeError(f"{w}.state.width: {st['width']} is not 1, 2, 4 or 8")
    state = StateExpr(**st)
    update = _parse_update(d["update"], w + ".update", d["start"], d["end"], state)
    _choice(d["patch"], PATCH_KINDS, w + ".patch")
    expected = _hex(d["expected"], w + ".expected")
    if d["end"] - d["start"] != len(expected) // 2 or d["start"] < 0:
        raise ScopeError(f"{w}: [start, end) = [{d['start']}, {d['end']}) does not match expected bytes")
    if d["patch"] == "jump" and d["end"] - d["start"] < 5:
        raise ScopeError(f"{w}: a jump patch needs at least 5 bytes, the span has {d['end'] - d['start']}")
    tramp = _hex(d["trampoline"], w + ".trampoline")
    relocs = []
    for i, r in enumerate(d["relocs"]):
        rw = f"{w}.relocs[{i}]"
        _obj(r, rw, {"offset": int, "kind": str, "target": int})
        _choice(r["kind"], RELOC_KINDS, rw + ".kind")
        size = 8 if r["kind"] == "knob_abs64" else 4
        if not 0 <= r["offset"] <= len(tramp) // 2 - size:
            raise ScopeError(f"{rw}.offset: {r['offset']} is outside the trampoline")
        relocs.append(Reloc(**r))
    safe = []
    for i, s in enumerate(d["safe"]):
        _obj(s, f"{w}.safe[{i}]", {"start": int, "end": int})
        if s["end"] <= s["start"]:
            raise ScopeError(f"{w}.safe[{i}]: empty range")
        safe.append(SafeRange(**s))
    if not safe:
        raise ScopeError(f"{w}.safe: a span needs at least one safe range")
    exits = d["exits"]
    if not all(isinstance(e, int) and not isinstance(e, bool) and e >= 0 for e in exits):
        raise ScopeError(f"{w}.exits: expected offsets (non-negative integers)")
    return Span(
        function=d["function"],
        section=d["section"],
        func_vaddr=d["func_vaddr"],
        start=d["start"],
        end=d["end"],
        expected=expected,
        state=state,
        update=update,
        patch=d["patch"],
        patch_reason=d["patch_reason"],
        trampoline=tramp,
        relocs=relocs,
        safe=safe,
        safe_reason=d["safe_reason"],
        exits=list(exits),
        group=_optional_int(d, "group", w, 0, 0),
        return_points=_return_points(d, w),
    )


def _return_points(d: dict[str, Any], w: str) -> list[int] | None:
    v = d.get("return_points")
    if v is None:
        return None
    if not isinstance(v, list) or not all(
        isinstance(e, int) and not isinstance(e, bool) and e >= 0 for e in v
    ):
        raise ScopeError(f"{w}.return_points: expected offsets (non-negative integers) or null")
    return list(v)


def _parse_const(d: Any, w: str) -> PerfConst:
    _obj(
        d,
        w,
        {"name": str, "source": dict, "values": list, "spans": list, "refusals": list, "constraint": str},
    )
    src = _obj(d["source"], w + ".source", {"file": str, "line": int, "token": str})
    values = d["values"]
    if len(values) < 2 or not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        raise ScopeError(f"{w}.values: expected at least two integers")
    refusals = []
    for i, r in enumerate(d["refusals"]):
        _obj(r, f"{w}.refusals[{i}]", {"function": str, "reason": str, "detail": str})
        refusals.append(Refusal(**r))
    spans = [_parse_span(s, f"{w}.spans[{i}]") for i, s in enumerate(d["spans"])]
    for i, s in enumerate(spans):
        if s.update.v0 is not None and s.update.v0 != values[0]:
            raise ScopeError(f"{w}.spans[{i}].update.v0: {s.update.v0} is not the compiled value {values[0]}")
    bounds = {key: _nullable_int(d, key, w) for key in ("min_value", "max_value")}
    power_of_two = d.get("power_of_two", False)
    if not isinstance(power_of_two, bool):
        raise ScopeError(f"{w}.power_of_two: expected true or false")
    return PerfConst(
        name=d["name"],
        source=SourceLocation(**src),
        values=list(values),
        spans=spans,
        refusals=refusals,
        constraint=d["constraint"],
        **bounds,
        multiple_of=_optional_int(d, "multiple_of", w, 1, 1),
        power_of_two=power_of_two,
    )


def _parse_table(d: Any) -> ScopeTable:
    _obj(d, "$", {"version": int, "binary": dict, "consts": list})
    if d["version"] != SCOPE_VERSION:
        raise ScopeError(f"$.version: {d['version']} is not supported (this xtune reads {SCOPE_VERSION})")
    b = _obj(
        d["binary"],
        "$.binary",
        {"path": str, "build_id": str, "sha256": str, "elf_type": str, "load_vaddr": int},
    )
    if not isinstance(b.get("library", ""), str):
        raise ScopeError(f"$.binary.library: expected str, got {type(b['library']).__name__}")
    if b.get("library") and not b["build_id"]:
        raise ScopeError("$.binary.build_id: a shared library needs its build id (how the engine finds it)")
    consts = [_parse_const(c, f"$.consts[{i}]") for i, c in enumerate(d["consts"])]
    names = [c.name for c in consts]
    if len(set(names)) != len(names):
        raise ScopeError("$.consts: perf-const names must be unique")
    return ScopeTable(
        binary=BinaryId(**b),
        consts=consts,
        version=d["version"],
        tool=str(d.get("tool", "")),
        analysis_seconds=float(d.get("analysis_seconds", 0.0)),
        notes=[str(n) for n in d.get("notes", [])],
    )
