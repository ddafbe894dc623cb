"""The console the `xtune` commands print on: ASCII only when asked (`--ascii`), or when stdout or
the locale cannot carry what the commands write (µs, ±, →, table borders and bars). Kept apart from
the tuning loop so that a command that only prints (`xtune observe`) starts quickly."""

from __future__ import annotations

import locale
import sys
from typing import TextIO

from rich.console import Console


class AsciiFile:
    """A text stream that writes only ASCII to another one ("?" for anything else); its encoding
    says "ascii", so rich draws ASCII table borders and bars on it."""

    encoding = "ascii"

    def __init__(self, out: TextIO) -> None:
        self.out = out

    def write(self, text: str) -> int:
        return self.out.write(text.encode("ascii", "replace").decode("ascii"))

    def flush(self) -> None:
        self.out.flush()

    def isatty(self) -> bool:
        return self.out.isatty()

    def fileno(self) -> int:
        return self.out.fileno()


# What the console writes beyond ASCII: µs, ±, →, table borders and bars.
SHOWN = "\u00b5\u00b1\u2192\u2502\u2501"


def can_show(encoding: str) -> bool:
    try:
        SHOWN.encode(encoding)
    except (LookupError, UnicodeEncodeError):
        return False
    return True


def terminal_is_ascii() -> bool:
    """Whether stdout or the locale cannot carry what the console writes. The locale's own: under
    LC_ALL=C, Python writes UTF-8 anyway (its UTF-8 mode), which such a terminal shows as garbage."""
    return not (
        can_show(getattr(sys.stdout, "encoding", None) or "ascii")
        and can_show(locale.nl_langinfo(locale.CODESET) or "ascii")
    )


def make_console(ascii: bool | None = None) -> Console:
    """A console on stdout; ASCII only when asked, or (None) when the terminal cannot show more."""
    if ascii is None:
        ascii = terminal_is_ascii()
    return Console(file=AsciiFile(sys.stdout)) if ascii else Console()  # type: ignore[arg-type]  # a writable text stream


def is_ascii(console: Console) -> bool:
    return not console.encoding.replace("-", "").startswith("utf")
