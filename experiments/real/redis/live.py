"""The stock and rebuilt servers (build.sh, the analysis' build cache) and `xtune sie` through xrtd."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from xtune.sie.spec import Spec, load_spec
from xtune.sie.variants import build_one

HERE = Path(__file__).resolve().parent
XTUNE = str(Path(sys.executable).parent / "xtune")


def spec(name: str) -> Spec:
    """The spec `NAME.toml` here (iobuf, reply)."""
    return load_spec(HERE / f"{name}.toml")


def scope_path(name: str) -> Path:
    """The committed scope table of spec `name`."""
    return HERE / f"{name}.scope.json"


def stock_binary() -> Path:
    """The Debian build at the stock value (built on first use, about a minute on 2 cores)."""
    out = subprocess.run([str(HERE / "build.sh")], check=True, capture_output=True, text=True).stdout
    return Path(out.strip().splitlines()[-1])


def rebuilt(name: str, value: int) -> Path:
    """The server rebuilt with spec `name`'s constant at `value`, as the analysis builds it (cached)."""
    stock_binary()
    return build_one(spec(name), value)


class SieCli:
    """`xtune sie attach|set|status|detach` for one process through one xrtd."""

    def __init__(self, pid: int, socket: str, env: dict[str, str]) -> None:
        self.pid, self.socket, self.env = str(pid), socket, env

    def run(self, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
        r = subprocess.run(
            [XTUNE, "sie", *args, "--pid", self.pid, "--socket", self.socket],
            capture_output=True,
            text=True,
            env=self.env,
        )
        if ok and r.returncode != 0:
            raise RuntimeError(f"xtune sie {' '.join(args)}: {r.stderr.strip()}")
        return r

    def attach(self, scope: Path) -> None:
        self.run("attach", "--scope", str(scope))

    def set(self, name: str, value: int, ok: bool = True) -> subprocess.CompletedProcess[str]:
        return self.run("set", name, str(value), ok=ok)

    def status(self) -> str:
        return self.run("status").stdout

    def detach(self) -> None:
        self.run("detach")
