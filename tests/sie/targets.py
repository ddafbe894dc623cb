"""Analyzed test targets (tests/sie/targets/*.c), built by the analysis itself and cached."""

from __future__ import annotations

from pathlib import Path

from xtune.sie.analyze import analyze
from xtune.sie.scope import ScopeTable
from xtune.sie.spec import spec_from_dict

TARGETS = Path(__file__).parent / "targets"


def analyzed(name: str, values: list[int], flags: str = "-O2 -pthread", const: str = "K") -> ScopeTable:
    src = TARGETS / f"{name}.c"
    data = {
        "source": src.name,
        "constant": const,
        "values": values,
        "build": f"gcc {flags} -o {{out}} {{src}}",
    }
    return analyze(spec_from_dict(data, TARGETS / "spec.toml"))
