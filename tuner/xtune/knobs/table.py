"""Client of xrtd: the control socket (line-delimited JSON) and the shared knob table.

The table (include/xtune/knob.h) is mapped read-write: `KnobTable.write_desired` stores a
slot's `desired` and bumps `desired_gen` with no system call; xrtd applies it and publishes
`applied`. Everything else (register, transactions, rollback, lease) goes over the socket.
"""

from __future__ import annotations

import builtins
import contextlib
import ctypes
import json
import mmap
import os
import socket
import struct
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from xtune import futex, paths

# Layout from knob.h (checked against the header by tests/runtime/test_table_layout.py).
TABLE_MAGIC = 0x544B5458
HEADER_SIZE = 4096
SLOT_SIZE = 512
SLOT_COUNT = 256
KNOB_TABLE_SIZE = HEADER_SIZE + SLOT_SIZE * SLOT_COUNT  # XT_KNOB_TABLE_SIZE: what is mapped
NAME_LEN = 64
TARGET_LEN = 192
OFF_DOORBELL = 24
OFF_LEASE_DEADLINE = 32
OFF_BACKEND = 256
OFF_TYPE = 260
OFF_MIN = 264
OFF_MAX = 272
OFF_STEP = 280
OFF_ORIGINAL = 288
OFF_REG_GEN = 296
OFF_DESIRED = 384
OFF_DESIRED_GEN = 392
OFF_SEQ = 448
OFF_APPLIED = 456
OFF_APPLIED_GEN = 464
OFF_STATE = 472
OFF_ERROR = 476
OFF_APPLIED_NS = 480

STATES = ("free", "registered", "applying", "applied", "refused", "failed", "rolled_back")
BACKENDS = ("none", "sysctl", "sysfs", "bpf", "sie-user", "sie-kernel")


class KnobError(RuntimeError):
    """A request to xrtd failed; the message says what is wrong and where."""


class KnobRefused(KnobError):
    """xrtd answered and refused the request (a value out of range, a backend that could not apply
    it): the connection holds, and a refused transaction changed nothing."""


@dataclass(frozen=True)
class SlotView:
    """A consistent snapshot of one slot (read under its seqlock)."""

    index: int
    name: str
    target: str
    backend: str
    min: int
    max: int
    step: int
    original: int
    desired: int
    desired_gen: int
    applied: int
    applied_gen: int
    state: str
    error: int
    applied_ns: int  # CLOCK_MONOTONIC (time.monotonic_ns) when xrtd published applied/state


