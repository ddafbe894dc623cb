"""Pydantic validation errors as one line naming the field the way JSON paths read: `nodes[3]`,
`$.consts[0].spans[1].update.v0`. Shared by the documents xtune reads as JSON (tree models, scope
tables); SLO files are YAML and name `file:line: field` instead (`loader.py`)."""

from __future__ import annotations

from pydantic import ValidationError

_MESSAGES = {
    "missing": "missing",
    "extra_forbidden": "not a field of this document",
    "model_type": "expected an object",
    "dict_type": "expected an object",
}


class FieldError(ValueError):
    """A rule across fields, broken at `loc` below the model whose validator raises it."""

    def __init__(self, loc: tuple[str | int, ...], message: str) -> None:
        super().__init__(message)
        self.loc = loc


def json_path(loc: tuple[str | int, ...], root: str = "") -> str:
    """("guard", "ranges", 1) -> "guard.ranges[1]" (prefixed by `root`, e.g. "$")."""
    out = root
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}" if out else part
    return out


def first_problem(e: ValidationError, root: str = "") -> str:
    """`path: problem` for the first error of `e` (one clear reason, as the hand-written checks gave)."""
    err = e.errors()[0]
    loc = tuple(err["loc"])
    cause = err.get("ctx", {}).get("error")
    if isinstance(cause, FieldError):
        loc, msg = loc + cause.loc, str(cause)
    else:
        msg = _MESSAGES.get(err["type"], err["msg"].removeprefix("Value error, "))
        value = err.get("input")
        shown = err["type"] not in _MESSAGES and err["type"] != "value_error"
        if shown and (value is None or isinstance(value, (str, int, float))):
            msg += f", not {value!r}"
    path = json_path(loc, root)
    return f"{path}: {msg}" if path else msg
