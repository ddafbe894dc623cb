"""Functions of an x86-64 ELF file (executable, shared object or relocatable object) as bytes."""

from __future__ import annotations

import bisect
import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile
from elftools.elf.relocation import RelocationSection
from elftools.elf.sections import NoteSection, SymbolTableSection

SHF_EXECINSTR = 0x4
# Sections whose bytes a constant may also live in (a folded 1/K double, a table of K-derived values).
# `.rodata*`, `.data*` (`.data.rel.ro` too), their large-model `.l*` forms and TLS `.tdata`.
DATA_SECTIONS = re.compile(r"^\.(l?rodata|l?data|tdata)(1|\..*)?$")


@dataclass
class Function:
    name: str
    section: str
    vaddr: int  # ELF address (section-relative in a .o)
    data: bytes
    # Offsets (function-relative) of bytes that a relocation fills in, with the relocation's symbol.
    relocs: dict[int, str] = field(default_factory=dict)

    def masked(self, off: int, size: int) -> bool:
        return any(o in self.relocs for o in range(off, off + size))


@dataclass
class DataSection:
    name: str
    vaddr: int  # ELF address (0 in a .o)
    data: bytes
    relocs: set[int] = field(default_factory=set)  # section offsets a relocation fills in

    def masked(self) -> bytes:
        return bytes(0 if i in self.relocs else b for i, b in enumerate(self.data))


class ElfCode:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        raw = self.path.read_bytes()
        self.sha256 = hashlib.sha256(raw).hexdigest()
        with open(self.path, "rb") as f:
            elf = ELFFile(f)
            if elf["e_machine"] != "EM_X86_64":
                raise ValueError(f"{self.path}: not an x86-64 ELF file ({elf['e_machine']})")
            self.elf_type = {"ET_EXEC": "EXEC", "ET_DYN": "DYN", "ET_REL": "REL"}.get(elf["e_type"], "?")
            loads = [s["p_vaddr"] for s in elf.iter_segments() if s["p_type"] == "PT_LOAD"]
            self.load_vaddr = (min(loads) & ~0xFFF) if loads else 0
            # Position-independent and without a program interpreter: a shared library, not a PIE.
            self.shared_library = self.elf_type == "DYN" and not any(
                s["p_type"] == "PT_INTERP" for s in elf.iter_segments()
            )
            self.build_id = _build_id(elf)
            self.functions: dict[str, Function] = {}
            self.objects: dict[str, int] = {}  # data objects: name -> size
            self.global_objects: set[str] = set()  # data objects other units may name
            self._symbols: list[tuple[int, int, str]] = []  # (addr, size, name), any symbol with a size
            self._read_functions(elf)
            self.data_sections = _data_sections(elf)
        self._symbols.sort()
        self._starts = [s[0] for s in self._symbols]

    def _read_functions(self, elf: ELFFile) -> None:
        symtab = elf.get_section_by_name(".symtab")
        if not isinstance(symtab, SymbolTableSection):
            raise ValueError(f"{self.path}: no symbol table (stripped?): cannot find functions")
        rel = self.elf_type == "REL"
        relocs_by_sec = _relocations(elf, symtab) if rel else {}
        for sym in symtab.iter_symbols():
            shndx = sym["st_shndx"]
            if not isinstance(shndx, int) or not sym.name:
                continue
            sec = elf.get_section(shndx)
            if sym["st_size"]:
                self._symbols.append((sym["st_value"], sym["st_size"], sym.name))
            if sym["st_info"]["type"] == "STT_OBJECT":
                self.objects[sym.name] = sym["st_size"]
                if sym["st_info"]["bind"] != "STB_LOCAL":
                    self.global_objects.add(sym.name)
            if sym["st_info"]["type"] != "STT_FUNC" or not sym["st_size"]:
                continue
            if not sec["sh_flags"] & SHF_EXECINSTR:
                continue
            off = sym["st_value"] - (0 if rel else sec["sh_addr"])
            data = sec.data()[off : off + sym["st_size"]]
            fn_relocs = {
                o - off: name
                for o, name in relocs_by_sec.get(sec.name, {}).items()
                if off <= o < off + sym["st_size"]
            }
            # Local functions of one name (static in different files) get a unique key.
            key = sym.name if sym.name not in self.functions else f"{sym.name}@{sym['st_value']:x}"
            self.functions[key] = Function(key, sec.name, sym["st_value"], data, fn_relocs)

    def symbol_at(self, addr: int) -> tuple[int, int, str] | None:
        """(start, size, name) of the sized symbol holding `addr`."""
        i = bisect.bisect_right(self._starts, addr) - 1
        if i >= 0 and addr < self._symbols[i][0] + self._symbols[i][1]:
            return self._symbols[i]
        return None

    def symbolize(self, addr: int) -> str:
        """`name+off` for an address inside a sized symbol, else the raw address."""
        sym = self.symbol_at(addr)
        return f"{sym[2]}+{addr - sym[0]}" if sym else f"{addr:#x}"


