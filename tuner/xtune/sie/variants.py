"""Build the unit once per value with the spec's command template, cached by the content of
every file the build reads (the source, its local headers, the compiler's record of the rest)."""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from xtune import paths
from xtune.sie.buildinputs import (
    copy_with_headers,
    headers_digest,
    inputs_unchanged,
    local_headers,
    record_inputs,
    recording_env,
)
from xtune.sie.spec import Spec, rewrite_source


class BuildError(RuntimeError):
    pass


def cache_dir() -> Path:
    d = paths.BUILD / "sie-analysis"
    d.mkdir(parents=True, exist_ok=True)
    return d


def _published(key_dir: Path) -> Path | None:
    """The output of the key's published build, if every file it read is unchanged."""
    try:
        build_dir = key_dir / os.readlink(key_dir / "current")
    except OSError:
        return None
    out = build_dir / "out"
    return out if out.exists() and inputs_unchanged(build_dir) else None


def _publish(key_dir: Path, build_dir: Path) -> None:
    """Make `build_dir` the key's current build in one step (a symbolic link replaced)."""
    link = key_dir / f".current-{build_dir.name}"
    os.symlink(build_dir.name, link)
    os.replace(link, key_dir / "current")


def build_one(spec: Spec, value: int) -> Path:
    """Output of the build with the constant set to `value`; rebuilt only when inputs change."""
    src_text = spec.source.read_text() if spec.define else rewrite_source(spec, value)
    # A rewritten source is built from a copy, with the local headers it includes beside it.
    headers = [] if spec.define else local_headers(spec.source)
    cwd = spec.path.parent.absolute()  # relative paths in the command and the records
    key = hashlib.sha256(
        "\0".join(
            [
                src_text,
                headers_digest(headers, spec.source),
                spec.build,
                str(value),
                str(spec.define),
                spec.source.name,
                str(cwd),
            ]
        ).encode()
    ).hexdigest()[:20]
    key_dir = cache_dir() / key
    reused = _published(key_dir)
    if reused:
        return reused
    key_dir.mkdir(exist_ok=True)
    # Each build has a folder of its own, so builds of one key (threads, other processes) never
    # share a file, and an output's path always names the build it was (a table records it).
    build_dir = Path(tempfile.mkdtemp(prefix="build-", dir=key_dir))
    out = build_dir / "out"
    try:
        # Keep the file name so that __FILE__ and the compiler's choices match the original build;
        # in -D mode build the original file itself (includes next to it keep working).
        src = (
            spec.source
            if spec.define
            else copy_with_headers(spec.source, src_text, headers, build_dir / "src")
        )
        fields = {
            "src": shlex.quote(str(src)),
            "out": shlex.quote(str(out)),
            "value": str(value),
            "orig": shlex.quote(str(spec.source)),
            "dir": shlex.quote(str(spec.source.parent)),
            "define": f"-D{spec.constant}={value}",
        }
        cmd = spec.build.format(**fields)
        r = subprocess.run(
            cmd, shell=True, capture_output=True, text=True, cwd=cwd, env=recording_env(build_dir)
        )
        if r.returncode != 0 or not out.exists():
            why = r.stderr.strip()[-2000:] if r.returncode != 0 else "it made no {out}"
            raise BuildError(f"build with {spec.constant}={value} failed ({cmd}):\n{why}")
    except BaseException:
        shutil.rmtree(build_dir, ignore_errors=True)
        raise
    # Only a build whose inputs are known is reused; one that leaves no record runs each time.
    if record_inputs(build_dir, spec.build, cwd):
        _publish(key_dir, build_dir)
    return out


def build_variants(spec: Spec) -> list[Path]:
    """One build per value, in parallel (two at a time: the machine is shared)."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(lambda v: build_one(spec, v), spec.values))
