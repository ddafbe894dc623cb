"""The tunable spec (TOML): which constant of which source, which values, how to build."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path


class SpecError(ValueError):
    """A bad spec; the message names the file and the field."""


@dataclass
class Spec:
    path: Path  # the spec file (relative paths in it are relative to its folder)
    source: Path
    constant: str  # macro or variable name; with `line`, the token replaced on that line
    line: int  # 0: the constant is a macro set with -D or by rewriting its #define
    values: list[int]
    build: str  # command template: {src} {out} {value} {orig} {dir}
    define: bool  # pass the value as -D<constant>=<value> instead of rewriting the source
    function_filter: str  # regex: only functions matching it are analyzed ("" = all)
    # The program copes with values that outlive a span (stored to memory, passed to callees such
    # as an allocation size): such uses are then retuned with the whole function as the safe span.
    persistent: bool = False
    # The build makes a shared library, loaded by processes under this name (e.g. "libk.so"):
    # spans are relative to its load address. "" for an executable.
    library: str = ""


def load_spec(path: str | Path) -> Spec:
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except OSError as e:
        raise SpecError(f"{path}: {e.strerror}") from e
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"{path}: not valid TOML: {e}") from e
    return spec_from_dict(data, path)


def spec_from_dict(data: dict, path: Path) -> Spec:
    def need(key: str, kind: type) -> object:
        if key not in data:
            raise SpecError(f"{path}: field `{key}` is missing")
        v = data[key]
        if not isinstance(v, kind) or isinstance(v, bool) and kind is not bool:
            raise SpecError(f"{path}: field `{key}` must be a {kind.__name__}, got {type(v).__name__}")
        return v

    base = path.parent
    source = base / str(need("source", str))
    if not source.is_file():
        raise SpecError(f"{path}: field `source`: {source} does not exist")
    constant = str(need("constant", str) if "constant" in data else need("token", str))
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", constant):
        raise SpecError(f"{path}: field `constant`: {constant!r} is not a C identifier")
    values = need("values", list)
    assert isinstance(values, list)
    if len(values) < 2 or not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        raise SpecError(f"{path}: field `values`: need at least two integers (the first is the original)")
    if len(set(values)) != len(values):
        raise SpecError(f"{path}: field `values`: values must differ")
    line = data.get("line", 0)
    if not isinstance(line, int) or line < 0:
        raise SpecError(f"{path}: field `line` must be a positive integer")
    define = bool(data.get("define", False))
    build = str(need("build", str))
    for ph in ("{out}",) + (() if define else ("{src}",)):
        if ph not in build:
            raise SpecError(f"{path}: field `build`: the command needs the {ph} placeholder")
    if define and "{value}" not in build and "{define}" not in build:
        raise SpecError(f"{path}: field `build`: with define = true the command needs {{define}}")
    if not define:
        _locate(source, constant, line, path)
    persistent = data.get("persistent", False)
    if not isinstance(persistent, bool):
        raise SpecError(f"{path}: field `persistent` must be true or false, got {type(persistent).__name__}")
    library = data.get("library", "")
    if not isinstance(library, str) or "/" in library or library.strip() != library:
        raise SpecError(f'{path}: field `library` must be the library\'s file name, e.g. "libk.so"')
    return Spec(
        path=path,
        source=source,
        constant=constant,
        line=line,
        values=[int(v) for v in values],
        build=build,
        define=define,
        function_filter=str(data.get("functions", "")),
        persistent=persistent,
        library=library,
    )


def _locate(source: Path, constant: str, line: int, spec_path: Path) -> int:
    """The line to rewrite: `line` if given (must hold the token), else the #define of the macro."""
    lines = source.read_text().splitlines()
    word = re.compile(rf"\b{re.escape(constant)}\b")
    if line:
        if line > len(lines) or not word.search(lines[line - 1]):
            raise SpecError(f"{spec_path}: `{constant}` does not occur on line {line} of {source}")
        return line
    define = re.compile(rf"^\s*#\s*define\s+{re.escape(constant)}\s+")
    hits = [i + 1 for i, text in enumerate(lines) if define.match(text)]
    if len(hits) != 1:
        raise SpecError(
            f"{spec_path}: expected exactly one `#define {constant}` in {source}, found {len(hits)};"
            " give `line` (and `token`) instead"
        )
    return hits[0]


def rewrite_source(spec: Spec, value: int) -> str:
    """The source text with the constant set to `value` (its #define body, or the token on `line`)."""
    lines = spec.source.read_text().splitlines(keepends=True)
    n = _locate(spec.source, spec.constant, spec.line, spec.path)
    text = lines[n - 1]
    if spec.line:
        # `line` + `token`: the token is a literal or name on that line; replace its first occurrence
        # after the name when the line declares it, else the token itself.
        m = re.search(rf"\b{re.escape(spec.constant)}\b\s*=\s*(-?\w+)", text)
        if m:
            text = text[: m.start(1)] + str(value) + text[m.end(1) :]
        else:
            text = re.sub(rf"\b{re.escape(spec.constant)}\b", str(value), text, count=1)
    else:
        m = re.match(rf"(\s*#\s*define\s+{re.escape(spec.constant)}\s+)(.*?)(\s*(/[/*].*)?)$", text, re.S)
        assert m is not None
        text = f"{m.group(1)}{value}{m.group(3)}"
        if not text.endswith("\n"):
            text += "\n"
    lines[n - 1] = text
    return "".join(lines)