class KnobTable:
    """The shared knob table, mapped read-write (the tuner owns `desired` and `desired_gen`)."""

    def __init__(self, shm_name: str = paths.KNOBS_SHM) -> None:
        path = f"/dev/shm/{shm_name}"
        # Never through a link: a link planted in /dev/shm would have the tuner write elsewhere.
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            self._mm = mmap.mmap(fd, KNOB_TABLE_SIZE)
        finally:
            os.close(fd)
        magic, _version, header_size, slot_size, slot_count = struct.unpack_from("<IHHII", self._mm, 0)
        if (magic, header_size, slot_size, slot_count) != (TABLE_MAGIC, HEADER_SIZE, SLOT_SIZE, SLOT_COUNT):
            raise KnobError(f"{path}: not a knob table of this layout (magic {magic:#x})")
        self._doorbell = ctypes.c_uint32.from_buffer(self._mm, OFF_DOORBELL)
        # 8-byte fields through native views: one aligned load/store each, never torn
        # (struct.pack_into with "<" writes byte by byte).
        self._i64 = memoryview(self._mm).cast("q")
        self._u64 = memoryview(self._mm).cast("Q")

    def close(self) -> None:
        del self._doorbell
        self._i64.release()
        self._u64.release()
        self._mm.close()

    def __enter__(self) -> KnobTable:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _off(self, index: int) -> int:
        if not 0 <= index < SLOT_COUNT:
            raise KnobError(f"slot {index} out of range 0..{SLOT_COUNT - 1}")
        return HEADER_SIZE + index * SLOT_SIZE

    def index(self, name: str) -> int:
        """Slot index of a registered knob, by name."""
        for i in range(SLOT_COUNT):
            off = self._off(i)
            if struct.unpack_from("<I", self._mm, off + OFF_STATE)[0] == 0:
                continue
            raw = self._mm[off : off + NAME_LEN]
            if raw.split(b"\0", 1)[0].decode() == name:
                return i
        raise KnobError(f"knob {name!r} is not in the table")

    def write_desired(self, index: int, value: int, ring: bool = False) -> int:
        """Store `desired` then bump `desired_gen` (x86 keeps the order); return the new gen.

        With `ring`, also bump the doorbell and FUTEX_WAKE xrtd (one system call) to cut latency.
        """
        off = self._off(index)
        gen = self._u64[(off + OFF_DESIRED_GEN) // 8] + 1
        self._i64[(off + OFF_DESIRED) // 8] = value
        self._u64[(off + OFF_DESIRED_GEN) // 8] = gen
        if ring:
            self.ring()
        return gen

    def ring(self) -> None:
        """Bump the doorbell and wake xrtd's watcher."""
        self._doorbell.value = (self._doorbell.value + 1) & 0xFFFFFFFF
        futex.wake(ctypes.addressof(self._doorbell))

    def read(self, index: int) -> SlotView:
        """Snapshot a slot; retries while xrtd is publishing (odd seq)."""
        off = self._off(index)
        while True:
            seq1 = self._u64[(off + OFF_SEQ) // 8]
            if seq1 & 1:
                continue
            applied, applied_gen = (
                self._i64[(off + OFF_APPLIED) // 8],
                self._u64[(off + OFF_APPLIED_GEN) // 8],
            )
            state, error = struct.unpack_from("<Ii", self._mm, off + OFF_STATE)
            applied_ns = self._u64[(off + OFF_APPLIED_NS) // 8]
            if self._u64[(off + OFF_SEQ) // 8] == seq1:
                break
        name = self._mm[off : off + NAME_LEN].split(b"\0", 1)[0].decode()
        target = self._mm[off + NAME_LEN : off + NAME_LEN + TARGET_LEN].split(b"\0", 1)[0].decode()
        backend, _type, vmin, vmax, step, original = struct.unpack_from(
            "<IIqqqq", self._mm, off + OFF_BACKEND
        )
        desired, desired_gen = struct.unpack_from("<qQ", self._mm, off + OFF_DESIRED)
        return SlotView(
            index=index,
            name=name,
            target=target,
            backend=BACKENDS[backend] if backend < len(BACKENDS) else str(backend),
            min=vmin,
            max=vmax,
            step=step,
            original=original,
            desired=desired,
            desired_gen=desired_gen,
            applied=applied,
            applied_gen=applied_gen,
            state=STATES[state] if state < len(STATES) else str(state),
            error=error,
            applied_ns=applied_ns,
        )

    def wait_applied(self, index: int, gen: int, timeout: float = 1.0, spin: float = 0.001) -> SlotView:
        """Wait until xrtd answered desired_gen `gen` (applied, refused or failed).

        Spins for `spin` seconds (xrtd usually answers within tens of µs), then polls every 50 µs.
        """
        off = self._off(index)
        start = time.monotonic()
        while self._u64[(off + OFF_APPLIED_GEN) // 8] < gen:
            waited = time.monotonic() - start
            if waited > timeout:
                raise KnobError(f"slot {index}: xrtd did not answer gen {gen} within {timeout}s")
            if waited > spin:
                time.sleep(50e-6)
        return self.read(index)


class KnobClient:
    """Control-socket client of one xrtd. Not thread-safe except `start_lease`'s own connection.

    With `client`, the connection speaks for that named client (hello): its lease covers only the
    knobs it registered or set, and `start_lease` renews that client's lease. Without, it speaks for
    the anonymous client, shared by every connection that gives no name.
    """

    def __init__(
        self,
        socket_path: str | os.PathLike[str] = paths.XRTD_SOCKET,
        timeout: float = 10.0,
        client: str | None = None,
    ) -> None:
        self.socket_path = str(socket_path)
        self.timeout = timeout
        self.client_name = client
        self._connect()
        self._lease: _LeaseThread | None = None
        if client is not None:
            try:
                self.call("hello", client=client)
            except BaseException:
                self.close()
                raise

    def _connect(self) -> None:
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(self.timeout)
        try:
            self._sock.connect(self.socket_path)
        except OSError as exc:
            self._sock.close()
            raise KnobError(f"cannot connect to xrtd at {self.socket_path}: {exc.strerror}") from exc
        self._rfile = self._sock.makefile("rb")

    def _exchange(self, line: bytes) -> bytes:
        """One request line out, its reply line back (b"" when xrtd closed the connection)."""
        self._sock.sendall(line + b"\n")
        return self._rfile.readline()

    def _disconnect(self) -> None:
        self._rfile.close()
        self._sock.close()

    def connect_again(self) -> KnobClient:
        """A second connection to the same xrtd, speaking for the same client (the lease's)."""
        return KnobClient(self.socket_path, self.timeout, self.client_name)

    def close(self) -> None:
        self.stop_lease()
        self._disconnect()

    def __enter__(self) -> KnobClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def call(self, op: str, **fields: Any) -> dict[str, Any]:
        """Send one request, return the reply; raise KnobRefused when xrtd says ok=false (KnobError
        when the answer is a bridge's: its xrtd is gone, nothing was judged)."""
        reply = self.call_raw(json.dumps({"op": op, **fields}).encode())
        if not reply.get("ok"):
            error = str(reply.get("error", f"{op}: error reply without a message"))
            raise (KnobError if error.startswith("xrtd-bridge:") else KnobRefused)(error)
        return reply

    def call_raw(self, line: bytes) -> dict[str, Any]:
        """Send one raw line (tests use it for malformed input); return the parsed reply."""
        data = self._exchange(line.rstrip(b"\n"))
        if not data:
            raise KnobError(f"xrtd at {self.socket_path} closed the connection")
        return json.loads(data)

    def register(
        self,
        name: str,
        backend: str,
        target: str,
        min: int | None = None,
        max: int | None = None,
        step: int | None = None,
        enum: Sequence[str] | None = None,
        netns: str | None = None,
    ) -> dict[str, Any]:
        fields: dict[str, Any] = {"name": name, "backend": backend, "target": target}
        for key, value in (("min", min), ("max", max), ("step", step), ("netns", netns)):
            if value is not None:
                fields[key] = value
        if enum is not None:
            fields["enum"] = list(enum)
        return self.call("register", **fields)["knob"]

    def unregister(self, name: str) -> dict[str, Any]:
        return self.call("unregister", name=name)["knob"]

    def set(self, name: str, value: int | str, reason: str = "") -> dict[str, Any]:
        """Apply a value (or queue it inside a transaction); returns the knob."""
        return self.call("set", name=name, value=value, reason=reason).get("knob", {})

    def get(self, name: str) -> dict[str, Any]:
        return self.call("get", name=name)["knob"]

    def list(self) -> list[dict[str, Any]]:
        return self.call("list")["knobs"]

    def begin(self) -> int:
        return self.call("begin")["txn"]

    def commit(self) -> builtins.list[dict[str, Any]]:
        return self.call("commit")["knobs"]

    def abort(self) -> None:
        self.call("abort")

    @contextlib.contextmanager
    def transaction(self) -> Iterator[KnobClient]:
        """All sets inside apply together at the end, or none does (KnobError names the knob)."""
        self.begin()
        try:
            yield self
        except BaseException:
            self.abort()
            raise
        self.commit()

    def rollback(
        self, names: Sequence[str] | None = None, to: str = "original", reason: str = ""
    ) -> builtins.list[dict[str, Any]]:
        fields: dict[str, Any] = {"to": to, "reason": reason}
        if names is not None:
            fields["names"] = list(names)
        return self.call("rollback", **fields)["knobs"]

    def good(self, names: Sequence[str] | None = None) -> None:
        """Mark the current values last-known-good (what lease expiry reverts to)."""
        self.call("good", **({"names": list(names)} if names is not None else {}))

    def keep(self, names: Sequence[str] | None = None) -> None:
        """Leave the current values in place when xrtd exits."""
        self.call("keep", **({"names": list(names)} if names is not None else {}))

    def heartbeat(self, lease_ms: int = 300) -> dict[str, Any]:
        return self.call("heartbeat", lease_ms=lease_ms)

    def release(self) -> None:
        """End the lease without reverting."""
        self.call("release")

    def status(self) -> dict[str, Any]:
        return self.call("status")

    def table(self) -> KnobTable:
        """Map the shared table this xrtd publishes."""
        return KnobTable(self.status()["shm"])

    def start_lease(self, period: float = 0.05, lease_ms: int = 300) -> None:
        """Renew the lease from a background thread (own connection) every `period` seconds."""
        self.stop_lease()
        self._lease = _LeaseThread(self.connect_again(), period, lease_ms)
        self._lease.start()

    @property
    def lease_error(self) -> Exception | None:
        """Why the lease thread stopped renewing (the lease is lost), or None."""
        return self._lease.error if self._lease is not None else None

    def stop_lease(self, release: bool = True) -> None:
        """Stop renewing; with `release`, end the lease so xrtd does not revert."""
        if self._lease is not None:
            self._lease.stop(release)
            self._lease = None


class _LeaseThread(threading.Thread):
    def __init__(self, client: KnobClient, period: float, lease_ms: int) -> None:
        super().__init__(name="xtune-lease", daemon=True)
        self._client = client
        self._period = period
        self._lease_ms = lease_ms
        self._done = threading.Event()
        self.error: Exception | None = None

    def run(self) -> None:
        try:
            while not self._done.is_set():
                self._client.heartbeat(self._lease_ms)
                self._done.wait(self._period)
        except (KnobError, OSError) as exc:
            self.error = exc

    def stop(self, release: bool) -> None:
        self._done.set()
        self.join()
        with contextlib.suppress(KnobError, OSError):
            if release:
                self._client.release()
        self._client.close()
