"""The agent image (docker/agent.Containerfile) for tests that run the daemons from it: built once
per process by docker/build.sh (seconds when nothing changed), run through docker/podman.sh."""

from __future__ import annotations

import functools
import shutil
import subprocess

from xtune import paths

DOCKER = paths.ROOT / "docker"
PODMAN = str(DOCKER / "podman.sh")


def podman(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PODMAN, *args], capture_output=True, text=True, check=check)


def podman_missing() -> str | None:
    """Why no image can be built or run here, or None when podman is installed."""
    if shutil.which("podman") is None:
        return "podman is not installed (scripts/apt-packages.txt: run `make setup`)"
    return None


def docker_script(name: str, *args: str) -> str:
    """Run a docker/ script; the last word of its output is the image it made (an ID for build.sh)."""
    res = subprocess.run([str(DOCKER / name), *args], capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"docker/{name} {' '.join(args)} failed: {res.stderr.strip()}")
    return res.stdout.split()[-1]


@functools.cache
def agent_image() -> str:
    """The ID of the agent image built from the checkout's build/bin."""
    return docker_script("build.sh", "agent")
