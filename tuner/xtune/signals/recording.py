"""Recordings: signals, knob changes and decisions of a run, in one appendable file.

The byte layout is defined once, in `include/xtune/recording.h` (and described in
`observers/README.md`): a 24-byte file header, then records of a 16-byte header
(type u16, flags u16, size u32, time_ns u64 CLOCK_MONOTONIC) and `size` payload bytes.
Every record is written with one `write()` on a file opened with O_APPEND, so xobserve, `xtune
record` and the tuner can append to the same file, and readers can follow it while it grows.

Public API
----------
`RecordType`: CATALOG (catalog JSON), FRAME (frame bytes of signal.h), KNOB_CHANGE and DECISION
(JSON objects, see `KnobChange` and `Decision`). Readers skip types they do not know.

`RecordingWriter(path)` opens (creating if needed) a recording for appending; a torn record at the
end (a writer that crashed mid-write) is cut off first. Methods:
  - `append_catalog(catalog_or_json_bytes)`, `append_frame(frame_bytes)`,
    `append_frame_of(frame_bytes, live_catalog)` (writes the catalog first when it changed)
  - `append_knob_change(KnobChange(knob, backend, old, new, reason, ...))`
  - `append_decision(Decision(policy, values, reason, ...))`
  - `append(type, payload, time_ns=None)` for anything else; `close()`; a context manager.

`RecordingReader(path)`: `header` (`version`, `created_unix_ns`), and
  - `records(follow=False, idle_timeout=None)`: every complete `Record(type, time_ns, payload,
    offset)`; with `follow=True` it waits for records still being written (like `tail -f`) and
    stops after `idle_timeout` seconds without one (None: forever).
  - `frames(...)`: the FRAME records decoded with the catalog recorded before them.
  - `knob_changes()`, `decisions()`: the decoded KNOB_CHANGE / DECISION records.
Bad files raise `RecordingError` naming the file and the offset.
"""

from __future__ import annotations

import json
import os
import struct
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, fields
from enum import IntEnum
from typing import Any, Self

from xtune.signals.frames import Catalog, Frame, decode_frame

MAGIC = b"XTRECORD"
VERSION = 1
_FILE_HEADER = struct.Struct("<8sHHIQ")
_RECORD_HEADER = struct.Struct("<HHIQ")
FILE_HEADER_SIZE = _FILE_HEADER.size
RECORD_HEADER_SIZE = _RECORD_HEADER.size


class RecordType(IntEnum):
    CATALOG = 1
    FRAME = 2
    KNOB_CHANGE = 3
    DECISION = 4


class RecordingError(ValueError):
    """A file that is not a readable recording (the message names file and offset)."""


@dataclass(frozen=True)
class RecordingHeader:
    version: int
    header_size: int
    created_unix_ns: int


@dataclass(frozen=True)
class Record:
    type: int
    time_ns: int
    payload: bytes
    offset: int  # of the record header in the file

    def json(self) -> Any:
        return json.loads(self.payload)


class _JsonRecord:
    """A record stored as one JSON object: its fields, with the `extra` ones merged in."""

    def to_json(self) -> bytes:
        doc = asdict(self)  # type: ignore[call-overload]
        doc.update(doc.pop("extra"))
        return json.dumps(doc).encode()

    @classmethod
    def from_json(cls, payload: bytes) -> Self:
        doc = json.loads(payload)
        known = {f.name: doc.pop(f.name) for f in fields(cls) if f.name != "extra" and f.name in doc}  # type: ignore[arg-type]
        return cls(**known, extra=doc)  # type: ignore[call-arg]  # the subclasses' fields


@dataclass
class KnobChange(_JsonRecord):
    """A knob moved: written by the tuner (or xrtd's client) when it changes a value."""

    knob: str
    backend: str
    old: float | str | None
    new: float | str
    reason: str
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Decision(_JsonRecord):
    """What a policy chose and why (values by knob name; objective and trial if known)."""

    policy: str
    values: dict[str, float | str]
    reason: str
    objective: float | None = None
    trial: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _read_header(path: str, data: bytes) -> RecordingHeader:
    if len(data) < FILE_HEADER_SIZE:
        raise RecordingError(f"{path}: {len(data)} bytes, shorter than the recording header")
    magic, version, header_size, _, created = _FILE_HEADER.unpack_from(data)
    if magic != MAGIC:
        raise RecordingError(f"{path}: not an xtune recording (magic {magic!r} at offset 0)")
    if version != VERSION:
        raise RecordingError(f"{path}: recording version {version}, this reader knows {VERSION}")
    if header_size < FILE_HEADER_SIZE:
        raise RecordingError(f"{path}: header size {header_size} at offset 6 is too small")
    return RecordingHeader(version, header_size, created)


