"""Does a function compiled from one translation unit match the distro kernel's bytes?

Debian's vmlinuz carries no symbol table (System.map is a stub), so the function is looked up by
content: the vmlinux inside vmlinuz (scripts/extract-vmlinux of the same tree) is searched for the
unit's bytes, with relocated bytes and the `call __fentry__` site as wildcards. One match means the
per-unit build reproduces the distro code; the guest then checks the span bytes at the kallsyms
address again before any probe is placed.
"""

from __future__ import annotations

import io
import subprocess
from pathlib import Path

from elftools.elf.elffile import ELFFile

from xtune.sie.elfcode import Function
from xtune.sie.kernel.source import KernelBuildError, KernelEnv


def vmlinux(env: KernelEnv) -> bytes:
    out = env.cache / "vmlinux"
    if not out.exists():
        script = env.source / "scripts" / "extract-vmlinux"
        with open(f"{out}.tmp", "wb") as f:
            run = subprocess.run(
                [str(script), str(env.vmlinuz)], stdout=f, stderr=subprocess.PIPE, text=False
            )
        if run.returncode:
            raise KernelBuildError(f"extract-vmlinux failed: {run.stderr.decode(errors='replace')[-500:]}")
        Path(f"{out}.tmp").rename(out)
    return out.read_bytes()


def build_id(image: bytes) -> str:
    """The GNU build id of a vmlinux (what the running kernel shows in /sys/kernel/notes)."""
    for sec in ELFFile(io.BytesIO(image)).iter_sections():
        if sec.header.sh_type == "SHT_NOTE":
            for note in sec.iter_notes():  # type: ignore[attr-defined]  # a NoteSection
                if note.n_name == "GNU" and note.n_type == "NT_GNU_BUILD_ID":  # not Xen's type 3
                    return note.n_desc
    raise KernelBuildError("the distro vmlinux has no GNU build id note")


def matches(image: bytes, fn: Function) -> int:
    """How many places of `image` hold `fn`'s bytes (relocations and the fentry call masked)."""
    wild = set(fn.relocs)
    if fn.relocs.get(1, "").startswith("__fentry__"):
        wild |= set(range(5))
    # Anchor on the longest run of fixed bytes, then compare the rest at each hit.
    best, start, run_start = (0, 0), 0, None
    for i in range(len(fn.data) + 1):
        fixed = i < len(fn.data) and i not in wild
        if fixed and run_start is None:
            run_start = i
        elif not fixed and run_start is not None:
            if i - run_start > best[1] - best[0]:
                best = (run_start, i)
            run_start = None
    anchor = fn.data[best[0] : best[1]]
    if len(anchor) < 8:
        return 0
    count, pos = 0, image.find(anchor)
    while pos >= 0:
        start = pos - best[0]
        if start >= 0 and all(
            i in wild or image[start + i] == b for i, b in enumerate(fn.data) if start + i < len(image)
        ):
            count += 1
        pos = image.find(anchor, pos + 1)
    return count
