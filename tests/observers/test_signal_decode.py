"""The Python decoder refuses bad bytes with a reason, and reads what the C side wrote."""

import pytest
from xtune.signals.frames import (
    FRAME_REPLAYED,
    Catalog,
    FrameError,
    ShmFrameReader,
    SignalInfo,
    decode_frame,
    encode_frame,
    with_flags,
)

CATALOG = Catalog(
    [
        SignalInfo(1, "block.ops", "ops", "counter", "t"),
        SignalInfo(2, "block.latency.p99", "us", "quantile", "t"),
    ]
)


def test_round_trip_names_values_and_empty_items():
    raw = encode_frame(7, 100, 1100, [(1, 0, 42.0), (2, 1, 0.0)], dropped=3)
    frame = decode_frame(raw, CATALOG)
    assert (frame.seq, frame.window_ns, frame.dropped) == (7, 1000, 3)
    assert frame.values == {"block.ops": 42.0, "block.latency.p99": 0.0}
    assert frame.empty == {"block.latency.p99"}
    assert not frame.replayed and decode_frame(with_flags(raw, FRAME_REPLAYED), CATALOG).replayed
    assert decode_frame(raw, None).values == {"#1": 42.0, "#2": 0.0}


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"short", "shorter than its 48-byte header"),
        (b"\0" * 48, "bad frame magic 0x0"),
        (encode_frame(1, 0, 1, [(1, 0, 1.0)])[:-1], "frame truncated"),
        (
            encode_frame(1, 0, 1, [])[:4] + b"\x09\x00" + encode_frame(1, 0, 1, [])[6:],
            "unsupported frame version 9",
        ),
    ],
)
def test_bad_frames_say_what_is_wrong(data, reason):
    with pytest.raises(FrameError, match=reason):
        decode_frame(data, CATALOG)


def test_bad_catalog_is_refused():
    with pytest.raises(FrameError, match="bad catalog JSON"):
        Catalog.from_json(b'{"version": 1, "signals": [{"id": 1}]}')


def test_missing_ring_names_the_producer_to_start():
    with pytest.raises(FileNotFoundError, match="is xobserve running with --shm xt-test-nowhere"):
        ShmFrameReader("xt-test-nowhere")
