"""The scope table file (`ScopeTable.to_json()`) as pydantic models: what `ScopeTable.from_json()`
accepts. The meaning of each field is in scope.py, next to the dataclasses the table loads into.

Its JSON Schema is published as schemas/scope-table.schema.json (`scripts/write-schemas`). Rules
across fields (the span's bytes against its offsets, a probe inside its span, v0 the compiled value)
are checked by the validators below, which name the field that breaks them.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    WithJsonSchema,
    model_validator,
)

from xtune.config.validation import FieldError

SCOPE_VERSION = 2  # 2: kernel update fields (register, probe, v0, pre_add) and exits

TargetKind = Literal["register", "memory", "flags"]
# IV = a*f(V) + b with f(V) = V (affine), log2(V) (V a power of two), or V/d for d = 2..16 (C integer
# division of a positive V, as in `N / 2` in the source); f64_div / f64_mul: a data word read as a
# double, IV = the double nearest c / V or c * V, c the double whose IEEE bits are `a` (b = 0).
Form = Literal[
    "affine", "log2", "div2", "div3", "div4", "div5", "div6", "div7", "div8", "div9", "div10",
    "div11", "div12", "div13", "div14", "div15", "div16", "f64_div", "f64_mul",
]  # fmt: skip
# single_write | inverse | dual_location: user-space trampolines, and the kernel's `set`
# (reg = IV(V) before the probe); scale: reg = (reg + pre_add) * IV(V) / IV(V0) - pre_add before
# the probe; cmp: for the probed compare only, reg is offset by IV(V0) - IV(V), then restored;
# shift: the probed `shl|shr|sar $IV(V0), reg` is emulated with the count IV(V).
UpdateKind = Literal["single_write", "inverse", "dual_location", "scale", "cmp", "shift"]
KERNEL_ONLY_KINDS = ("scale", "cmp", "shift")
PatchKind = Literal["jump", "int3"]
RelocKind = Literal["knob_abs64", "rel32", "rip32"]

HEX_PATTERN = "^(?:[0-9a-fA-F]{2})*$"


def _hex(text: str) -> str:
    if not re.fullmatch(HEX_PATTERN, text):
        raise ValueError("not a hex byte string")
    return text


Hex = Annotated[StrictStr, AfterValidator(_hex), WithJsonSchema({"type": "string", "pattern": HEX_PATTERN})]
Offset = Annotated[StrictInt, Field(ge=0)]


class Doc(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SourceLocationDoc(Doc):
    file: StrictStr
    line: StrictInt
    token: StrictStr


class BinaryIdDoc(Doc):
    path: StrictStr
    build_id: StrictStr
    sha256: StrictStr
    elf_type: StrictStr
    load_vaddr: StrictInt
    library: StrictStr = ""

    @model_validator(mode="after")
    def _library_has_build_id(self) -> BinaryIdDoc:
        if self.library and not self.build_id:
            raise FieldError(("build_id",), "a shared library needs its build id (how the engine finds it)")
        return self


class StateExprDoc(Doc):
    target: TargetKind
    location: StrictStr
    form: Form
    a: StrictInt
    b: StrictInt
    width: Literal[1, 2, 4, 8]
    text: StrictStr


class UpdateDoc(Doc):
    kind: UpdateKind
    text: StrictStr
    register_: StrictStr = Field(alias="register")  # `register` is a method of every class (ABC)
    probe: StrictInt | None = None
    v0: StrictInt | None = None
    pre_add: StrictInt

    @model_validator(mode="after")
    def _kernel_fields(self) -> UpdateDoc:
        if self.kind in KERNEL_ONLY_KINDS and (not self.register_ or self.probe is None or self.v0 is None):
            raise ValueError(f"a {self.kind} update needs register, probe and v0")
        if self.pre_add and self.kind != "scale":
            raise FieldError(("pre_add",), "only a scale update has one")
        return self


class RelocDoc(Doc):
    offset: StrictInt
    kind: RelocKind
    target: StrictInt


class SafeRangeDoc(Doc):
    start: StrictInt
    end: StrictInt

    @model_validator(mode="after")
    def _not_empty(self) -> SafeRangeDoc:
        if self.end <= self.start:
            raise ValueError(f"empty range [{self.start}, {self.end})")
        return self


class SpanDoc(Doc):
    function: StrictStr
    section: StrictStr
    func_vaddr: StrictInt
    start: Offset
    end: StrictInt
    expected: Hex
    state: StateExprDoc
    update: UpdateDoc
    patch: PatchKind
    patch_reason: StrictStr
    trampoline: Hex
    relocs: list[RelocDoc]
    safe: list[SafeRangeDoc]
    safe_reason: StrictStr
    exits: list[Offset]
    group: Offset = 0
    return_points: list[Offset] | None = None

    @model_validator(mode="after")
    def _consistent(self) -> SpanDoc:
        start, end, up = self.start, self.end, self.update
        if end - start != len(self.expected) // 2:
            raise ValueError(f"[start, end) = [{start}, {end}) does not match the expected bytes")
        if self.patch == "jump" and end - start < 5:
            raise ValueError(f"a jump patch needs at least 5 bytes, the span has {end - start}")
        if up.probe is not None and not start <= up.probe < end:
            raise FieldError(("update", "probe"), f"{up.probe:#x} is outside the span [{start:#x}, {end:#x})")
        if up.kind == "scale" and up.v0 is not None and self.state.a * up.v0 + self.state.b == 0:
            raise FieldError(("update", "v0"), "IV(V0) is 0, a scale update divides by it")
        for i, r in enumerate(self.relocs):
            size = 8 if r.kind == "knob_abs64" else 4
            if not 0 <= r.offset <= len(self.trampoline) // 2 - size:
                raise FieldError(("relocs", i, "offset"), f"{r.offset} is outside the trampoline")
        if not self.safe:
            raise FieldError(("safe",), "a span needs at least one safe range")
        return self


class RefusalDoc(Doc):
    function: StrictStr
    reason: StrictStr
    detail: StrictStr


class PerfConstDoc(Doc):
    name: StrictStr
    source: SourceLocationDoc
    values: list[StrictInt] = Field(min_length=2, description="analyzed values, the compiled one first")
    spans: list[SpanDoc]
    refusals: list[RefusalDoc]
    constraint: StrictStr
    min_value: StrictInt | None = None
    max_value: StrictInt | None = None
    multiple_of: StrictInt = Field(default=1, ge=1)
    power_of_two: StrictBool = False

    @model_validator(mode="after")
    def _v0_is_compiled(self) -> PerfConstDoc:
        for i, s in enumerate(self.spans):
            if s.update.v0 is not None and s.update.v0 != self.values[0]:
                raise FieldError(
                    ("spans", i, "update", "v0"), f"{s.update.v0} is not the compiled value {self.values[0]}"
                )
        return self


class ScopeTableDoc(Doc):
    """The perf-consts of one binary and how SIE changes each (see tuner/xtune/sie/README.md)."""

    model_config = ConfigDict(title="xtune scope table")
    version: Literal[2]
    binary: BinaryIdDoc
    consts: list[PerfConstDoc]
    tool: StrictStr = ""
    analysis_seconds: Annotated[float, Field(strict=True, ge=0)] = 0.0
    notes: list[StrictStr] = []

    @model_validator(mode="after")
    def _unique_names(self) -> ScopeTableDoc:
        names = [c.name for c in self.consts]
        if len(set(names)) != len(names):
            raise FieldError(("consts",), "perf-const names must be unique")
        return self
