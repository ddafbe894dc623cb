"""Debian's libz.so.1 retuned live inside a running nginx through xrtd: the committed scope table
fits a fresh build of the pinned source package (same build id), a TOO_FAR no analysis build used
gives the gzip bytes of the library rebuilt with it, a value outside the range is refused, and
detach restores the stock bytes. Builds what it needs (fetch, the stock library and one variant,
about 15 s each on 2 cores; experiments/real/zlib/build.sh); skips when the source package cannot
be fetched."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from real.redis.live import SieCli
from real.zlib import golden, live, server
from xtune.sie import scope
from xtune.sie.elfcode import file_build_id
from xtune.testing.xrtd import Xrtd

pytestmark = [pytest.mark.root, pytest.mark.slow]

UNSEEN = 256  # no analysis or validation build used it


@pytest.fixture(scope="module")
def stock():
    if not shutil.which("wrk") or not os.path.exists(server.NGINX):
        pytest.skip("nginx and wrk are needed: apt-get install nginx wrk (scripts/apt-packages.txt)")
    fetch = subprocess.run([str(live.HERE / "fetch.sh")], capture_output=True, text=True)
    if fetch.returncode != 0:
        pytest.skip(f"Debian's zlib source package cannot be fetched: {fetch.stderr.strip()[-300:]}")
    return live.stock_library()


def test_live_retune_equals_rebuild(stock, tmp_path):
    table = scope.load(live.SCOPE)
    assert table.binary.build_id == file_build_id(stock), "the committed scope table is of another build"
    high = table.consts[0].max_value
    docroot = tmp_path / "doc"
    golden.write_files(docroot)
    ref = server.Server(live.rebuilt(UNSEEN), docroot, tmp_path / "rebuilt")
    try:
        want = golden.run(ref.port, docroot)
    finally:
        ref.stop()
    x = Xrtd(tmp_path).start()
    sie = server.Server(stock, docroot, tmp_path / "sie")
    try:
        before = golden.run(sie.port, docroot)
        assert before != want, "the golden workload must see the value"
        cli = SieCli(sie.pid, x.socket, {**os.environ, "XTUNE_SIE_STATE": str(tmp_path / "state")})
        cli.attach(live.SCOPE)
        cli.set(live.CONST, UNSEEN)
        assert golden.run(sie.port, docroot) == want
        r = cli.set(live.CONST, high * 2, ok=False)
        assert r.returncode == 1 and "out of bounds" in r.stderr
        assert golden.run(sie.port, docroot) == want, "a refused value changes nothing"
        cli.detach()
        assert golden.run(sie.port, docroot) == before
    finally:
        sie.stop()
        x.cleanup()
