"""The tree model file (`TreeModel.save`) as a pydantic model: what `TreeModel.from_doc` accepts.

Its JSON Schema is published as schemas/tree-model.schema.json (`scripts/write-schemas`). Rules
across fields (a child after its node, an index below the number of features or classes) are
checked by `TreeModelDoc`'s validator, which names the entry that breaks them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictInt, StrictStr, model_validator

from xtune.config.expr import is_name
from xtune.config.validation import FieldError

MODEL_VERSION = 1

Finite = Annotated[float, Field(strict=True, allow_inf_nan=False)]


def _ordered(r: tuple[float, float]) -> tuple[float, float]:
    if r[0] > r[1]:
        raise ValueError(f"lo {r[0]:g} is above hi {r[1]:g}")
    return r


# [lo, hi], finite, lo <= hi
Range = Annotated[tuple[Finite, Finite], AfterValidator(_ordered)]


def _signal_name(name: str) -> str:
    if not is_name(name):
        raise ValueError(f"{name!r} is not a signal name")
    return name


class Watch(BaseModel):
    """A signal outside the tree, watched for a range (see `TreePolicy`)."""

    model_config = ConfigDict(extra="forbid")
    signal: Annotated[StrictStr, AfterValidator(_signal_name)] = Field(
        description="a signal name, not an expression"
    )
    range: Range
    # drain[c][k]: the range setting c showed where setting k is best, or null; classes × classes
    drain: list[list[Range | None]] = Field(default_factory=list)  # absent: none (null is refused)


class Guard(BaseModel):
    model_config = ConfigDict(extra="forbid")
    ranges: list[Range] = Field(description="the training range of every feature, in feature order")
    fallback: StrictInt = Field(ge=0, description="the class chosen outside the ranges")
    watch: list[Watch] = []


# [feature, threshold, left, right, class]; a leaf has feature -1 and its children are not read
Node = tuple[StrictInt, Finite, StrictInt, StrictInt, StrictInt]


class TreeModelDoc(BaseModel):
    """A decision tree: `nodes` map `features` to a class, each class one value per knob."""

    model_config = ConfigDict(extra="forbid", title="xtune tree model")
    version: Literal[1]
    kind: Literal["decision-tree"]
    features: list[StrictStr] = Field(description="signal names or expressions, in the order the nodes index")
    knobs: list[StrictStr]
    classes: list[list[StrictInt]] = Field(description="class index -> knob values, in knob order")
    nodes: list[Node] = Field(min_length=1)
    card: dict[str, Any] = {}
    guard: Guard | None = None

    @model_validator(mode="after")
    def _indices(self) -> TreeModelDoc:
        n, nf, nc = len(self.nodes), len(self.features), len(self.classes)
        for i, (feature, _, left, right, label) in enumerate(self.nodes):
            if not 0 <= label < nc:
                raise FieldError(("nodes", i, 4), f"class {label} is not below the {nc} classes")
            if feature == -1:
                continue
            if not 0 <= feature < nf:
                raise FieldError(("nodes", i, 0), f"feature {feature} is not -1 (a leaf) or below {nf}")
            for side, child in ((2, left), (3, right)):
                if not i < child < n:
                    raise FieldError(("nodes", i, side), f"child {child} is not after the node and below {n}")
        for i, values in enumerate(self.classes):
            if len(values) != len(self.knobs):
                raise FieldError(("classes", i), f"needs one value per knob {self.knobs}, has {values}")
        if self.guard is not None:
            self._check_guard(self.guard, nf, nc)
        return self

    @staticmethod
    def _check_guard(guard: Guard, nf: int, nc: int) -> None:
        if len(guard.ranges) != nf:
            raise FieldError(
                ("guard", "ranges"), f"needs one [lo, hi] per feature ({nf}), has {len(guard.ranges)}"
            )
        if guard.fallback >= nc:
            raise FieldError(("guard", "fallback"), f"class {guard.fallback} is not below the {nc} classes")
        for i, w in enumerate(guard.watch):
            drain = w.drain
            if "drain" in w.model_fields_set and (len(drain) != nc or any(len(row) != nc for row in drain)):
                raise FieldError(
                    ("guard", "watch", i, "drain"),
                    f"needs {nc} rows of {nc} entries, each a [lo, hi] or null",
                )