def _data_sections(elf: ELFFile) -> dict[str, DataSection]:
    """`.rodata*`, `.data*` (`.data.rel.ro` too) with the bytes relocations fill in: those of the
    section's own relocation table in a .o, of the dynamic relocations in an executable."""
    out = {
        sec.name: DataSection(sec.name, sec["sh_addr"], sec.data())
        for sec in elf.iter_sections()
        if DATA_SECTIONS.match(sec.name) and sec["sh_type"] == "SHT_PROGBITS"
    }
    rel = elf["e_type"] == "ET_REL"
    for rs in elf.iter_sections():
        if not isinstance(rs, RelocationSection):
            continue
        if rel:  # offsets into the section the table applies to
            ds = out.get(elf.get_section(rs["sh_info"]).name)
            targets = [(ds, 0)] if ds else []
        else:  # addresses
            targets = [(ds, ds.vaddr) for ds in out.values()]
        for r in rs.iter_relocations():
            size = 8 if r["r_info_type"] in (1, 8, 24) else 4  # R_X86_64_64, _RELATIVE, _PC64
            for ds, base in targets:
                off = r["r_offset"] - base
                if 0 <= off < len(ds.data):
                    ds.relocs.update(range(off, off + size))
    return out


def file_build_id(path: str | Path) -> str:
    """The GNU build id of an ELF file; "" when it has none or is no ELF file."""
    try:
        with open(path, "rb") as f:
            return _build_id(ELFFile(f))
    except (OSError, ELFError):
        return ""


def _build_id(elf: ELFFile) -> str:
    for sec in elf.iter_sections():
        if isinstance(sec, NoteSection):
            for note in sec.iter_notes():
                if note["n_type"] == "NT_GNU_BUILD_ID":
                    return str(note["n_desc"])
    return ""


def _relocations(elf: ELFFile, symtab: SymbolTableSection) -> dict[str, dict[int, str]]:
    """Per text section: every byte offset a relocation writes, with `symbol+addend`."""
    out: dict[str, dict[int, str]] = {}
    for sec in elf.iter_sections():
        if not isinstance(sec, RelocationSection):
            continue
        target = elf.get_section(sec["sh_info"])
        if not target["sh_flags"] & SHF_EXECINSTR:
            continue
        m = out.setdefault(target.name, {})
        for r in sec.iter_relocations():
            sym = symtab.get_symbol(r["r_info_sym"])
            name = sym.name or elf.get_section(sym["st_shndx"]).name if sym else "?"
            addend = r["r_addend"] if r.is_RELA() else 0
            size = 8 if r["r_info_type"] in (1, 24) else 4  # R_X86_64_64, R_X86_64_PC64
            for o in range(r["r_offset"], r["r_offset"] + size):
                m[o] = f"{name}{addend:+d}"
    return out
