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
The JSON form is `ScopeTable.to_json()`; `ScopeTable.from_json()` validates it against
`scope_schema.ScopeTableDoc` (published as schemas/scope-table.schema.json) and names the bad field.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, get_args

from pydantic import TypeAdapter, ValidationError

from xtune.config.validation import first_problem
from xtune.sie.scope_schema import (
    SCOPE_VERSION,
    Form,
    PatchKind,
    RelocKind,
    ScopeTableDoc,
    TargetKind,
    UpdateKind,
)

# The kinds a field may take; their meaning is written in scope_schema.py, where they are defined.
TARGET_KINDS, FORMS = get_args(TargetKind), get_args(Form)
UPDATE_KINDS, PATCH_KINDS, RELOC_KINDS = get_args(UpdateKind), get_args(PatchKind), get_args(RelocKind)


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


def _parse_table(data: Any) -> ScopeTable:
    try:
        doc = ScopeTableDoc.model_validate(data)
    except ValidationError as e:
        raise ScopeError(first_problem(e, "$")) from e
    return _TABLE.validate_python(doc.model_dump(by_alias=True))


# The dataclasses from the checked document: their fields are the document's, one for one.
_TABLE = TypeAdapter(ScopeTable)
