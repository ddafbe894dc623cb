"""The stock and rebuilt libraries (build.sh, the analysis' build cache) of the TOO_FAR spec."""

from __future__ import annotations

import subprocess
from pathlib import Path

from xtune.sie.spec import Spec, load_spec
from xtune.sie.variants import build_one

HERE = Path(__file__).resolve().parent
SPEC = HERE / "toofar.toml"
SCOPE = HERE / "toofar.scope.json"
CONST = "TOO_FAR"


def spec() -> Spec:
    return load_spec(SPEC)


def stock_library() -> Path:
    """Debian's libz.so.1 built at the stock value (fetch and build on first use, about 15 s)."""
    out = subprocess.run([str(HERE / "build.sh")], check=True, capture_output=True, text=True).stdout
    return Path(out.strip().splitlines()[-1])


def rebuilt(value: int) -> Path:
    """The library rebuilt with TOO_FAR = `value`, as the analysis builds it (cached)."""
    stock_library()
    return build_one(spec(), value)
