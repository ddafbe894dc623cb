"""Where xtune finds its built binaries and default runtime paths."""

import os
from pathlib import Path

ROOT = Path(os.environ.get("XTUNE_ROOT", Path(__file__).resolve().parents[2]))
BUILD = Path(os.environ.get("XTUNE_BUILD", ROOT / "build"))
BIN = BUILD / "bin"

SIGNALS_SHM = "xtune.signals"
KNOBS_SHM = "xtune.knobs"
SIGNALS_ZMQ = "tcp://127.0.0.1:5557"
XRTD_SOCKET = "/run/xtune/xrtd.sock"
XRTD_STATE_DIR = "/var/lib/xtune"
PROMETHEUS_ADDR = "127.0.0.1:9464"


def binary(name: str) -> Path:
    """Path of a binary built by `make build`, with a clear error when it is missing."""
    path = BIN / name
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: run `make build` first")
    return path
