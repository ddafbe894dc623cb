"""Fixtures for the tuner tests: the bottleneck network, private xobserve/xrtd, SLO files."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from xtune import paths
from xtune.demo.bottleneck import Bottleneck
from xtune.host.services import Services

HERE = Path(__file__).parent


@dataclass
class Lab:
    net: Bottleneck
    svc: Services
    bulk: str

    def variables(self, **extra: str) -> dict[str, str]:
        return {
            "RECEIVER_NETNS": self.net.path(self.net.receiver),
            "SENDER_NETNS": self.net.path(self.net.sender),
            "RECEIVER_ADDR": self.net.receiver_addr,
            "BULK": self.bulk,
            "SHM": self.svc.signals_shm,
            **extra,
        }


@pytest.fixture
def lab(bin_dir: Path) -> Iterator[Lab]:
    """Sender/router/receiver namespaces with a 100 Mbit/s bottleneck, xobserve (tcp, func) and xrtd."""
    bulk = str(paths.binary("xtune-bulk"))
    with Bottleneck() as net, Services(["tcp", "func"], funcs=[f"{bulk}:bulk_chunk"]) as svc:
        yield Lab(net, svc, bulk)
