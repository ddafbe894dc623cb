"""Fixtures for the signal-plane tests: a running xobserve with its own ring and ZeroMQ port."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from xtune import paths
from xtune.host.services import free_port
from xtune.testing.observe import unique

HERE = Path(__file__).resolve().parent


@dataclass
class Observer:
    proc: subprocess.Popen[str]
    shm: str
    zmq: str
    stderr: Path

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail(f"xobserve ignored signal {sig} for {timeout} s")

    def errors(self) -> str:
        return self.stderr.read_text()


@pytest.fixture(scope="session")
def xobserve() -> Path:
    return paths.binary("xobserve")


@pytest.fixture
def start_observer(xobserve: Path, tmp_path: Path) -> Iterator[Callable[..., Observer]]:
    """Start xobserve with the given arguments, a unique ring and a free ZeroMQ port."""
    started: list[Observer] = []

    def start(*args: str, wait: bool = True) -> Observer:
        shm = unique("xt-test-obs")
        zmq = f"tcp://127.0.0.1:{free_port()}"
        err = tmp_path / f"xobserve-{len(started)}.err"
        cmd = [str(xobserve), "--shm", shm, "--zmq", zmq, *args]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err.open("w"), text=True)
        obs = Observer(proc, shm, zmq, err)
        started.append(obs)
        deadline = time.monotonic() + 60
        while wait and not Path(f"/dev/shm/{shm}").exists():
            if proc.poll() is not None:
                pytest.fail(f"xobserve exited with {proc.returncode}: {obs.errors()}")
            if time.monotonic() > deadline:
                pytest.fail("xobserve did not create its ring within 60 s")
            time.sleep(0.02)
        return obs

    yield start
    for obs in started:
        obs.stop()
        Path(f"/dev/shm/{obs.shm}").unlink(missing_ok=True)


@pytest.fixture(scope="session")
def uprobe_target(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The load program of the func/syscall tests, built with symbols."""
    out = tmp_path_factory.mktemp("target") / "xt_uprobe_target"
    subprocess.run(
        ["cc", "-O2", "-g", "-pthread", "-D_GNU_SOURCE", "-o", str(out), str(HERE / "uprobe_target.c")],
        check=True,
    )
    return out
