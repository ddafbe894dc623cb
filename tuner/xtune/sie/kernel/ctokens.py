"""Where a C or assembly file uses given names, and what each use is part of.

A small C lexer (comments and literals dropped, continued lines joined) with brace tracking at
file scope: enough to tell, for each use of a name, whether it sits in a `#define` body (the macro
then uses it), a `#if` condition, a function body (the function uses it) or a declaration at file
scope (a type, an array size, an initializer). The unit discovery (units.py) follows names from
header to header with it; anything it cannot attribute to a macro or a function is reported as
such, never guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_LEXEMES = re.compile(
    r"""(?P<comment>/\*.*?\*/|//(?:\\\n|[^\n])*)
    |(?P<literal>"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')
    |(?P<newline>\n)""",
    re.S | re.X,
)
_TOKEN = re.compile(r"[A-Za-z_]\w*|\d\w*|\S")
# A C integer literal: decimal, octal or hex, with an optional unsigned/long suffix.
INTEGER = re.compile(r"(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)([uU](?:ll|LL|l|L)?|(?:ll|LL|l|L)[uU]?)?")
# Attribute macros with arguments, before or after a function's parameters (`f(...) __acquires(l)`).
_ATTRIBUTES = {"__attribute__", "__attribute", "__acquires", "__releases", "__must_hold", "__cond_acquires"}


@dataclass(frozen=True)
class Use:
    line: int
    name: str  # the name used
    # "macro", "if", "function", "static-function", "declaration", "code" (assembly) or
    # "signature": `NAME(` at file scope, a function declared or defined, or a macro invoked;
    # "unbalanced": the file's braces do not balance, its uses cannot be attributed
    kind: str
    owner: str  # the macro or function that uses it ("" for if/declaration/code)


def logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, text) of each line with comments and literals blanked and `\\`
    continuations joined: what the preprocessor sees."""

    def blank(m: re.Match[str]) -> str:
        if m.group("newline"):
            return "\n"
        if m.group("literal"):
            return '""'
        return " " + "\n" * m.group(0).count("\n")  # a comment: keep the line count

    text = _LEXEMES.sub(blank, text.replace("\\\r\n", "\\\n"))
    out: list[tuple[int, str]] = []
    start, parts = 1, []
    for n, line in enumerate(text.split("\n"), 1):
        if line.endswith("\\"):
            parts.append(line[:-1])
            continue
        out.append((start, " ".join([*parts, line])))
        start, parts = n + 1, []
    return out


def line_tokens(text: str, line: int) -> list[tuple[int, str]]:
    """(column, token) of the C tokens on `line` (1-based) of `text`, outside comments and string
    or character literals (a comment that opened on an earlier line counts too)."""

    def spaces(m: re.Match[str]) -> str:
        return m.group(0) if m.group("newline") else re.sub(r"[^\n]", " ", m.group(0))

    lines = _LEXEMES.sub(spaces, text).split("\n")
    if not 1 <= line <= len(lines):
        return []
    return [(m.start(), m.group(0)) for m in _TOKEN.finditer(lines[line - 1])]


def replace_token(text: str, line: int, token: str, new: str) -> str:
    """`text` with the one occurrence of the C token `token` on `line` replaced by `new`."""
    columns = [col for col, tok in line_tokens(text, line) if tok == token]
    if len(columns) != 1:
        raise ValueError(f"line {line}: `{token}` occurs {len(columns)} times as a C token")
    lines = text.split("\n")
    at = columns[0]
    lines[line - 1] = lines[line - 1][:at] + new + lines[line - 1][at + len(token) :]
    return "\n".join(lines)


@dataclass
class _Scope:
    depth: int = 0  # brace depth at file scope
    head: tuple[str, ...] = ()  # tokens of the file-scope declaration being read
    owner: str = ""  # the function whose body is open, "" inside a declaration's braces
    static: bool = False


def uses(text: str, names: set[str], assembly: bool = False) -> list[Use]:
    """Every use of `names` in a C file or header (or, with `assembly`, a .S file: outside
    directives every use is code). The braces of the first branch of each `#if` count (the
    others restart from where it began: each branch may open the same function its own way);
    when they do not balance, a last use of kind "unbalanced" says the attribution is unsure."""
    found: list[Use] = []
    at = _Scope()
    branches: list[_Scope] = []  # the scope at each open #if
    for line_no, line in logical_lines(text):
        stripped = line.lstrip()
        if stripped.startswith("#"):
            keyword = (_TOKEN.findall(stripped[1:]) or [""])[0]
            if keyword in ("if", "ifdef", "ifndef"):
                branches.append(_Scope(**at.__dict__))
            elif keyword in ("elif", "else") and branches:
                at = _Scope(**branches[-1].__dict__)
            elif keyword == "endif" and branches:
                branches.pop()
            found += _directive_uses(line_no, stripped[1:], names)
            continue
        toks = _TOKEN.findall(line)
        for i, tok in enumerate(toks):
            if tok in names:
                if assembly:
                    found.append(Use(line_no, tok, "code", ""))
                elif at.depth and at.owner:
                    kind = "static-function" if at.static else "function"
                    found.append(Use(line_no, tok, kind, at.owner))
                elif at.depth == 0 and toks[i + 1 : i + 2] == ["("]:
                    found.append(Use(line_no, tok, "signature", ""))
                else:
                    found.append(Use(line_no, tok, "declaration", ""))
            if not assembly:
                _step(at, tok)
    if found and at.depth and not assembly:
        found.append(Use(line_no, "", "unbalanced", ""))
    return found


def _step(at: _Scope, tok: str) -> None:
    if tok == "{":
        if at.depth == 0:
            at.owner = _function_name(list(at.head))
            at.static = "static" in at.head
        at.depth += 1
    elif tok == "}":
        at.depth = max(at.depth - 1, 0)
        if at.depth == 0:
            at.head, at.owner = (), ""
    elif at.depth == 0:
        at.head = () if tok == ";" else (*at.head, tok)


def _directive_uses(line_no: int, directive: str, names: set[str]) -> list[Use]:
    toks = _TOKEN.findall(directive)
    if not toks or not any(t in names for t in toks):
        return []
    keyword, rest = toks[0], toks[1:]
    if keyword == "define" and rest:
        macro = rest[0]
        return [Use(line_no, t, "macro", macro) for t in rest[1:] if t in names and t != macro]
    if keyword in ("if", "elif"):
        # `defined(NAME)` does not depend on the value
        checked = [t for i, t in enumerate(rest) if t in names and "defined" not in rest[max(i - 2, 0) : i]]
        return [Use(line_no, t, "if", "") for t in checked]
    return []  # ifdef, ifndef, undef, include, error, pragma: not the value


def _function_name(head: list[str]) -> str:
    """The name of the function whose definition `head` opens ("" for a struct, union, enum or
    an initializer): the one before the last parenthesized list that is not an attribute's, as
    a macro invoked at file scope without a `;` may come before the definition."""
    if "=" in head or "(" not in head:
        return ""
    name, depth = "", 0
    for i, tok in enumerate(head):
        if tok == "(":
            before = head[i - 1] if i else ""
            if depth == 0 and re.match(r"[A-Za-z_]\w*$", before) and before not in _ATTRIBUTES:
                name = before
            depth += 1
        elif tok == ")":
            depth -= 1
    return name
