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
from xtune.sie.kernel.ctokens import INTEGER, replace_token


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
    expression: str = ""  # the definition's body when it is not a literal (e.g. HPAGE_PMD_NR)
    token: str = ""  # a site (site.py): the integer literal on `line` that is varied, not a #define


def in_this_arch(path: str) -> bool:
    """A file an x86 unit of this kernel can compile or include: not another architecture's,
    nor a host tool's."""
    if path.startswith(("tools/", "scripts/", "Documentation/")):
        return False
    return not (path.startswith("arch/") and not path.startswith("arch/x86/"))


def tree_files(env: KernelEnv) -> list[str]:
    """Every .c, .h and .S file of the tree (cached per release)."""
    cache = env.cache / "tree-files.txt"
    if not cache.exists():
        found = sorted(
            str(p.relative_to(env.source)) for ext in ("c", "h", "S") for p in env.source.rglob(f"*.{ext}")
        )
        cache.write_text("\n".join(found) + "\n")
    return cache.read_text().split()


def grep_files(src: Path, files: list[str], names: set[str]) -> list[str]:
    """The files among `files` in which any of `names` occurs as a word (comments included)."""
    if not names:
        return []
    patterns = [a for n in sorted(names) for a in ("-e", n)]
    run = subprocess.run(
        ["xargs", "-0", "-P2", "-n2000", "grep", "-lwF", *patterns, "--"],
        input="\0".join(files),
        cwd=src,
        capture_output=True,
        text=True,
    )
    if run.returncode not in (0, 123):  # 123: some grep found nothing
        raise KernelBuildError(f"grep over {src} failed: {run.stderr.strip()[-300:]}")
    return sorted(set(run.stdout.split()))


def build_unit(env: KernelEnv, define: Define, unit: str, value: int, fresh: bool = False) -> Path:
    """`unit` compiled with the constant set to `value` (cached unless `fresh`)."""
    out_dir = env.cache / "units"
    out_dir.mkdir(parents=True, exist_ok=True)
    # the define's place (a site's token too) is part of the key: another place builds other code
    where = ":".join([define.file, str(define.line), *([define.token] if define.token else [])])
    where = where.replace("/", "_")
    label = f"@{where}" if define.token else f"{define.name}@{where}"  # a site: whatever its name
    out = out_dir / f"{unit.replace('/', '_')}.{label}={value}.o"
    if out.exists() and not fresh:
        return out
    header = env.source / define.file
    with open(env.source / ".xtune-unit.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        original = header.read_text()
        stat = header.stat()
        try:
            header.write_text(_with_value(original, define, value))
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


def _with_value(text: str, define: Define, value: int) -> str:
    """The text of the define's file with the constant set to `value`."""
    if define.token:
        literal = INTEGER.fullmatch(define.token)
        suffix = literal.group(2) or "" if literal else ""  # keep a u/l suffix's type
        return replace_token(text, define.line, define.token, f"{value}{suffix}")
    lines = text.splitlines(keepends=True)
    lines[define.line - 1] = define_line(lines[define.line - 1], define.name, value)
    return "".join(lines)


def define_line(line: str, name: str, value: int) -> str:
    """The `#define` line of `name` with `value`: the first number after the name (which may
    hold digits itself, as I2C_...), or the whole body when it is an expression of other macros."""
    after = line.index(name) + len(name)
    body = line[after:]
    if re.match(r"\s*\(?\s*\d", body):
        return line[:after] + re.sub(r"\d+", str(value), body, count=1)
    comment = re.search(r"/\*|//", body)
    keep = body[comment.start() :] if comment else "\n"
    return f"{line[:after]}\t({value}){' ' if comment else ''}{keep}"
