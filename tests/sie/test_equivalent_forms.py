"""Builds that encode the constant differently but compute the same: gcc's byte form of or/xor,
results of which only low bytes are read, and a multiplication expanded into other shifts and
adds. Each is accepted only where it is the same computation, hand-written functions show where not."""

from __future__ import annotations

import subprocess
from pathlib import Path

from xtune.sie.differ import diff_functions
from xtune.sie.disasm import disassemble
from xtune.sie.elfcode import ElfCode
from xtune.sie.lift import reduced_multiplier
from xtune.sie.liveness import result_bytes_read


def build(tmp_path: Path, *bodies: str) -> list[ElfCode]:
    """One object per body, each with the body as function `f`."""
    out = []
    for n, body in enumerate(bodies):
        src, obj = tmp_path / f"f{n}.s", tmp_path / f"f{n}.o"
        src.write_text(
            ".intel_syntax noprefix\n.text\n.globl f\n.type f, @function\nf:\n"
            + body.replace(";", "\n")
            + "\n.size f, .-f\n"
        )
        subprocess.run(["as", "--64", "-o", str(obj), str(src)], check=True)
        out.append(ElfCode(obj))
    return out


def test_byte_form_of_or_and_xor(tmp_path):
    for op in ("or", "xor"):
        [d] = diff_functions(
            build(tmp_path, f"mov rax, rdi; {op} rax, 0x40; ret", f"mov rax, rdi; {op} al, 0x80; ret")
        )
        assert not d.shape_error and [(s.index, s.values) for s in d.seeds] == [(1, [64, 128])], op
    # SF and ZF of the byte are not those of the register: read after it, the forms differ.
    [d] = diff_functions(build(tmp_path, "or rax, 0x40; sete dl; ret", "or al, 0x80; sete dl; ret"))
    assert d.shape_error
    # ah is bits 8..15, and `or eax` clears the upper half that `or al` keeps.
    for wide, byte in (("or rax, 0x200", "or ah, 2"), ("or eax, 0x40", "or al, 0x80")):
        [d] = diff_functions(build(tmp_path, f"{wide}; ret", f"{byte}; ret"))
        assert d.shape_error, byte


def test_low_bytes_read(tmp_path):
    cases = {
        "add eax, 0x40; movsx rax, al; ret": 1,  # (signed char)(n + K)
        "add eax, 0x40; mov dword ptr [rsi], eax; mov eax, 1; ret": 4,
        "add eax, 0x40; sete cl; movsx rax, al; ret": 8,  # its flags are read
        "add eax, 0x40; movsx rdx, al; ret": 8,  # rax is returned
        "add ecx, 0x40; movsx rax, cl; jmp f": 8,  # past a branch: not followed
    }
    for body, want in cases.items():
        [code] = build(tmp_path, body)
        assert result_bytes_read(disassemble(code, code.functions["f"]), 0) == want, body


def test_expanded_multiplication(tmp_path):
    x67 = "mov rax, rdi; shl rax, 5; add rax, rdi; lea rax, [rdi + rax*2]"
    x35 = "lea rax, [rdi + rdi*8]; shl rax, 2; sub rax, rdi"
    codes = build(tmp_path, f"{x67}; ret", f"{x35}; ret")
    [d] = diff_functions(codes, regions=True)
    assert d.region and not d.shape_error
    assert (d.region.start, d.region.last, d.region.reg, d.region.src) == (0, 3, "rax", "rdi")
    assert d.region.factors == [67, 35]
    [d] = diff_functions(codes)  # the kernel's engine cannot replace a run: still a shape error
    assert d.shape_error and not d.region
    # The flags of the last add are read after the run; the run leaves a second register that is read.
    store = "mov qword ptr [rsi], rcx; ret"
    for a, b in (
        (f"{x67}; sete dl; ret", f"{x35}; sete dl; ret"),
        (f"{x67}; lea rcx, [rdi + rdi*2]; {store}", f"{x35}; lea rcx, [rdi + rdi*4]; {store}"),
    ):
        [d] = diff_functions(build(tmp_path, a, b), regions=True)
        assert not d.region and "not one multiplication" in d.shape_error, a


def test_reduced_multiplier(tmp_path):
    """`imul R, X, M mod K; and R32, K - 1` for K = 64, 32, 128 (M = 2654435761): the largest build's
    multiplier serves them all, only while the masking `and` directly follows on the product."""
    values = [64, 32, 128]

    def reduced(form: str) -> int | None:
        bodies = [form.format(m=2654435761 % k, mask=k - 1) for k in values]
        [d] = diff_functions(build(tmp_path, *bodies))
        seeds = {s.index: s for s in d.seeds}
        return reduced_multiplier(d.insns, seeds[0], seeds, values)

    assert reduced("imul rax, rdi, {m}; and eax, {mask}; ret") == 2654435761 % 128
    assert reduced("imul rax, rdi, {m}; and rax, {mask}; ret") == 2654435761 % 128
    assert reduced("imul rax, rdi, {m}; and edx, {mask}; ret") is None  # another register
    assert reduced("imul rax, rdi, {m}; and al, {mask}; ret") is None  # the product's upper bits stay
    assert reduced("imul rax, rdi, {m}; mov rdx, rax; and eax, {mask}; ret") is None  # read unmasked
