"""Which `#define` of a perf-const Debian's config compiles, and the value it gives.

A constant may be defined more than once under `#if`s (`#ifdef CONFIG_X ... #else ... #endif`),
and the active definition may be an expression of other macros (`HPAGE_PMD_NR`). Picking a
definition by its text could vary an inactive one: no build would differ and the constant would
look unused. So the preprocessor decides: a unit that sees the definitions is preprocessed with
kbuild's own flags plus `-dD` (definitions kept, each under the file and line it came from), and
the value is what gcc computes from the definitions in effect at the end of that unit.
"""

from __future__ import annotations

import fcntl
import re
import subprocess
import tempfile
from pathlib import Path

from xtune.sie.kernel.kbuild import kbuild_units
from xtune.sie.kernel.source import Define, KernelBuildError, KernelEnv, in_this_arch
from xtune.sie.kernel.units import includers

_LITERAL = re.compile(r"^\(?\s*(\d+)[uUlL]*\s*\)?\s*(/\*.*|//.*)?$")
_MARKER = re.compile(r'^# (\d+) "([^"]*)"')


def find_define(env: KernelEnv, name: str) -> Define:
    """The definition of `name` this kernel compiles: its file, line and value."""
    found = _candidates(env.source, name)
    if not found:
        raise KernelBuildError(f"no `#define {name}` found in the kernel tree")
    files = sorted({f for f, _, _ in found})
    if len(files) > 1:
        raise KernelBuildError(
            f"`#define {name}` is given at {len(found)} places in {len(files)} files "
            f"({', '.join(f'{f}:{n}' for f, n, _ in found[:6])}): not one constant"
        )
    if len(found) == 1 and (m := _LITERAL.match(found[0][2])):
        file, line, _ = found[0]
        return Define(file, line, name, int(m.group(1)))  # one literal: nothing to choose
    return _active(env, name, files[0], found)


def _candidates(src: Path, name: str) -> list[tuple[str, int, str]]:
    """(file, line, body) of every object-like `#define name` in files this kernel may compile."""
    grep = subprocess.run(
        ["grep", "-rnE", "--include=*.[chS]", rf"^\s*#\s*define\s+{re.escape(name)}(\s|$)", "."],
        cwd=src,
        capture_output=True,
        text=True,
    )
    out = []
    for hit in grep.stdout.splitlines():
        path, line, text = hit.split(":", 2)
        path = path.removeprefix("./")
        if in_this_arch(path):
            body = re.sub(rf"^\s*#\s*define\s+{re.escape(name)}", "", text).strip()
            out.append((path, int(line), body))
    return sorted(out)


def _active(env: KernelEnv, name: str, file: str, found: list[tuple[str, int, str]]) -> Define:
    unit = _seeing_unit(env, file)
    text = _preprocess(env, unit)
    active = [(f, n, body) for f, n, d, body in _definitions(text) if d == name]
    if not active:
        lines = ", ".join(str(n) for _, n, _ in found)
        raise KernelBuildError(
            f"no `#define {name}` of {file} (lines {lines}) is compiled with this kernel's config "
            f"(preprocessed {unit})"
        )
    if len(active) > 1 or active[0][0] != file:
        where = ", ".join(f"{f}:{n}" for f, n, _ in active)
        raise KernelBuildError(f"{name} is defined {len(active)} times in {unit} ({where}): not one constant")
    _, line, body = active[0]
    if body.endswith("\\"):
        raise KernelBuildError(f"{file}:{line}: {name}'s definition goes on over several lines")
    value = _evaluate(text, name, f"{file}:{line}")
    return Define(file, line, name, value, expression="" if _LITERAL.match(body) else body)


def _seeing_unit(env: KernelEnv, file: str) -> str:
    """A C unit whose preprocessing sees `file`: the file itself, or a unit that includes it."""
    by_source = kbuild_units(env)
    if file.endswith(".c"):
        return file
    users = sorted(u for u in includers(env.source, list(by_source), {file})[file] if u.endswith(".c"))
    if not users:
        raise KernelBuildError(f"no unit includes {file} directly: its active definition is not known")
    return users[0]


def _preprocess(env: KernelEnv, source: str) -> str:
    """`source` preprocessed by kbuild with Debian's config, the definitions kept (`-dD`)."""
    target = source.removesuffix(".c") + ".i"
    out = env.source / target
    with open(env.source / ".xtune-unit.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # no unit build rewrites a define meanwhile
        try:
            run = subprocess.run(
                ["make", "-s", "-C", str(env.source), "CC=gcc-12", "KCFLAGS=-dD", target],
                capture_output=True,
                text=True,
            )
            if run.returncode:
                raise KernelBuildError(f"preprocessing {source} failed:\n{run.stderr[-1500:]}")
            return out.read_text(errors="replace")
        finally:
            out.unlink(missing_ok=True)


def _definitions(text: str) -> list[tuple[str, int, str, str]]:
    """(file, line, name, body) of every object-like `#define` in preprocessed text, where the
    line markers place it."""
    out = []
    file, line = "", 0
    for raw in text.splitlines():
        if m := _MARKER.match(raw):
            file, line = m.group(2).removeprefix("./"), int(m.group(1))
            continue
        if raw.startswith("#define "):
            head, _, body = raw[len("#define ") :].partition(" ")
            if "(" not in head:
                out.append((file, line, head, body.strip()))
        line += 1
    return out


def _evaluate(text: str, name: str, where: str) -> int:
    """The integer gcc computes for `name` from the definitions the unit ends with."""
    defines = []
    file = ""
    for raw in text.splitlines():
        if m := _MARKER.match(raw):
            file = m.group(2)
        elif raw.startswith(("#define ", "#undef ")) and file != "<built-in>":
            defines.append(raw)
    main = f'int main(void) {{ printf("%lld\\n", (long long)({name})); }}'
    program = "\n".join(["int printf(const char *, ...);", *defines, main])
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp) / "value"
        cc = subprocess.run(
            ["gcc-12", "-w", "-x", "c", "-o", str(exe), "-"], input=program, capture_output=True, text=True
        )
        if cc.returncode:
            said = cc.stderr.strip().splitlines()[-1] if cc.stderr.strip() else "failed"
            raise KernelBuildError(
                f"{where}: {name} is not an integer constant of the kernel's macros alone (gcc: {said})"
            )
        return int(subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout)
