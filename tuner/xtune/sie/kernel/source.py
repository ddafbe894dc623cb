"""Debian's kernel for the analysis: the prepared linux-source tree, one translation unit per build.

`kmod/harness/fetch-kernel.sh --source` fetches (by package name) and prepares the tree once under
$XTUNE_CACHE; here one unit (e.g. block/blk-mq.o) is compiled with the perf-const's `#define`
set to each value, with Debian's config and the gcc-12 Debian builds with. Objects are cached per
(kernel release, unit, constant, value); the tree is locked while a define is rewritten.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from xtune import paths


class KernelBuildError(RuntimeError):
    """The kernel packages, the define or a unit build failed; the message says which."""


@dataclass
class KernelEnv:
    release: str
    package: str
    package_version: str
    vmlinuz: Path
    source: Path
    cache: Path  # $XTUNE_CACHE/kernel/<release>

    @classmethod
    def fetch(cls) -> KernelEnv:
        script = paths.checkout_file("kmod/harness/fetch-kernel.sh", "XTUNE_FETCH_KERNEL")
        run = subprocess.run([str(script), "--source"], capture_output=True, text=True)
        if run.returncode:
            raise KernelBuildError(f"{script} failed: {run.stderr.strip()[-800:]}")
        env_file = Path(run.stdout.strip())
        kv = dict(line.split("=", 1) for line in env_file.read_text().splitlines() if "=" in line)
        return cls(
            kv["KERNEL_RELEASE"],
            kv["KERNEL_PACKAGE"],
            kv["KERNEL_PACKAGE_VERSION"],
            Path(kv["KERNEL_VMLINUZ"]),
            Path(kv["KERNEL_SOURCE"]),
            env_file.parent,
        )


@dataclass
class Define:
    file: str  # relative to the tree
    line: int
    name: str
    value: int


def find_define(src: Path, name: str, file: str = "") -> Define:
    """The `#define NAME <integer>` of a perf-const (searched in include/, block/, kernel/, mm/, net/)."""
    pattern = re.compile(rf"^\s*#\s*define\s+{re.escape(name)}\s+\(?\s*(\d+)[uUlL]*\s*\)?\s*(/\*.*)?$")
    candidates = [src / file] if file else []
    if not file:
        grep = subprocess.run(
            ["grep", "-rlE", rf"#\s*define\s+{name}\b", "include", "block", "kernel", "mm", "net", "fs"],
            cwd=src,
            capture_output=True,
            text=True,
        )
        candidates = [src / p for p in grep.stdout.split()]
    for path in candidates:
        for n, text in enumerate(path.read_text(errors="replace").splitlines(), 1):
            m = pattern.match(text)
            if m:
                return Define(str(path.relative_to(src)), n, name, int(m.group(1)))
    raise KernelBuildError(f"no `#define {name} <integer>` found in {file or 'the kernel tree'}")


def units_using(src: Path, define: Define) -> list[str]:
    """Objects (x/y.o) whose .c file names the constant; a header define may be used in several."""
    if define.file.endswith(".c"):
        return [define.file[:-2] + ".o"]
    grep = subprocess.run(
        ["grep", "-rlw", "--include=*.c", define.name, "block", "kernel", "mm", "net", "fs", "lib"],
        cwd=src,
        capture_output=True,
        text=True,
    )
    return sorted(p[:-2] + ".o" for p in grep.stdout.split())


def build_unit(env: KernelEnv, define: Define, unit: str, value: int, fresh: bool = False) -> Path:
    """`unit` compiled with the constant set to `value` (cached unless `fresh`)."""
    out_dir = env.cache / "units"
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / f"{unit.replace('/', '_')}.{define.name}={value}.o"
    if out.exists() and not fresh:
        return out
    header = env.source / define.file
    with open(env.source / ".xtune-unit.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        original = header.read_text()
        stat = header.stat()
        lines = original.splitlines(keepends=True)
        lines[define.line - 1] = re.sub(r"\d+", str(value), lines[define.line - 1], count=1)
        try:
            header.write_text("".join(lines))
            (env.source / unit).unlink(missing_ok=True)
            run = subprocess.run(
                ["make", "-s", "-C", str(env.source), "CC=gcc-12", f"-j{os.cpu_count() or 1}", unit],
                capture_output=True,
                text=True,
            )
            if run.returncode:
                raise KernelBuildError(
                    f"building {unit} with {define.name}={value} failed:\n{run.stderr[-1500:]}"
                )
            shutil.copyfile(env.source / unit, out)
        finally:
            header.write_text(original)
            os.utime(header, ns=(stat.st_atime_ns, stat.st_mtime_ns))
            (env.source / unit).unlink(missing_ok=True)
    return out
