"""The running process being drilled: its executable, the ELF files it maps (in map order, the
executable first, as the dynamic linker searches them) and its memory, read to check that a
probe left no trace."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from xtune.drill.image import DrillError, ElfImage, Symbol


@dataclass
class Mapping:
    start: int
    end: int
    offset: int
    path: str


@dataclass
class Process:
    pid: int
    images: dict[str, ElfImage] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.pid <= 0 or not Path(f"/proc/{self.pid}").is_dir():
            raise DrillError(f"no process with pid {self.pid}")
        if self.pid == os.getpid():
            raise DrillError(f"pid {self.pid} is this xtune: drill another process")
        try:
            self.exe = os.readlink(f"/proc/{self.pid}/exe")
        except OSError as e:
            raise DrillError(f"pid {self.pid}: cannot read its executable (/proc/{self.pid}/exe): {e}") from e
        if self.exe.endswith(" (deleted)"):
            raise DrillError(f"pid {self.pid}: its executable {self.exe} was deleted; uprobes need the file")
        self.maps = self._read_maps()
        self.files = list(dict.fromkeys([self.exe] + [m.path for m in self.maps]))

    def _read_maps(self) -> list[Mapping]:
        out = []
        for line in Path(f"/proc/{self.pid}/maps").read_text().splitlines():
            parts = line.split(maxsplit=5)
            if len(parts) < 6 or not parts[5].startswith("/") or parts[5].endswith(" (deleted)"):
                continue
            start, end = (int(v, 16) for v in parts[0].split("-"))
            out.append(Mapping(start, end, int(parts[2], 16), parts[5]))
        return out

    def alive(self) -> bool:
        return Path(f"/proc/{self.pid}").is_dir()

    def image(self, path: str) -> ElfImage:
        if path not in self.images:
            self.images[path] = ElfImage(self.path_of(path))
        return self.images[path]

    def path_of(self, path: str) -> str:
        """The file as this process sees it (through its root when it runs in another mount namespace)."""
        root = f"/proc/{self.pid}/root"
        return path if os.path.realpath(root) == "/" else root + path

    def defining(self, name: str) -> tuple[str, Symbol] | None:
        """The first mapped ELF file that defines function `name`, as the dynamic linker binds it."""
        for path in self.files:
            try:
                image = self.image(path)
            except DrillError:
                continue  # a mapped data file, not an ELF object
            if image.by_name.get(name):
                return path, image.function(name)
        return None

    def read_code(self, path: str, sym: Symbol, size: int) -> bytes | None:
        """`size` bytes at the start of `sym` in the process's memory (None when that page is not mapped)."""
        off = self.image(path).file_offset(sym.vaddr)
        for m in self.maps:
            if m.path == path and m.offset <= off < m.offset + (m.end - m.start):
                with open(f"/proc/{self.pid}/mem", "rb") as mem:
                    mem.seek(m.start + off - m.offset)
                    return mem.read(size)
        return None
