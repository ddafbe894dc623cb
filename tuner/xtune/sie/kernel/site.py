"""A kernel perf-const that is a literal in the code rather than a macro: a site.

`FILE:LINE:TOKEN` names the integer literal to vary, e.g. `net/ipv4/tcp_cubic.c:439:3` for the
`3` of `ca->delay_min >> 3`; the analysis gives it a name of the user's (the scope table and the
spans file need one). The token must be a C integer literal and occur exactly once on that line
as a whole token, outside comments and strings, so the rewrite cannot touch anything else. The
literal is compiled only where its file is: the file's own objects. A header's literal would be
compiled in every unit that includes it, and a .c file that others include in theirs: both are
refused for now.
"""

from __future__ import annotations

import re

from xtune.sie.kernel.ctokens import INTEGER, line_tokens
from xtune.sie.kernel.kbuild import kbuild_units
from xtune.sie.kernel.source import Define, KernelBuildError, KernelEnv, tree_files
from xtune.sie.kernel.units import Discovery, includers

_SITE = re.compile(r"(?P<file>[^:\s]+):(?P<line>[1-9]\d*):(?P<token>\S+)")


def parse_site(text: str) -> tuple[str, int, str]:
    """(file, line, token) of `FILE:LINE:TOKEN`."""
    m = _SITE.fullmatch(text)
    if m is None:
        raise KernelBuildError(f"site {text!r}: expected FILE:LINE:TOKEN, e.g. net/ipv4/tcp_cubic.c:439:3")
    return m.group("file").removeprefix("./"), int(m.group("line")), m.group("token")


def find_site(env: KernelEnv, site: str, name: str) -> Define:
    """The site `FILE:LINE:TOKEN` of the tree as a constant called `name`, with its value."""
    file, line, token = parse_site(site)
    if not re.fullmatch(r"[A-Za-z_]\w*", name):
        raise KernelBuildError(f"site {site}: the name {name!r} is not an identifier")
    literal = INTEGER.fullmatch(token)
    if literal is None:
        raise KernelBuildError(f"{file}:{line}: the token {token!r} is not a C integer literal")
    path = env.source / file
    if not path.is_file():
        raise KernelBuildError(f"{file}: no such file in the kernel tree {env.source}")
    if not file.endswith(".c"):
        raise KernelBuildError(
            f"{file}:{line}: a site in a header is compiled in every unit that includes it: not "
            "supported yet (give the line of a .c file, or a #define with --kernel)"
        )
    text = path.read_text(errors="replace")
    if line > len(text.splitlines()):
        raise KernelBuildError(f"{file}:{line}: the file has {len(text.splitlines())} lines")
    tokens = line_tokens(text, line)
    hits = [tok for _, tok in tokens if tok == token]
    if len(hits) != 1:
        shown = " ".join(tok for _, tok in tokens) or "(no code)"
        raise KernelBuildError(
            f"{file}:{line}: the token {token!r} occurs {len(hits)} times as a C token on this line "
            f"(exactly once is needed; its tokens: {shown})"
        )
    digits = literal.group(1)
    base = 16 if digits[:2] in ("0x", "0X") else 8 if digits.startswith("0") else 10
    value = int(digits, base)
    return Define(file, line, name, value, token=token)


def site_units(env: KernelEnv, define: Define) -> Discovery:
    """The units compiling the site: its file's own objects. A .c file that other files include
    is refused (its literal would be compiled there too)."""
    by_source = kbuild_units(env)
    units = by_source.get(define.file, [])
    if not units:
        raise KernelBuildError(f"{define.file}: this kernel's config compiles no unit from it")
    files = [f for f in tree_files(env) if f.endswith((".c", ".h"))]
    others = sorted(includers(env.source, files, {define.file})[define.file])
    if others:
        raise KernelBuildError(
            f"{define.file} is included by {', '.join(others[:4])}: the site is compiled there "
            "too, which a site does not follow yet"
        )
    return Discovery(units=sorted(units, key=lambda u: u.object), names={define.name})
