"""Every translation unit of this kernel whose code can depend on a perf-const, or why not.

A unit missed here would keep the compiled value while the others use the new one, so the search
covers the whole tree and follows the constant through headers:
  - the names: the constant, and to a fixpoint every macro and static function of a header (or of
    a .c file other files include) whose body uses a name already found (ctokens.py);
  - the files using any of them (a word search over every .c, .h and .S file of the tree; a use
    inside a comment is not one);
  - the units: each such file that kbuild compiles with Debian's config (kbuild.py), or that one
    includes; a file no unit compiles or includes is not part of this kernel.
A use no name can carry (a `#if` on the value, a type, array size or initializer at file scope)
is a refusal naming the file and line.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from xtune.sie.kernel import ctokens
from xtune.sie.kernel.kbuild import Unit, kbuild_units
from xtune.sie.kernel.source import Define, KernelEnv, grep_files, in_this_arch, tree_files

_INCLUDE = re.compile(r'^\s*#\s*include\s*["<]([^">]+)[">]', re.M)


@dataclass
class Discovery:
    units: list[Unit] = field(default_factory=list)  # to build with each value and compare
    names: set[str] = field(default_factory=set)  # the constant and the macros/functions using it
    functions: set[str] = field(default_factory=set)  # those of `names` that are header functions
    refusals: list[tuple[str, str]] = field(default_factory=list)  # (file:line, why)
    uncompiled: list[str] = field(default_factory=list)  # files using it that no unit compiles


def discover_units(env: KernelEnv, define: Define) -> Discovery:
    by_source = kbuild_units(env)
    files = [f for f in tree_files(env) if f in by_source or in_this_arch(f)]
    return discover(env.source, define, by_source, files)


def discover(src: Path, define: Define, by_source: dict[str, list[Unit]], files: list[str]) -> Discovery:
    """The units using `define` among `files` (relative to `src`), compiled as `by_source` says."""
    found = Discovery(names={define.name})
    code: set[str] = set()  # files whose compiled code uses a name: they and their includers are units
    if define.file.endswith((".c", ".S")):
        # a .c file's define is visible in that file (and what it includes) only
        _classify(src, define.file, found, code, local=True)
    else:
        searched: set[str] = set()
        while found.names - searched:
            new = found.names - searched
            searched |= new
            for f in grep_files(src, files, new):
                _classify(src, f, found, code, local=f in by_source or not f.endswith(".h"))
    _add_units(src, files, by_source, code, found)
    found.refusals = sorted(set(found.refusals))  # a file is read again when it uses a new name
    return found


def _classify(src: Path, f: str, found: Discovery, code: set[str], local: bool) -> None:
    """Record what `f`'s uses of the names make: a compiled use (`code`), a new name (a header's
    macro or static function) or a refusal. `local`: the file is compiled itself, its macros and
    static functions are its own."""
    text = (src / f).read_text(errors="replace")
    for use in ctokens.uses(text, found.names, assembly=f.endswith(".S")):
        where = f"{f}:{use.line}"
        if use.kind == "unbalanced":
            found.refusals.append((f, "its braces do not balance: uses cannot be given to a function"))
        elif use.kind == "if":
            found.refusals.append(
                (where, f"`#if` on {use.name}: the code other values select is in no analyzed build")
            )
        elif use.kind in ("declaration", "signature") and use.name in found.functions:
            if local:
                code.add(f)  # a prototype, or the function's address taken: its copy is here
            elif use.kind == "declaration":
                found.refusals.append((where, f"{use.name} is referred to at file scope in a header"))
        elif use.kind in ("declaration", "signature"):
            found.refusals.append(
                (
                    where,
                    f"{use.name} shapes a declaration at file scope (a type, array size or "
                    "initializer): a layout or data is not retuned by probes",
                )
            )
        elif local or use.kind == "function":
            code.add(f)  # compiled here (or, for a header's non-static function, in each includer)
        else:
            found.names.add(use.owner)
            if use.kind == "static-function":
                found.functions.add(use.owner)


def _add_units(
    src: Path, files: list[str], by_source: dict[str, list[Unit]], code: set[str], found: Discovery
) -> None:
    """The units compiling the files of `code`: their own objects, and those of every file that
    includes them, transitively (a .c file included by another is compiled there)."""
    units: dict[str, Unit] = {}
    included: set[str] = set()
    todo, seen = set(code), set(code)
    while todo:
        for f in todo:
            units.update({u.object: u for u in by_source.get(f, [])})
        by_target = includers(src, files, todo)
        included |= {t for t, by in by_target.items() if by}
        new = set().union(*by_target.values()) - seen
        seen |= new
        todo = new
    found.units = sorted(units.values(), key=lambda u: u.object)
    found.uncompiled = sorted(f for f in code if f not in by_source and f not in included)


def includers(src: Path, files: list[str], targets: set[str]) -> dict[str, set[str]]:
    """For each of `targets`, the files among `files` with an `#include` that names it."""
    out: dict[str, set[str]] = {t: set() for t in targets}
    bases = {os.path.basename(t) for t in targets}
    for f in grep_files(src, files, bases):
        for spec in _INCLUDE.findall((src / f).read_text(errors="replace")):
            norm = os.path.normpath(os.path.join(os.path.dirname(f), spec))
            for t in targets:
                if norm == t or (not spec.startswith(".") and t.endswith("/" + spec)):
                    out[t].add(f)
    return out
