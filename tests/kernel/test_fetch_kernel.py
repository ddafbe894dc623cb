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
