"""What a variant build reads: the local headers a rewritten source needs beside it, and the
record the compiler leaves of the files it read, which decides whether a cached build is current."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
from pathlib import Path

_QUOTED_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"\n]+)"', re.M)
# gcc appends each unit's sources and non-system headers in make syntax to the file this names,
# clang (which ignores it) each header it opens, one a line after depth dots, to CC_PRINT_HEADERS_FILE.
_GCC_RECORD = "deps.gcc"
_CLANG_RECORD = "deps.clang"
_MANIFEST = "inputs.json"


def local_headers(source: Path) -> list[Path]:
    """The files `source` includes with "..." that exist beside the including file, transitively.
    Read as text, so an include under any #if counts too (a copied header that is not read is harmless)."""
    found: dict[Path, None] = {}
    todo = [source.absolute()]
    while todo:
        including = todo.pop()
        for name in _QUOTED_INCLUDE.findall(including.read_text(errors="replace")):
            header = Path(os.path.normpath(including.parent / name))
            if not os.path.isabs(name) and header.is_file() and header not in found:
                found[header] = None
                todo.append(header)
    found.pop(source.absolute(), None)
    return list(found)


def copy_with_headers(source: Path, text: str, headers: list[Path], tree: Path) -> Path:
    """Write `text` as `source` and copy its headers under `tree`, at the same places relative to
    each other, so each include resolves as it does in the original folder. Returns the copy's path."""
    root = Path(os.path.commonpath([source.absolute().parent, *(h.parent for h in headers)]))
    for header in headers:
        copy = tree / header.relative_to(root)
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_bytes(header.read_bytes())
    src = tree / source.absolute().relative_to(root)
    src.parent.mkdir(parents=True, exist_ok=True)
    src.write_text(text)
    return src


def headers_digest(headers: list[Path], source: Path) -> str:
    """The headers' contents and places relative to `source`, for the cache key."""
    h = hashlib.sha256()
    for header in sorted(headers):
        h.update(os.path.relpath(header, source.absolute().parent).encode() + b"\0" + header.read_bytes())
    return h.hexdigest()


def recording_env(build_dir: Path) -> dict[str, str]:
    """The environment for a build that leaves gcc's and clang's records in `build_dir` (a new folder)."""
    env = dict(os.environ)
    env["DEPENDENCIES_OUTPUT"] = str(build_dir / _GCC_RECORD)
    env["CC_PRINT_HEADERS"] = "1"
    env["CC_PRINT_HEADERS_FILE"] = str(build_dir / _CLANG_RECORD)
    return env


def _recorded(build_dir: Path) -> list[str] | None:
    """The paths in the compilers' records, or None when no compiler left one."""
    gcc, clang = build_dir / _GCC_RECORD, build_dir / _CLANG_RECORD
    if not gcc.exists() and not clang.exists():
        return None
    paths: list[str] = []
    if gcc.exists():
        words = re.findall(r"(?:\\.|[^\s\\])+", gcc.read_text().replace("\\\n", " "))
        paths += [re.sub(r"\\(.)", r"\1", w).replace("$$", "$") for w in words if not w.endswith(":")]
    if clang.exists():
        paths += [re.sub(r"^\.+ ", "", line) for line in clang.read_text().splitlines() if line.strip()]
    return paths


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def record_inputs(build_dir: Path, build: str, cwd: Path) -> bool:
    """After a build in `build_dir` (run in `cwd`): write the manifest of the files it read outside
    `build_dir` (those in the compilers' records and those the command names) with their digests.
    False, and no manifest, when that is not known: no compiler left a record, or a recorded path
    was relative to a folder the build changed into."""
    recorded = _recorded(build_dir)
    if recorded is None:
        return False
    inputs: dict[str, str] = {}
    for name in recorded:
        path = Path(os.path.normpath(cwd / name))
        if not path.is_file():
            return False
        if not path.is_relative_to(build_dir.absolute()):
            inputs[str(path)] = _digest(path)
    for word in shlex.split(build):
        path = cwd / word
        if "{" not in word and path.is_file():
            inputs[str(path.absolute())] = _digest(path)
    (build_dir / _MANIFEST).write_text(json.dumps(inputs, indent=0, sort_keys=True))
    return True


def inputs_unchanged(build_dir: Path) -> bool:
    """Whether every file the cached build in `build_dir` read outside it is as it was."""
    try:
        inputs = json.loads((build_dir / _MANIFEST).read_text())
        return all(_digest(Path(p)) == digest for p, digest in inputs.items())
    except (OSError, ValueError):
        return False
