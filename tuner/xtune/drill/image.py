"""An ELF file as the drill needs it: function symbols with their bounds and bytes, and which
imported symbol each PLT stub or GOT slot stands for."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import capstone as cs
from capstone import x86_const as x
from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile
from elftools.elf.relocation import RelocationSection
from elftools.elf.sections import SymbolTableSection

PLT_SECTIONS = (".plt", ".plt.sec", ".plt.got")
STUB_SIZE = 16  # every x86-64 PLT flavour (lazy, IBT .plt.sec, .plt.got) uses 16-byte entries

_MD = cs.Cs(cs.CS_ARCH_X86, cs.CS_MODE_64)
_MD.detail = True


class DrillError(Exception):
    """Input the drill cannot work on: the message names what and where."""


@dataclass(frozen=True)
class Symbol:
    name: str
    vaddr: int
    size: int
    ifunc: bool  # an IFUNC's code is its resolver; the function run is chosen at load time


class ElfImage:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            with open(self.path, "rb") as f:
                self._read(ELFFile(f))
        except (OSError, ELFError) as e:
            raise DrillError(f"{self.path}: cannot read as an ELF file: {e}") from e

    def _read(self, elf: ELFFile) -> None:
        if elf["e_machine"] != "EM_X86_64":
            raise DrillError(f"{self.path}: not an x86-64 ELF file ({elf['e_machine']})")
        self.has_symtab = isinstance(elf.get_section_by_name(".symtab"), SymbolTableSection)
        self.by_name: dict[str, list[Symbol]] = {}
        self.by_addr: dict[int, Symbol] = {}
        for table in (".symtab", ".dynsym"):
            sec = elf.get_section_by_name(table)
            if not isinstance(sec, SymbolTableSection):
                continue
            for s in sec.iter_symbols():
                kind = s["st_info"]["type"]
                if kind not in ("STT_FUNC", "STT_LOOS", "STT_GNU_IFUNC") or not s.name or not s["st_size"]:
                    continue
                if s["st_shndx"] == "SHN_UNDEF":
                    continue
                sym = Symbol(s.name.split("@")[0], s["st_value"], s["st_size"], kind != "STT_FUNC")
                same = self.by_name.setdefault(sym.name, [])
                if sym not in same:
                    same.append(sym)
                self.by_addr.setdefault(sym.vaddr, sym)
        self._segments = [
            (s["p_vaddr"], s["p_filesz"], s["p_offset"])
            for s in elf.iter_segments()
            if s["p_type"] == "PT_LOAD"
        ]
        self._raw = self.path.read_bytes()
        self.slot_import = _slot_imports(elf)  # GOT slot address -> imported symbol name
        self.plt = {  # section name -> (start, end)
            sec.name: (sec["sh_addr"], sec["sh_addr"] + sec["sh_size"])
            for sec in elf.iter_sections()
            if sec.name in PLT_SECTIONS
        }

    def function(self, name: str) -> Symbol:
        """The one function of this name, or DrillError saying why there is none."""
        found = self.by_name.get(name, [])
        if any(s.ifunc for s in found):  # versions of one name, one an IFUNC (memcpy in glibc)
            return next(s for s in found if s.ifunc)
        if len(found) == 1:
            return found[0]
        if found:
            where = ", ".join(f"{s.vaddr:#x}" for s in found)
            raise DrillError(f"{self.path}: {len(found)} functions are named {name!r} ({where}): ambiguous")
        if not self.has_symtab:
            raise DrillError(
                f"{self.path}: no function {name!r}: the file is stripped (no .symtab) and its .dynsym "
                "does not export it; a build with symbols (or its debug file's .symtab) is needed"
            )
        raise DrillError(f"{self.path}: no function {name!r} in its symbol table")

    def file_offset(self, vaddr: int) -> int:
        for start, size, offset in self._segments:
            if start <= vaddr < start + size:
                return offset + vaddr - start
        raise DrillError(f"{self.path}: address {vaddr:#x} is in no loaded segment")

    def code(self, sym: Symbol) -> bytes:
        off = self.file_offset(sym.vaddr)
        return self._raw[off : off + sym.size]

    def import_at(self, vaddr: int) -> str | None:
        """The imported symbol a call to `vaddr` reaches when `vaddr` is a PLT stub, else None."""
        for start, end in self.plt.values():
            if start <= vaddr < end:
                stub = vaddr - (vaddr - start) % STUB_SIZE
                return self._stub_target(stub)
        return None

    def _stub_target(self, stub: int) -> str | None:
        data = self._raw[self.file_offset(stub) : self.file_offset(stub) + STUB_SIZE]
        for ins in _MD.disasm(data, stub):
            slot = got_slot(ins)
            if slot is not None:
                return self.slot_import.get(slot)
        return None


def got_slot(ins: cs.CsInsn) -> int | None:
    """The address a `jmp/call [rip+X]` reads its target from, else None."""
    if len(ins.operands) != 1 or ins.operands[0].type != x.X86_OP_MEM:
        return None
    mem = ins.operands[0].mem
    if mem.base != x.X86_REG_RIP or mem.index:
        return None
    return int(ins.address + ins.size + mem.disp)


def _slot_imports(elf: ELFFile) -> dict[int, str]:
    """Address of each GOT slot that a dynamic relocation fills with a named symbol's address."""
    out: dict[int, str] = {}
    for sec in elf.iter_sections():
        if not isinstance(sec, RelocationSection) or not sec["sh_link"]:
            continue
        symtab = elf.get_section(sec["sh_link"])
        if not isinstance(symtab, SymbolTableSection) or symtab.name != ".dynsym":
            continue
        for r in sec.iter_relocations():
            if r["r_info_sym"]:
                name = symtab.get_symbol(r["r_info_sym"]).name
                if name:
                    out[r["r_offset"]] = name.split("@")[0]
    return out
