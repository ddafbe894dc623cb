"""Debian's redis-server retuned live through xrtd: the committed scope table fits a fresh build of
the pinned source package (same build id), a value no analysis build used answers the golden
workload as the server rebuilt with it, a value outside the range is refused, and detach restores
the stock behaviour. Builds what it needs (fetch + stock build about a minute on 2 cores, one
networking.c variant seconds; experiments/real/redis/build.sh)."""

from __future__ import annotations

import os

import pytest
from real.redis import golden, live, server
from xtune.sie import scope
from xtune.sie.elfcode import file_build_id
from xtune.testing.xrtd import Xrtd

pytestmark = [pytest.mark.root, pytest.mark.slow]

CONST = "PROTO_IOBUF_LEN"
UNSEEN = 4096  # no analysis or validation build used it


def test_live_retune_equals_rebuild(tmp_path):
    stock = live.stock_binary()
    table = scope.load(live.scope_path("iobuf"))
    assert table.binary.build_id == file_build_id(stock), "the committed scope table is of another build"
    high = table.consts[0].max_value
    ref = server.Server(live.rebuilt("iobuf", UNSEEN), tmp_path / "rebuilt")
    try:
        want = golden.run(ref.port)
    finally:
        ref.stop()
    x = Xrtd(tmp_path).start()
    sie = server.Server(stock, tmp_path / "sie")
    try:
        before = golden.run(sie.port)
        assert before["client_info"] != want["client_info"], "the golden workload must see the value"
        cli = live.SieCli(sie.pid, x.socket, {**os.environ, "XTUNE_SIE_STATE": str(tmp_path / "state")})
        cli.attach(live.scope_path("iobuf"))
        cli.set(CONST, UNSEEN)
        assert golden.run(sie.port) == want
        r = cli.set(CONST, high * 2, ok=False)
        assert r.returncode == 1 and "out of bounds" in r.stderr
        assert golden.run(sie.port) == want, "a refused value changes nothing"
        cli.detach()
        assert golden.run(sie.port) == before
    finally:
        sie.stop()
        x.cleanup()
