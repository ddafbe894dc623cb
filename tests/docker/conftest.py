"""Fixtures for the image tests: the agent image (built, or reused from podman's cache) and
containers removed at the end."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from xtune.testing import images
from xtune.testing.images import podman
from xtune.testing.observe import unique


@pytest.fixture(scope="session")
def agent_image(bin_dir: Path) -> str:
    """The ID of the agent image docker/build.sh builds from build/bin: seconds when nothing changed."""
    missing = images.podman_missing()
    if missing:
        pytest.skip(missing)
    try:
        base = images.docker_script("base.sh")
        probe = podman("run", "--rm", base, "true", check=False)
        if probe.returncode != 0:
            pytest.skip(f"podman cannot run containers on this host: {probe.stderr.strip()}")
        return images.agent_image()
    except RuntimeError as e:
        pytest.fail(str(e))


class Containers:
    """Containers started with `run` (detached, unique names); all removed by the fixture."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def run(self, *args: str) -> str:
        name = unique("xt-test")
        self.names.append(name)
        podman("run", "--detach", "--name", name, *args)
        return name

    def pid(self, name: str) -> int:
        """Host PID of the container's first process."""
        return int(podman("inspect", "--format", "{{.State.Pid}}", name).stdout)

    def kill(self, name: str) -> int:
        """SIGKILL to the container's processes; returns its exit code."""
        podman("kill", "--signal", "KILL", name)
        return int(podman("wait", name).stdout)

    def stop(self, name: str) -> int:
        """SIGTERM, then SIGKILL after 20 s; returns the exit code."""
        podman("stop", "--time", "20", name)
        return int(podman("wait", name).stdout)

    def logs(self, name: str) -> str:
        res = podman("logs", name, check=False)
        return res.stdout + res.stderr


@pytest.fixture
def containers() -> Iterator[Containers]:
    made = Containers()
    yield made
    for name in made.names:
        podman("rm", "--force", "--time", "10", name, check=False)


@pytest.fixture
def shm_name() -> Iterator[Callable[[str], str]]:
    """Unique /dev/shm names, unlinked afterwards (a killed daemon leaves its segment)."""
    names: list[str] = []

    def make(prefix: str) -> str:
        names.append(unique(prefix))
        return names[-1]

    yield make
    for name in names:
        Path(f"/dev/shm/{name}").unlink(missing_ok=True)
