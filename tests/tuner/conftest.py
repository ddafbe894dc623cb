"""Fixtures for the tuner tests: the bottleneck network, private xobserve/xrtd, SLO files, trial
stores on SQLite and on a private PostgreSQL cluster, a headless browser."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from xtune import paths
from xtune.demo.bottleneck import Bottleneck
from xtune.host.services import Services
from xtune.testing.postgres import Cluster, temporary_cluster

HERE = Path(__file__).parent
# Variables that let slo_good/bufferbloat-bo.yaml load where nothing runs it (a policy's own tests).
BUFFERBLOAT_VARS = {
    "RECEIVER_NETNS": "/r",
    "SENDER_NETNS": "/s",
    "RECEIVER_ADDR": "10.0.0.1",
    "BULK": "/bin/true",
    "SHM": "x",
}


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


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Cluster]:
    """One private PostgreSQL cluster for the whole test run (a database per test)."""
    with temporary_cluster() as cluster:
        yield cluster


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.root)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty trial store's URL: a SQLite file, or a new database in the test run's cluster."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'trials.db'}"
    cluster: Cluster = request.getfixturevalue("pg_cluster")
    return cluster.create_database(f"trials_{os.getpid()}_{os.urandom(4).hex()}")


@pytest.fixture
def browser() -> Iterator[webdriver.Chrome]:
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver is None:
        pytest.fail("chromium/chromium-driver are not installed (scripts/apt-packages.txt): run `make setup`")
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        opts.add_argument(arg)
    b = webdriver.Chrome(options=opts, service=Service(driver))
    try:
        yield b
    finally:
        b.quit()
