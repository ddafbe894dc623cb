"""kmod/harness/fetch-kernel.sh against its pin, on a cache of its own (no download, no unpack)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from xtune import paths

HARNESS = paths.ROOT / "kmod" / "harness"


def pinned_image() -> tuple[str, str]:
    for line in (HARNESS / "kernel.pin").read_text().splitlines():
        fields = line.split()
        if fields and fields[0].startswith("linux-image-"):
            return fields[0], fields[1]
    raise AssertionError("kernel.pin names no linux-image package")


def test_a_deb_whose_hash_differs_from_the_pin_is_refused(tmp_path: Path) -> None:
    package, version = pinned_image()
    debs = tmp_path / "kernel" / "debs"
    debs.mkdir(parents=True)
    (debs / f"{package}_{version}_amd64.deb").write_bytes(b"not the pinned package")
    done = subprocess.run(
        [str(HARNESS / "fetch-kernel.sh")],
        env=dict(os.environ, XTUNE_CACHE=str(tmp_path)),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1
    assert "SHA-256" in done.stderr and "refusing" in done.stderr
    assert not (tmp_path / "kernel" / package.removeprefix("linux-image-") / "kernel.env").exists()


def test_every_pinned_package_has_a_version_and_a_sha256() -> None:
    rows = [line.split() for line in (HARNESS / "kernel.pin").read_text().splitlines()]
    rows = [r for r in rows if r and not r[0].startswith("#")]
    assert {r[0].split("-")[1] for r in rows} >= {"image", "headers", "kbuild", "source"}
    for package, version, sha in rows:
        assert version and len(sha) == 64 and int(sha, 16) >= 0, package


def test_every_pinned_kernel_package_is_fetched_at_its_pin_on_an_empty_cache(tmp_path: Path) -> None:
    """Debian drops a version from its index once a newer revision is out (linux-kbuild-6.1 did,
    while the image of its build was still listed); the script takes such a .deb from the pool."""
    done = subprocess.run(
        [str(HARNESS / "fetch-kernel.sh")],
        env=dict(os.environ, XTUNE_CACHE=str(tmp_path)),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    env = dict(line.split("=", 1) for line in Path(done.stdout.strip()).read_text().splitlines())
    assert env["KERNEL_PINNED"] == "yes", done.stderr
    package, version = pinned_image()
    assert (env["KERNEL_PACKAGE"], env["KERNEL_PACKAGE_VERSION"]) == (package, version)
    unpacked = (Path(done.stdout.strip()).parent / ".unpacked").read_text().split()
    pins = {
        r.split()[0]: r.split()[1]
        for r in (HARNESS / "kernel.pin").read_text().splitlines()
        if r and not r.startswith("#")
    }
    assert unpacked and all(pins[p] == v for p, v in (u.split("=") for u in unpacked))
