"""Where xtune finds its binaries, the files it ships and its default runtime paths.

Inside a checkout everything defaults to the checkout (`build/`, `build/bin/`); an installed package
finds its binaries through $XTUNE_BIN (or $XTUNE_BUILD/bin) and then $PATH, and what it needs at run
time (the demo's SLO templates) is package data. $XTUNE_ROOT names a checkout explicitly.
"""

import os
import shutil
from importlib import resources
from pathlib import Path


def _checkout() -> Path | None:
    """The source checkout this package runs from, if it runs from one (an editable install)."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / "tuner" / "xtune").is_dir() and (root / "Makefile").is_file() else None


_env_root = os.environ.get("XTUNE_ROOT")
CHECKOUT: Path | None = Path(_env_root) if _env_root else _checkout()
ROOT = CHECKOUT or Path.cwd()
CACHE = Path(os.environ.get("XTUNE_CACHE", Path.home() / ".cache" / "xtune"))
BUILD = Path(os.environ.get("XTUNE_BUILD", ROOT / "build" if CHECKOUT else CACHE / "build"))
BIN = Path(os.environ.get("XTUNE_BIN", BUILD / "bin"))

SIGNALS_SHM = "xtune.signals"
KNOBS_SHM = "xtune.knobs"
KNOBS_FILE = f"/dev/shm/{KNOBS_SHM}"  # where shm_open puts it: what a plan names
SIGNALS_ZMQ = "tcp://127.0.0.1:5557"
XRTD_SOCKET = "/run/xtune/xrtd.sock"
XRTD_STATE_DIR = "/var/lib/xtune"
PROMETHEUS_ADDR = "127.0.0.1:9464"


def binary(name: str) -> Path:
    """Path of a binary built by `make build` (in $XTUNE_BIN, default build/bin), else on $PATH,
    with a clear error when it is missing."""
    path = BIN / name
    if path.exists():
        return path
    found = shutil.which(name)
    if found:
        return Path(found)
    raise FileNotFoundError(f"{path} is missing: run `make build` first (or set XTUNE_BIN)")


def package_data(*parts: str) -> Path:
    """A file shipped inside the package (e.g. `package_data("demo", "data", "bufferbloat.yaml")`)."""
    return Path(str(resources.files("xtune").joinpath(*parts)))


def checkout_file(relative: str, env: str) -> Path:
    """A file of the source checkout that an installed package cannot carry (a script, a C source
    tree): $`env` when set, else `relative` under the checkout."""
    if os.environ.get(env):
        return Path(os.environ[env])
    if CHECKOUT is None:
        raise FileNotFoundError(f"{relative} is outside this installed package: set {env} to its path")
    return CHECKOUT / relative
