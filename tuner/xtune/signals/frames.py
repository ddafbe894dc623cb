"""Signal frames from xobserve: decoding, catalog, and readers for shared memory and ZeroMQ.

The byte layout is defined once, in `include/xtune/signal.h`; this module decodes the
same bytes for both transports.

Public API
----------
`Frame`
    One closed window: `seq`, `window_start_ns`, `window_end_ns`, `flags`, `dropped` (frames the
    producer failed to publish so far), `values` (signal name -> float) and `empty` (names of
    quantile items that had no sample in the window; their value is 0). `raw` keeps the exact
    frame bytes (recordings and comparisons use them). `window_ns` and `replayed` are derived.
`Catalog`
    What the ids in a frame mean: `signals` (list of `SignalInfo(id, name, unit, kind, source)`),
    `window_ns`, `pmu` ("available" | "unavailable"), lookups `by_id` / `by_name`,
    `Catalog.from_json(bytes)` and `to_json()`.
`decode_frame(data, catalog)` -> `Frame`
    Raises `FrameError` naming what is wrong (magic, version, size). Ids the catalog does not know
    are named "#<id>".
`ShmFrameReader(name="xtune.signals")` and `ZmqFrameReader(endpoint="tcp://127.0.0.1:5557",
context=None, curve=None)` (a pyzmq context, the process-wide one by default; `curve`: a
`ClientKeys` from `xtune.signals.curve` for a publisher started with `--zmq-curve`, and then
`poll` raises `CurveError` naming the likely cause when the handshake fails)
    Same interface (`FrameReader`):
      - `poll(timeout=None) -> Frame | None`: the next frame in sequence order, or None when
        `timeout` seconds passed without one (None waits forever).
      - iteration yields frames forever; `frames(timeout)` yields until a poll times out.
      - `catalog`: the latest catalog (None until one was seen; `poll` only returns frames once it
        is known).
      - `stats`: `ReaderStats(frames, lost, overruns, producer_dropped, restarts)`: `lost` counts
        sequence gaps seen by this reader (overrun frames included), `overruns` the times the shm
        producer lapped the reader, `producer_dropped` the producer's own counter from the latest
        frame, `restarts` the times a new producer run (sequence going back) was detected.
      - `close()`; both are context managers.
    The shm reader starts at the newest frame (`from_start=True` starts at the oldest still in the
    ring); when a new producer replaces the ring under the same name, the reader switches to it
    (counted in `restarts`); `producer_alive()` says whether a producer is there. It sleeps in
    FUTEX_WAIT on the ring's head, which the producer wakes after each frame, and spins within
    `spin_s` (default 100 us) of the next frame's due time (one window after the last one closed):
    in a VM the wake-up of an idle CPU costs tens of microseconds, the spin about 2 * spin_s of CPU
    per window. On a host whose CPUs are all busy, spin_s=0: the wake-up alone.
`ShmFrameWriter(name, catalog_json)` and `ZmqFramePublisher(endpoint, catalog_json)`
    The producer side in Python (`publish(frame_bytes)`, `set_catalog`, `close`), as xobserve
    does it in C; `xtune replay` uses them.
"""

from __future__ import annotations

import ctypes
import json
import mmap
import os
import struct
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from xtune import futex
from xtune.signals.curve import ClientKeys, HandshakeWatch

FRAME_MAGIC = 0x52465458  # "XTFR"
FRAME_VERSION = 1
FRAME_REPLAYED = 1 << 0
ITEM_EMPTY = 1 << 0

# struct xt_frame_header: magic u32, version u16, header_size u16, seq u64, window_start_ns u64,
# window_end_ns u64, count u32, flags u32, dropped u64.
_FRAME_HEADER = struct.Struct("<IHHQQQIIQ")
_ITEM = struct.Struct("<IId")
FRAME_HEADER_SIZE = _FRAME_HEADER.size

