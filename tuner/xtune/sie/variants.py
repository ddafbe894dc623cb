"""Build the unit once per value with the spec's command template, cached by the content of
every file the build reads (the source, its local headers, the compiler's record of the rest)."""

from __future__ import annotations

import hashlib
import shlex
import subprocess
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


def build_one(spec: Spec, value: int) -> Path:
    """Output of the build with the constant set to `value`; rebuilt only when inputs change."""
    src_text = spec.source.read_text() if spec.define else rewrite_source(spec, value)
    # A rewritten source is built from a copy, with the local headers it includes beside it.
    headers = [] if spec.define else local_headers(spec.source)
    key = hashlib.sha256(
        "\0".join(
            [
                src_text,
                headers_digest(headers, spec.source),
                spec.build,
                str(value),
                str(spec.define),
                spec.source.name,
            ]
        ).encode()
    ).hexdigest()[:20]
    d = cache_dir() / key
    out = d / "out"
    if out.exists() and inputs_unchanged(d):
        return out
    d.mkdir(exist_ok=True)
    # Keep the file name so that __FILE__ and the compiler's choices match the original build;
    # in -D mode build the original file itself (includes next to it keep working).
    src = spec.source if spec.define else copy_with_headers(spec.source, src_text, headers, d / "src")
    fields = {
        "src": shlex.quote(str(src)),
        "out": shlex.quote(str(out) + ".tmp"),
        "value": str(value),
        "orig": shlex.quote(str(spec.source)),
        "dir": shlex.quote(str(spec.source.parent)),
        "define": f"-D{spec.constant}={value}",
    }
    cmd = spec.build.format(**fields)
    cwd = spec.path.parent
    r = subprocess.run(cmd, shell=True, capture_output=True, text=True, cwd=cwd, env=recording_env(d))
    if r.returncode != 0:
        raise BuildError(f"build with {spec.constant}={value} failed ({cmd}):\n{r.stderr.strip()[-2000:]}")
    # The manifest of what the build read decides reuse; a build that leaves none is never reused.
    record_inputs(d, spec.build, cwd)
    Path(str(out) + ".tmp").rename(out)
    return out


def build_variants(spec: Spec) -> list[Path]:
    """One build per value, in parallel (two at a time: the machine is shared)."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(lambda v: build_one(spec, v), spec.values))
