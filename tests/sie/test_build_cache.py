"""The variant build cache: a build is reused only while every file it read is unchanged."""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from xtune import paths
from xtune.sie.spec import Spec, spec_from_dict
from xtune.sie.variants import build_one


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(paths, "BUILD", tmp_path / "build")


def program(folder: Path, build: str, define: bool = False) -> Spec:
    """prog.c returns K + the macros of the headers it includes (its exit status shows the build)."""
    (folder / "sub").mkdir()
    (folder / "inc").mkdir()
    (folder / "prog.c").write_text(
        '#include "sub/near.h"\n#include <far.h>\n#define K 5\nint main(void) { return K + NEAR + FAR; }\n'
    )
    (folder / "sub" / "near.h").write_text('#include "../inner.h"\n#define NEAR (INNER + 10)\n')
    (folder / "inner.h").write_text("#define INNER 1\n")
    (folder / "inc" / "far.h").write_text("#define FAR 100\n")
    data = {"source": "prog.c", "constant": "K", "values": [5, 6], "build": build, "define": define}
    if define:
        (folder / "prog.c").write_text((folder / "prog.c").read_text().replace("#define K 5\n", ""))
    return spec_from_dict(data, folder / "spec.toml")


def status(binary: Path) -> int:
    return subprocess.run([binary]).returncode


def test_a_changed_local_header_is_a_fresh_build(tmp_path: Path) -> None:
    # The rewritten copy is built elsewhere: its headers must be found and must key the cache.
    spec = program(tmp_path, "gcc -O2 -I inc -o {out} {src}")
    assert status(build_one(spec, 5)) == 5 + 11 + 100
    assert status(build_one(spec, 6)) == 6 + 11 + 100
    (tmp_path / "inner.h").write_text("#define INNER 2\n")  # included by a header, through ../
    assert status(build_one(spec, 5)) == 5 + 12 + 100


@pytest.mark.parametrize("define", [False, True], ids=["rewritten", "define"])
def test_a_changed_header_on_the_include_path_is_a_fresh_build(tmp_path: Path, define: bool) -> None:
    # A header found through -I is known only from the compiler's record of what it read.
    build = "gcc -O2 -I inc {define} -o {out} {src}" if define else "gcc -O2 -I inc -o {out} {src}"
    spec = program(tmp_path, build, define)
    assert status(build_one(spec, 5)) == 116
    (tmp_path / "inc" / "far.h").write_text("#define FAR 50\n")
    assert status(build_one(spec, 5)) == 66


def test_unchanged_inputs_reuse_the_build(tmp_path: Path) -> None:
    spec = program(tmp_path, "clang -O2 -I inc -o {out} {src}")
    first = build_one(spec, 5)
    stamp = first.stat().st_mtime_ns
    assert build_one(spec, 5) == first and first.stat().st_mtime_ns == stamp
    (tmp_path / "inc" / "far.h").write_text("#define FAR 50\n")  # clang's own record
    assert status(build_one(spec, 5)) == 66


def test_a_build_that_leaves_no_record_is_never_reused(tmp_path: Path) -> None:
    # No compiler ran, so what the build read is unknown: it runs again each time.
    spec = program(tmp_path, "cat {src} >/dev/null && cp {dir}/prebuilt {out}")
    prebuilt = tmp_path / "prebuilt"
    prebuilt.write_text("#!/bin/sh\nexit 3\n")
    prebuilt.chmod(0o755)
    assert status(build_one(spec, 5)) == 3
    prebuilt.write_text("#!/bin/sh\nexit 4\n")
    assert status(build_one(spec, 5)) == 4


def test_the_same_program_in_another_folder_is_its_own_build(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir(), second.mkdir()
    spec_a, spec_b = (
        program(first, "gcc -O2 -I inc -o {out} {src}"),
        program(second, "gcc -O2 -I inc -o {out} {src}"),
    )
    (second / "inc" / "far.h").write_text("#define FAR 50\n")
    assert status(build_one(spec_a, 5)) == 116
    assert status(build_one(spec_b, 5)) == 66


@pytest.mark.parametrize(
    "build", ["gcc -O2 -I inc -o {out} {src}", "cat {src} >/dev/null && cp {dir}/prebuilt {out}"]
)
def test_builds_of_one_key_at_once_each_give_a_whole_build(tmp_path: Path, build: str) -> None:
    # Threads here; other processes sharing build/ are the same case.
    spec = program(tmp_path, build)
    prebuilt = tmp_path / "prebuilt"
    prebuilt.write_text("#!/bin/sh\nexit 116\n")
    prebuilt.chmod(0o755)
    with ThreadPoolExecutor(max_workers=4) as pool:
        outs = list(pool.map(lambda _: build_one(spec, 5), range(8)))
    assert [status(out) for out in outs] == [116] * 8
