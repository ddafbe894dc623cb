"""What Debian's config builds: every object of vmlinux and of the modules, from kbuild itself.

`make -n vmlinux modules` in the prepared tree evaluates the kernel's own Makefiles with Debian's
config and prints the command of every object it would compile (`CC`, `CC [M]`, `AS`, `AS [M]`)
and the object list of every module (its `.mod` file). That is the set of translation units of
this kernel; a file it never compiles is not one, whatever its Kconfig symbol is called. The
result is checked against the image's modules.order and cached per release (a few seconds of
`make` the first time).
"""

from __future__ import annotations

import fcntl
import json
import re
import subprocess
from dataclasses import dataclass

from xtune.sie.kernel.source import KernelBuildError, KernelEnv

_COMPILE = re.compile(r"echo '  (CC|AS)( \[M\])? +(\S+\.o)'")
_SOURCE = re.compile(r" -c -o (\S+\.o) (\S+\.[cS])\b")
_MODULE = re.compile(
    r"printf '%s\\n' ([^|]*)\| awk '!x\[\$0\]\+\+ \{ print\(\"([^\"]*)\"\$0\) \}' > (\S+)\.mod"
)
_HOST_TOOLS = ("scripts/", "tools/", "arch/x86/tools/")


@dataclass(frozen=True)
class Unit:
    object: str  # x/y.o, relative to the tree
    source: str  # x/y.c or x/y.S
    module: str  # x/m.ko when built as (part of) a module, "" when in vmlinux


def kbuild_units(env: KernelEnv) -> dict[str, list[Unit]]:
    """The units of this kernel by source file (a file may be compiled into several objects),
    cached in $XTUNE_CACHE/kernel/<release>/."""
    cache = env.cache / "kbuild-units.json"
    if cache.exists():
        return _by_source([Unit(**u) for u in json.loads(cache.read_text())])
    with open(env.source / ".xtune-unit.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # no unit build rewrites a define meanwhile
        stale = [
            str(p.relative_to(env.source))
            for p in env.source.rglob("*.o")
            if not str(p.relative_to(env.source)).startswith(_HOST_TOOLS)
        ]
        if stale:
            # make -n lists only what is out of date: a built object would be missing
            raise KernelBuildError(f"{env.source} holds built objects ({', '.join(stale[:5])}): remove them")
        run = subprocess.run(
            ["make", "-n", "-k", "-C", str(env.source), "CC=gcc-12", "vmlinux", "modules"],
            capture_output=True,
            text=True,
        )
    units = parse_dry_run(run.stdout)
    modules = {u.module for u in units if u.module}
    order = env.cache / "root/lib/modules" / env.release / "modules.order"
    shipped = {line.removeprefix("kernel/") for line in order.read_text().split()}
    if modules != shipped or not any(u.object == "init/main.o" for u in units):
        raise KernelBuildError(
            f"kbuild's dry run of {env.source} does not match {order}: "
            f"{len(modules - shipped)} module(s) only in the tree's build, {len(shipped - modules)} only "
            f"in the image (first: {sorted(modules ^ shipped)[:3]}); make said: {run.stderr.strip()[-300:]}"
        )
    cache.write_text(json.dumps([u.__dict__ for u in units]))
    return _by_source(units)


def _by_source(units: list[Unit]) -> dict[str, list[Unit]]:
    out: dict[str, list[Unit]] = {}
    for u in units:
        out.setdefault(u.source, []).append(u)
    return out


def parse_dry_run(out: str) -> list[Unit]:
    """The units compiled in the output of kbuild's `make -n`."""
    module_of = {}
    for objects, directory, mod in _MODULE.findall(out):
        module_of.update({directory + o: mod + ".ko" for o in objects.split()})
    units = {}  # by object
    for command in out.split("\n"):
        compiled = _COMPILE.search(command)
        source = _SOURCE.search(command)
        if not compiled or not source or source.group(1) != compiled.group(3):
            continue
        obj = compiled.group(3)
        module = module_of.get(obj, "")
        if bool(compiled.group(2)) != bool(module):
            raise KernelBuildError(f"kbuild's dry run: {compiled.group(0)} but {obj} is in {module!r}")
        units[obj] = Unit(obj, source.group(2), module)
    return list(units.values())
