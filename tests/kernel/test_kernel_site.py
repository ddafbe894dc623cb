"""Kernel sites: a literal of a .c file as a perf-const (FILE:LINE:TOKEN and a name).

The token rules on a small tree (no kernel needed), then the two shift counts of Debian's 6.1
TCP code, found by their text in the prepared tree (host only, no guest)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from xtune import paths
from xtune.sie.kernel import analyze as kernel
from xtune.sie.kernel import ctokens
from xtune.sie.kernel.site import find_site, parse_site
from xtune.sie.kernel.source import Define, KernelBuildError, KernelEnv, _with_value, build_unit
from xtune.sie.scope import ScopeTable

CODE = """static int f(struct s *ca)
{
	/* >> 3 in a comment, "3" in a string */ return ca->x >> 3 /* 3
	3 */ ? g("3", 3) : 0x3 + 3UL + 3 + 3;
}
"""


def small_tree(tmp_path: Path) -> KernelEnv:
    (tmp_path / "net").mkdir()
    (tmp_path / "net" / "f.c").write_text(CODE)
    (tmp_path / "net" / "f.h").write_text("#define F (x >> 3)\n")
    return KernelEnv("r", "p", "v", tmp_path / "vmlinuz", tmp_path, tmp_path)


def test_tokens_outside_comments_and_strings() -> None:
    assert [t for _, t in ctokens.line_tokens(CODE, 3)] == ["return", "ca", "-", ">", "x", ">", ">", "3"]
    assert [t for _, t in ctokens.line_tokens(CODE, 4)].count("3") == 3  # 0x3 and 3UL are other tokens
    assert ctokens.replace_token(CODE, 3, "3", "7").splitlines()[2].endswith("ca->x >> 7 /* 3")
    with pytest.raises(ValueError, match="occurs 3 times"):
        ctokens.replace_token(CODE, 4, "3", "7")


def test_a_site_is_one_integer_token_of_a_c_line(tmp_path: Path) -> None:
    env = small_tree(tmp_path)
    define = find_site(env, "net/f.c:3:3", "SHIFT")
    assert (define.file, define.line, define.name, define.value, define.token) == (
        "net/f.c",
        3,
        "SHIFT",
        3,
        "3",
    )
    assert find_site(env, "net/f.c:4:3UL", "S").value == 3
    assert find_site(env, "net/f.c:4:0x3", "S").value == 3
    rewritten = _with_value(CODE, Define("net/f.c", 4, "S", 3, token="3UL"), 12)
    assert "0x3 + 12UL + 3 + 3" in rewritten and rewritten.count("\n") == CODE.count("\n")


@pytest.mark.parametrize(
    ("site", "error"),
    [
        ("net/f.c:4:3", r"net/f.c:4: the token '3' occurs 3 times as a C token on this line .*0x3 \+ 3UL"),
        ("net/f.c:3:x", r"net/f.c:3: the token 'x' is not a C integer literal"),
        ("net/f.c:2:3", r"net/f.c:2: the token '3' occurs 0 times"),
        ("net/f.c:9:3", r"net/f.c:9: the file has 5 lines"),
        ("net/f.h:1:3", r"net/f.h:1: a site in a header is compiled in every unit that includes it"),
        ("net/g.c:1:3", r"net/g.c: no such file"),
        ("net/f.c:3", r"expected FILE:LINE:TOKEN"),
    ],
)
def test_bad_sites_are_refused_naming_file_and_line(tmp_path: Path, site: str, error: str) -> None:
    with pytest.raises(KernelBuildError, match=error):
        find_site(small_tree(tmp_path), site, "SHIFT")


def test_parse_site() -> None:
    assert parse_site("./net/ipv4/tcp_cubic.c:439:3") == ("net/ipv4/tcp_cubic.c", 439, "3")


@pytest.fixture(scope="module")
def env() -> KernelEnv:
    return KernelEnv.fetch()


def line_of(env: KernelEnv, file: str, text: str) -> int:
    """The one line of `file` in the prepared tree holding `text`."""
    lines = [n for n, line in enumerate((env.source / file).read_text().splitlines(), 1) if text in line]
    assert len(lines) == 1, f"{file}: {text!r} on lines {lines}"
    return lines[0]


# The two shift counts of the TCP code, by their text: (name, file, text, token, function, insn).
SHIFTS = [
    ("HYSTART_DELAY_MIN_SHIFT", "net/ipv4/tcp_cubic.c", "ca->delay_min >> 3", "3",
     "cubictcp_acked", "shr eax, 3"),
    ("RACK_MIN_RTT_SHIFT", "net/ipv4/tcp_recovery.c", "tcp_min_rtt(tp) >> 2", "2",
     "tcp_rack_detect_loss", "shr r13d, 2"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "file", "text", "token", "function", "insn"), SHIFTS)
def test_tcp_shift_counts_are_shift_spans(
    env: KernelEnv, name: str, file: str, text: str, token: str, function: str, insn: str
) -> None:
    """Each shift count compiles to one `shr reg, imm8` in one function (IV = V) whose flags no
    one reads: a `shift` span on the instruction, the count bounding V to [1, 31]."""
    site = f"{file}:{line_of(env, file, text)}:{token}"
    const = kernel.analyze_const(env, name, fresh=False, site=site)
    assert const.source.token == token and const.source.file == file
    assert const.refusals == []
    [span] = const.spans
    assert span.function == function and span.update.kind == "shift" and span.patch == "int3"
    assert (span.state.a, span.state.b, span.state.width, span.update.v0) == (1, 0, 4, int(token))
    assert insn.split(",")[0].split()[1] in span.state.text  # the shifted register
    assert (const.min_value, const.max_value) == (1, 31)


def test_site_builds_are_keyed_by_file_line_and_token(env: KernelEnv) -> None:
    line = line_of(env, "net/ipv4/tcp_cubic.c", "ca->delay_min >> 3")
    define = find_site(env, f"net/ipv4/tcp_cubic.c:{line}:3", "ANY_NAME")
    out = build_unit(env, define, "net/ipv4/tcp_cubic.o", 3)
    assert out.name == f"net_ipv4_tcp_cubic.o.@net_ipv4_tcp_cubic.c:{line}:3=3.o"
    assert "ca->delay_min >> 3" in (env.source / "net/ipv4/tcp_cubic.c").read_text()  # restored


def test_analyze_kernel_site_command(env: KernelEnv, tmp_path: Path) -> None:
    """`xtune analyze --kernel-site NAME=FILE:LINE:TOKEN` writes the scope table and the spans
    file (a `shift` line); a site without a name, or a token not on its line, is an error naming it."""
    xtune = str(paths.ROOT / ".venv/bin/xtune")
    line = line_of(env, "net/ipv4/tcp_cubic.c", "ca->delay_min >> 3")
    scope, spans = tmp_path / "scope.json", tmp_path / "spans.txt"
    site = f"HYSTART_DELAY_MIN_SHIFT=net/ipv4/tcp_cubic.c:{line}:3"
    run = subprocess.run(
        [xtune, "analyze", "--kernel-site", site, "-o", str(scope), "--xsie", str(spans)],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "span cubictcp_acked+0x1de..0x1e1 [xsie shift rax before +0x1de]" in run.stdout
    const = ScopeTable.from_json(scope.read_text()).const("HYSTART_DELAY_MIN_SHIFT")
    assert (const.source.file, const.source.line, const.source.token) == ("net/ipv4/tcp_cubic.c", line, "3")
    lines = spans.read_text().splitlines()
    assert lines[1:] == [
        "const 0 HYSTART_DELAY_MIN_SHIFT",
        "span 0 shift cubictcp_acked 0x1de c1e803 0x1de ax 32 1 0 3 0",
        f"safe 0 cubictcp_acked {','.join(hex(e) for e in const.spans[0].exits)}",
        "range 0 1 31",
    ]
    for bad, said in [
        (f"net/ipv4/tcp_cubic.c:{line}:3", "expected NAME=FILE:LINE:TOKEN"),
        (f"S=net/ipv4/tcp_cubic.c:{line}:4", f"net/ipv4/tcp_cubic.c:{line}: the token '4' occurs 0 times"),
    ]:
        run = subprocess.run(
            [xtune, "analyze", "--kernel-site", bad, "-o", str(tmp_path / "bad.json")],
            capture_output=True,
            text=True,
        )
        assert run.returncode == 2 and said in run.stderr, run.stderr
        assert not (tmp_path / "bad.json").exists()