def _complete_end(fd: int, path: str) -> int:
    """Offset just after the last complete record."""
    size = os.fstat(fd).st_size
    header = _read_header(path, os.pread(fd, FILE_HEADER_SIZE, 0))
    off = header.header_size
    while off + RECORD_HEADER_SIZE <= size:
        _, _, length, _ = _RECORD_HEADER.unpack(os.pread(fd, RECORD_HEADER_SIZE, off))
        if off + RECORD_HEADER_SIZE + length > size:
            break
        off += RECORD_HEADER_SIZE + length
    return off


class RecordingWriter:
    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._catalog: bytes | None = None  # the last catalog written
        self._catalog_seen: Catalog | None = None  # the last live catalog checked against it
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
        try:
            if os.fstat(self._fd).st_size == 0:
                os.write(self._fd, _FILE_HEADER.pack(MAGIC, VERSION, FILE_HEADER_SIZE, 0, time.time_ns()))
            else:
                end = _complete_end(self._fd, self.path)
                if end < os.fstat(self._fd).st_size:
                    os.ftruncate(self._fd, end)
        except BaseException:
            os.close(self._fd)
            raise

    def append(self, rtype: int, payload: bytes, time_ns: int | None = None) -> None:
        stamp = time.monotonic_ns() if time_ns is None else time_ns
        data = _RECORD_HEADER.pack(rtype, 0, len(payload), stamp) + payload
        if os.write(self._fd, data) != len(data):
            raise OSError(f"{self.path}: short write of a {len(data)}-byte record")

    def append_catalog(self, catalog: Catalog | bytes) -> None:
        self._catalog = catalog.to_json() if isinstance(catalog, Catalog) else catalog
        self.append(RecordType.CATALOG, self._catalog)

    def append_frame_of(self, frame: bytes, catalog: Catalog | None) -> None:
        """A frame read live, preceded by its producer's catalog when that is not the last one
        written (the first frame, or a restarted producer): each frame decodes with the catalog
        before it."""
        if catalog is not None and catalog is not self._catalog_seen:
            self._catalog_seen = catalog
            if catalog.to_json() != self._catalog:
                self.append_catalog(catalog)
        self.append_frame(frame)

    def append_frame(self, frame: bytes) -> None:
        self.append(RecordType.FRAME, frame)

    def append_knob_change(self, change: KnobChange) -> None:
        self.append(RecordType.KNOB_CHANGE, change.to_json())

    def append_decision(self, decision: Decision) -> None:
        self.append(RecordType.DECISION, decision.to_json())

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> RecordingWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RecordingReader:
    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        with open(self.path, "rb") as f:
            self.header = _read_header(self.path, f.read(FILE_HEADER_SIZE))

    def records(
        self, follow: bool = False, idle_timeout: float | None = None, poll_s: float = 0.02
    ) -> Iterator[Record]:
        with open(self.path, "rb") as f:
            off = self.header.header_size
            idle_since = time.monotonic()
            while True:
                f.seek(off)
                head = f.read(RECORD_HEADER_SIZE)
                if len(head) == RECORD_HEADER_SIZE:
                    rtype, _, length, stamp = _RECORD_HEADER.unpack(head)
                    payload = f.read(length)
                    if len(payload) == length:
                        yield Record(rtype, stamp, payload, off)
                        off += RECORD_HEADER_SIZE + length
                        idle_since = time.monotonic()
                        continue
                if not follow:
                    if head:
                        raise RecordingError(
                            f"{self.path}: torn record at offset {off} (file still being written?)"
                        )
                    return
                if idle_timeout is not None and time.monotonic() - idle_since > idle_timeout:
                    return
                time.sleep(poll_s)

    def frames(self, follow: bool = False, idle_timeout: float | None = None) -> Iterator[Frame]:
        catalog: Catalog | None = None
        for rec in self.records(follow, idle_timeout):
            if rec.type == RecordType.CATALOG:
                catalog = Catalog.from_json(rec.payload)
            elif rec.type == RecordType.FRAME:
                yield decode_frame(rec.payload, catalog)

    def knob_changes(self) -> Iterator[KnobChange]:
        for rec in self.records():
            if rec.type == RecordType.KNOB_CHANGE:
                yield KnobChange.from_json(rec.payload)

    def decisions(self) -> Iterator[Decision]:
        for rec in self.records():
            if rec.type == RecordType.DECISION:
                yield Decision.from_json(rec.payload)
