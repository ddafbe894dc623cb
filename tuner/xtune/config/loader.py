"""Load an SLO file: YAML -> schema, with errors that name the file, the line and the field.

`${NAME}` in a string is replaced from the `variables` given by the caller (the demo passes the
namespaces it created), then from the environment; an unknown name is an error at its line.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from xtune.config.hosts import HostsFile
from xtune.config.schema import SloFile

M = TypeVar("M", bound=BaseModel)

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class ConfigError(ValueError):
    """A bad SLO file; `str()` is `file:line: field: problem` lines. The CLI exits with code 2."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


def _positions(node: yaml.Node, path: tuple[Any, ...], out: dict[tuple[Any, ...], int]) -> None:
    """Line (1-based) of every mapping key and sequence item, by its path."""
    out[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            sub = (*path, key.value)
            _positions(value, sub, out)
            out[sub] = key.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _positions(item, (*path, i), out)


def _substitute(doc: Any, variables: dict[str, str], path: tuple[Any, ...], missing: list[tuple]) -> Any:
    if isinstance(doc, dict):
        return {k: _substitute(v, variables, (*path, k), missing) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_substitute(v, variables, (*path, i), missing) for i, v in enumerate(doc)]
    if isinstance(doc, str):

        def repl(m: re.Match[str]) -> str:
            name = m.group(1)
            if name in variables:
                return variables[name]
            if name in os.environ:
                return os.environ[name]
            missing.append((path, name))
            return m.group(0)

        return _VAR.sub(repl, doc)
    return doc


def _line(lines: dict[tuple[Any, ...], int], loc: tuple[Any, ...]) -> int:
    """The line of the deepest part of `loc` the file has (a missing field: its parent)."""
    for n in range(len(loc), -1, -1):
        if loc[:n] in lines:
            return lines[loc[:n]]
    return 1


def _parse(text: str, source: str, what: str) -> tuple[dict[str, Any], dict[tuple[Any, ...], int]]:
    """The YAML mapping and the line of each of its parts; ConfigError naming source:line."""
    try:
        node = yaml.compose(text)
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = mark.line + 1 if mark else 1
        raise ConfigError([f"{source}:{line}: not valid YAML: {getattr(e, 'problem', e)}"]) from e
    if not isinstance(doc, dict) or node is None:
        raise ConfigError([f"{source}:1: {what}"])
    lines: dict[tuple[Any, ...], int] = {}
    _positions(node, (), lines)
    return doc, lines


def _validate(model: type[M], doc: Any, lines: dict[tuple[Any, ...], int], source: str) -> M:
    try:
        return model.model_validate(doc)
    except ValidationError as e:
        problems = []
        for err in e.errors():
            loc = tuple(x for x in err["loc"] if not (isinstance(x, str) and x.startswith("function-")))
            field = ".".join(str(x) for x in loc) or "(top level)"
            msg = err["msg"].removeprefix("Value error, ")
            problems.append(f"{source}:{_line(lines, loc)}: {field}: {msg}")
        raise ConfigError(problems) from e


def load_text(text: str, source: str = "<string>", variables: dict[str, str] | None = None) -> SloFile:
    """Parse and validate an SLO file's text; raise ConfigError naming source:line: field."""
    doc, lines = _parse(text, source, "an SLO file is a mapping (name, objective, slo, knobs, ...)")
    missing: list[tuple] = []
    doc = _substitute(doc, variables or {}, (), missing)
    if missing:
        raise ConfigError(
            [
                f"{source}:{_line(lines, p)}: {'.'.join(map(str, p))}: unknown variable ${{{n}}}"
                for p, n in missing
            ]
        )
    slo = _validate(SloFile, doc, lines, source)
    unknown = slo.unknown_reads()
    if unknown:
        raise ConfigError(
            [f"{source}:{_line(lines, loc)}: {'.'.join(map(str, loc))}: {msg}" for loc, msg in unknown]
        )
    return slo


def _read(path: str | os.PathLike[str]) -> str:
    try:
        return Path(path).read_text()
    except OSError as e:
        raise ConfigError([f"{path}:1: cannot read: {e.strerror}"]) from e


def load(path: str | os.PathLike[str], variables: dict[str, str] | None = None) -> SloFile:
    """Load an SLO file from disk (ConfigError when it cannot be read or is not valid)."""
    return load_text(_read(path), str(path), variables)


def load_hosts(path: str | os.PathLike[str]) -> HostsFile:
    """Load a hosts file (`xtune run --hosts`); ConfigError naming file, line and field."""
    doc, lines = _parse(_read(path), str(path), "a hosts file is a mapping with a list `hosts`")
    return _validate(HostsFile, doc, lines, str(path))