RING_MAGIC = 0x47525458  # "XTRG"
RING_VERSION = 1
XT_RING_HEADER_SIZE = 4096
# struct xt_ring_header: magic u32, version u16, header_size u16, slot_count u32, slot_size u32,
# head u64, catalog_lock u64, catalog_offset u32, catalog_size u32, catalog_capacity u32,
# producer_pid u32, window_ns u64, dropped u64.
_RING_HEADER = struct.Struct("<IHHIIQQIIIIQQ")
_RING_HEAD_OFF = 16
_RING_CATALOG_LOCK_OFF = 24
_RING_CATALOG_SIZE_OFF = 36
_RING_PID_OFF = 44
_RING_DROPPED_OFF = 56
_U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")
# struct xt_ring_slot: lock u64, size u32, reserved u32; frame bytes follow.
_SLOT = struct.Struct("<QII")

TOPIC_FRAME = b"frame"
TOPIC_CATALOG = b"catalog"


class FrameError(ValueError):
    """Bytes that are not a valid frame, catalog or ring."""


@dataclass(frozen=True)
class SignalInfo:
    id: int
    name: str
    unit: str
    kind: str  # counter | gauge | quantile
    source: str


@dataclass
class Catalog:
    signals: list[SignalInfo]
    window_ns: int = 0
    pmu: str = "unavailable"
    version: int = 1
    by_id: dict[int, SignalInfo] = field(init=False, repr=False)
    by_name: dict[str, SignalInfo] = field(init=False, repr=False)
    names: dict[int, str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.by_id = {s.id: s for s in self.signals}
        self.by_name = {s.name: s for s in self.signals}
        self.names = {s.id: s.name for s in self.signals}

    @classmethod
    def from_json(cls, data: bytes | str) -> Catalog:
        try:
            doc = json.loads(data)
            signals = [
                SignalInfo(int(s["id"]), str(s["name"]), str(s["unit"]), str(s["kind"]), str(s["source"]))
                for s in doc["signals"]
            ]
            return cls(
                signals, int(doc.get("window_ns", 0)), str(doc.get("pmu", "unavailable")), int(doc["version"])
            )
        except (ValueError, KeyError, TypeError) as e:
            raise FrameError(f"bad catalog JSON: {e}") from e

    def to_json(self) -> bytes:
        doc = {
            "version": self.version,
            "window_ns": self.window_ns,
            "pmu": self.pmu,
            "signals": [s.__dict__ for s in self.signals],
        }
        return json.dumps(doc).encode()

    def name_of(self, signal_id: int) -> str:
        info = self.by_id.get(signal_id)
        return info.name if info else f"#{signal_id}"


@dataclass
class Frame:
    seq: int
    window_start_ns: int
    window_end_ns: int
    flags: int
    dropped: int
    values: dict[str, float]
    empty: set[str]
    raw: bytes = field(default=b"", repr=False, compare=False)

    @property
    def window_ns(self) -> int:
        return self.window_end_ns - self.window_start_ns

    @property
    def replayed(self) -> bool:
        return bool(self.flags & FRAME_REPLAYED)


def frame_header(data: bytes) -> tuple[int, int, int, int, int, int]:
    """Validate a frame's header; return (seq, start_ns, end_ns, count, flags, dropped)."""
    if len(data) < FRAME_HEADER_SIZE:
        raise FrameError(f"frame of {len(data)} bytes is shorter than its {FRAME_HEADER_SIZE}-byte header")
    magic, version, header_size, seq, start, end, count, flags, dropped = _FRAME_HEADER.unpack_from(data)
    if magic != FRAME_MAGIC:
        raise FrameError(f"bad frame magic {magic:#x} (expected {FRAME_MAGIC:#x})")
    if version != FRAME_VERSION:
        raise FrameError(f"unsupported frame version {version} (this reader knows {FRAME_VERSION})")
    if header_size < FRAME_HEADER_SIZE or len(data) < header_size + count * _ITEM.size:
        raise FrameError(f"frame truncated: {len(data)} bytes for header {header_size} and {count} items")
    return seq, start, end, count, flags, dropped


def decode_frame(data: bytes, catalog: Catalog | None) -> Frame:
    """Decode one frame (the bytes of signal.h) and name its items with `catalog`."""
    seq, start, end, count, flags, dropped = frame_header(data)
    header_size = _FRAME_HEADER.unpack_from(data)[2]
    names = catalog.names if catalog else {}
    values: dict[str, float] = {}
    empty: set[str] = set()
    for sid, iflags, value in _ITEM.iter_unpack(
        memoryview(data)[header_size : header_size + count * _ITEM.size]
    ):
        name = names.get(sid) or f"#{sid}"
        values[name] = value
        if iflags & ITEM_EMPTY:
            empty.add(name)
    return Frame(seq, start, end, flags, dropped, values, empty, bytes(data))


def encode_frame(
    seq: int,
    start_ns: int,
    end_ns: int,
    items: list[tuple[int, int, float]],
    flags: int = 0,
    dropped: int = 0,
) -> bytes:
    """Frame bytes from (id, item flags, value) items: the inverse of decode_frame."""
    head = _FRAME_HEADER.pack(
        FRAME_MAGIC, FRAME_VERSION, FRAME_HEADER_SIZE, seq, start_ns, end_ns, len(items), flags, dropped
    )
    return head + b"".join(_ITEM.pack(*it) for it in items)


def with_flags(data: bytes, flags: int) -> bytes:
    """The same frame bytes with `flags` ORed into the frame flags (e.g. FRAME_REPLAYED)."""
    off = 36  # offset of `flags` in struct xt_frame_header
    (old,) = _U32.unpack_from(data, off)
    return data[:off] + _U32.pack(old | flags) + data[off + 4 :]


@dataclass
class ReaderStats:
    frames: int = 0
    lost: int = 0
    overruns: int = 0
    producer_dropped: int = 0
    restarts: int = 0


class FrameReader(ABC):
    """Common part of both readers: sequence accounting and the iteration helpers."""

    def __init__(self) -> None:
        self.catalog: Catalog | None = None
        self.stats = ReaderStats()
        self._last_seq = 0

    @abstractmethod
    def poll(self, timeout: float | None = None) -> Frame | None: ...

    @abstractmethod
    def close(self) -> None: ...

    def _account(self, frame: Frame) -> None:
        if self._last_seq and frame.seq <= self._last_seq:
            self.stats.restarts += 1
        elif self._last_seq and frame.seq > self._last_seq + 1:
            self.stats.lost += frame.seq - self._last_seq - 1
        self._last_seq = frame.seq
        self.stats.frames += 1
        self.stats.producer_dropped = frame.dropped

    def frames(self, timeout: float | None = None) -> Iterator[Frame]:
        while (frame := self.poll(timeout)) is not None:
            yield frame

    def __iter__(self) -> Iterator[Frame]:
        return self.frames(None)

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ShmFrameReader(FrameReader):
    """Reader of the single-producer shared-memory frame ring /dev/shm/<name>."""

    def __init__(self, name: str = "xtune.signals", from_start: bool = False, spin_s: float = 0.0001) -> None:
        super().__init__()
        self.name = name
        self.path = f"/dev/shm/{name}"
        self.spin_s = spin_s
        self._due_ns = 0
        self._checked_ns = 0
        self._page: futex.ReadOnlyPage | None = None
        self._open(from_start)

    def _open(self, from_start: bool) -> None:
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError as e:
            raise FileNotFoundError(
                f"{self.path}: no frame ring (is xobserve running with --shm {self.name}?)"
            ) from e
        try:
            # The producer sizes the file, then writes the magic last: wait briefly for both.
            deadline = time.monotonic() + 2.0
            while os.fstat(fd).st_size < XT_RING_HEADER_SIZE or _U32.unpack(os.pread(fd, 4, 0))[0] == 0:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.005)
            self._inode = os.fstat(fd).st_ino
            self._map = mmap.mmap(fd, 0, prot=mmap.PROT_READ)
            self._page = futex.ReadOnlyPage(fd)  # the head's address, to wait on
        finally:
            os.close(fd)
        header = _RING_HEADER.unpack_from(self._map)
        magic, version, _, self.slot_count, self.slot_size, head = header[:6]
        self._cat_off, self._cat_cap, pid = header[7], header[9], header[10]
        if magic != RING_MAGIC or version != RING_VERSION:
            self._map.close()
            raise FrameError(f"{self.path}: not an xtune frame ring (magic {magic:#x}, version {version})")
        self._pid = pid
        self._catalog_lock = -1
        self._next = max(1, head - self.slot_count + 2) if from_start else head + 1
        self._refresh_catalog()

    def _follow_new_producer(self) -> None:
        """A restarted producer makes a new ring under the same name: switch to it (from its start)."""
        now = time.monotonic_ns()
        if now - self._checked_ns < 100_000_000:
            return
        self._checked_ns = now
        try:
            replaced = os.stat(self.path).st_ino != self._inode
        except FileNotFoundError:
            return
        if replaced:
            self._unmap()
            self._open(from_start=True)
            self._last_seq = 0
            self.stats.restarts += 1

    def _u64(self, off: int) -> int:
        return _U64.unpack_from(self._map, off)[0]

    @property
    def head(self) -> int:
        return self._u64(_RING_HEAD_OFF)

    def skip_to_latest(self) -> int:
        """Continue from the next frame the producer publishes; the frames not read are dropped
        (a loop that starts again after a pause acts on the present, not on frames of the past).
        Returns how many were dropped."""
        head = self.head
        dropped = max(0, head + 1 - self._next)
        self._next = max(self._next, head + 1)
        self._last_seq = self._next - 1
        return dropped

    @property
    def producer_pid(self) -> int:
        return _U32.unpack_from(self._map, _RING_PID_OFF)[0]

    def producer_alive(self) -> bool:
        """Whether a producer publishes under this name (the one read so far, or a new one)."""
        try:
            if os.stat(self.path).st_ino != self._inode:
                return True  # a new producer's ring; poll() switches to it
            os.kill(self.producer_pid, 0)
        except (FileNotFoundError, ProcessLookupError):
            return False
        except PermissionError:
            pass
        return True

    def _refresh_catalog(self) -> None:
        lock = self._u64(_RING_CATALOG_LOCK_OFF)
        if lock == self._catalog_lock or lock & 1 or lock == 0:  # 0: not published yet
            return
        size = _U32.unpack_from(self._map, _RING_CATALOG_SIZE_OFF)[0]
        data = self._map[self._cat_off : self._cat_off + min(size, self._cat_cap)]
        if self._u64(_RING_CATALOG_LOCK_OFF) != lock:
            return
        self.catalog = Catalog.from_json(data)
        self._catalog_lock = lock

    def _try_read(self) -> Frame | None:
        """One attempt at frame self._next; handles overruns and producer restarts."""
        off = XT_RING_HEADER_SIZE + (self._next % self.slot_count) * self.slot_size
        want = 2 * self._next
        lock, size, _ = _SLOT.unpack_from(self._map, off)
        if lock == want:
            data = self._map[off + _SLOT.size : off + _SLOT.size + min(size, self.slot_size - _SLOT.size)]
            if self._u64(off) == want:
                self._next += 1
                return decode_frame(data, self.catalog)
            lock = self._u64(off)
        head = self.head
        if lock > want + 1 or head >= self._next + self.slot_count:
            # Lapped by the producer: skip to the oldest frame that is safe to read.
            resume = max(self._next + 1, head - self.slot_count // 2)
            self.stats.overruns += 1
            self.stats.lost += resume - self._next
            self._last_seq = resume - 1
            self._next = resume
        elif head + 1 < self._next or self.producer_pid != self._pid:
            self._pid = self.producer_pid
            self._next = head + 1
            self._last_seq = 0
            self.stats.restarts += 1
        return None

    def poll(self, timeout: float | None = None) -> Frame | None:
        start = time.monotonic_ns()
        limit = None if timeout is None else start + int(timeout * 1e9)
        while True:
            self._refresh_catalog()
            head = self.head
            if self.catalog is not None:
                frame = self._try_read()
                if frame is not None:
                    self._account(frame)
                    # The next frame is due one window after this one closed.
                    self._due_ns = frame.window_end_ns + max(frame.window_ns, 0)
                    return frame
            now = time.monotonic_ns()
            if limit is not None and now >= limit:
                return None
            if now > self._due_ns:
                self._follow_new_producer()
            if self.catalog is not None and head >= self._next:
                continue  # published meanwhile (or an overrun moved _next): read it
            # Spin within spin_s of the due time: a futex wake-up of an idle vCPU costs tens of
            # microseconds in a VM, a spin nothing (with a CPU to spare; on a saturated host the
            # spin's CPU delays others more, so spin_s=0 there).
            spin_ns = int(self.spin_s * 1e9)
            if spin_ns and self._due_ns - spin_ns <= now <= self._due_ns + spin_ns:
                continue
            # Else until the producer's wake after its next frame (every producer, xobserve and
            # ShmFrameWriter, wakes the head), the start of the next spin, or at most 50 ms (to
            # notice a producer replaced by a new ring under the same name, or a late catalog).
            wait_ns = 50_000_000 if limit is None else min(limit - now, 50_000_000)
            if spin_ns and now < self._due_ns - spin_ns:
                wait_ns = min(wait_ns, self._due_ns - spin_ns - now)
            assert self._page is not None
            futex.wait(self._page.addr + _RING_HEAD_OFF, head & 0xFFFFFFFF, wait_ns)

    def _unmap(self) -> None:
        self._map.close()
        if self._page is not None:
            self._page.close()
            self._page = None

    def close(self) -> None:
        self._unmap()


class ZmqFrameReader(FrameReader):
    """Subscriber to xobserve's ZeroMQ PUB socket (topics "frame" and "catalog")."""

    def __init__(
        self,
        endpoint: str = "tcp://127.0.0.1:5557",
        max_pending: int = 4096,
        context: Any = None,
        curve: ClientKeys | None = None,
    ) -> None:
        import zmq

        super().__init__()
        self.endpoint = endpoint
        self._zmq = zmq
        self._ctx = context or zmq.Context.instance()
        self._sock = self._ctx.socket(zmq.SUB)
        self._sock.setsockopt(zmq.RCVHWM, 100000)
        self._sock.setsockopt(zmq.SUBSCRIBE, TOPIC_CATALOG)
        self._sock.setsockopt(zmq.SUBSCRIBE, TOPIC_FRAME)
        self._poller = zmq.Poller()
        self._poller.register(self._sock, zmq.POLLIN)
        self._watch: HandshakeWatch | None = None
        if curve is not None:
            curve.apply(self._sock)
            # Before connecting: a refused key is said once, and never retried.
            self._watch = HandshakeWatch(self._sock, endpoint, curve)
            self._poller.register(self._watch.monitor, zmq.POLLIN)
        self._sock.connect(endpoint)
        self._pending: deque[bytes] = deque()
        self._max_pending = max_pending

    def poll(self, timeout: float | None = None) -> Frame | None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if self.catalog is not None and self._pending:
                frame = decode_frame(self._pending.popleft(), self.catalog)
                self._account(frame)
                return frame
            wait_ms = -1 if deadline is None else max(0, int((deadline - time.monotonic()) * 1000))
            ready = dict(self._poller.poll(wait_ms))
            if self._watch is not None and self._watch.monitor in ready:
                self._watch.check()  # raises CurveError when the handshake failed
                continue
            if self._sock not in ready:
                return None
            topic, payload = self._sock.recv_multipart(copy=True)
            if topic == TOPIC_CATALOG:
                self.catalog = Catalog.from_json(payload)
            elif topic == TOPIC_FRAME:
                # Frames that arrive before the first catalog wait for it (it follows at once).
                if len(self._pending) < self._max_pending:
                    self._pending.append(payload)

    def close(self) -> None:
        if self._watch is not None:
            self._sock.disable_monitor()
            self._watch.close()
        self._sock.close(linger=0)


class ShmFrameWriter:
    """Producer of the shared-memory frame ring (what xobserve does in C; used by replay)."""

    def __init__(self, name: str, catalog: bytes, slot_count: int = 1024, max_items: int = 1024) -> None:
        if slot_count & (slot_count - 1):
            raise ValueError(f"slot_count {slot_count} is not a power of two")
        self.name = name
        self.slot_count = slot_count
        self.slot_size = (_SLOT.size + FRAME_HEADER_SIZE + max_items * _ITEM.size + 63) & ~63
        self._cat_cap = 256 * 1024
        self._cat_off = XT_RING_HEADER_SIZE + slot_count * self.slot_size
        size = self._cat_off + self._cat_cap
        fd = os.open(f"/dev/shm/{name}", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.ftruncate(fd, size)
            self._map = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        _RING_HEADER.pack_into(
            self._map, 0, 0, RING_VERSION, XT_RING_HEADER_SIZE, slot_count, self.slot_size, 0, 0,
            self._cat_off, 0, self._cat_cap, os.getpid(), 0, 0,
        )  # fmt: skip
        self.set_catalog(catalog)
        _U32.pack_into(self._map, 0, RING_MAGIC)
        self._head = ctypes.c_uint32.from_buffer(self._map, _RING_HEAD_OFF)
        self._head_addr = ctypes.addressof(self._head)

    def set_catalog(self, catalog: bytes) -> None:
        lock = _U64.unpack_from(self._map, _RING_CATALOG_LOCK_OFF)[0]
        _U64.pack_into(self._map, _RING_CATALOG_LOCK_OFF, lock + 1)
        data = catalog[: self._cat_cap]
        self._map[self._cat_off : self._cat_off + len(data)] = data
        _U32.pack_into(self._map, _RING_CATALOG_SIZE_OFF, len(data))
        _U64.pack_into(self._map, _RING_CATALOG_LOCK_OFF, lock + 2)

    def publish(self, frame: bytes) -> None:
        seq, *_ = frame_header(frame)
        if _SLOT.size + len(frame) > self.slot_size:
            raise FrameError(f"frame of {len(frame)} bytes does not fit a {self.slot_size}-byte slot")
        off = XT_RING_HEADER_SIZE + (seq % self.slot_count) * self.slot_size
        _U64.pack_into(self._map, off, 2 * seq - 1)
        self._map[off + _SLOT.size : off + _SLOT.size + len(frame)] = frame
        _U32.pack_into(self._map, off + 8, len(frame))
        _U64.pack_into(self._map, off, 2 * seq)
        _U64.pack_into(self._map, _RING_HEAD_OFF, seq)
        (dropped,) = _U64.unpack_from(frame, 40)
        _U64.pack_into(self._map, _RING_DROPPED_OFF, dropped)
        futex.wake(self._head_addr, 1 << 30)  # every reader waiting on the head

    def close(self, unlink: bool = True) -> None:
        del self._head  # a buffer export keeps the map from closing
        self._map.close()
        if unlink:
            try:
                os.unlink(f"/dev/shm/{self.name}")
            except FileNotFoundError:
                pass


class ZmqFramePublisher:
    """Publisher of ["frame", bytes] / ["catalog", json] like xobserve (used by replay).

    Sends block rather than drop (XPUB_NODROP), so a replay never loses frames to a slow reader.
    """

    def __init__(self, endpoint: str, catalog: bytes) -> None:
        import zmq

        self._zmq = zmq
        self._sock: Any = zmq.Context.instance().socket(zmq.XPUB)
        self._sock.setsockopt(zmq.XPUB_VERBOSE, 1)
        self._sock.setsockopt(zmq.XPUB_NODROP, 1)
        self._sock.setsockopt(zmq.SNDHWM, 100000)
        self._sock.bind(endpoint)
        self.catalog = catalog
        self.endpoint = endpoint

    def wait_subscriber(self, timeout: float) -> bool:
        """Wait for one subscription (frames sent before anyone subscribed are gone)."""
        if not self._sock.poll(int(timeout * 1000)):
            return False
        self._answer_subscriptions()
        return True

    def _answer_subscriptions(self) -> None:
        while self._sock.poll(0):
            if self._sock.recv()[:1] == b"\x01":
                self._sock.send_multipart([TOPIC_CATALOG, self.catalog])

    def set_catalog(self, catalog: bytes) -> None:
        self.catalog = catalog
        self._sock.send_multipart([TOPIC_CATALOG, catalog])

    def publish(self, frame: bytes) -> None:
        self._answer_subscriptions()
        self._sock.send_multipart([TOPIC_FRAME, frame])

    def close(self) -> None:
        self._sock.close(linger=1000)
