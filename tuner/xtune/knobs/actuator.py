"""The tuner's side of xrtd: register the file's knobs, apply values as one transaction, roll back.

A thin adapter over `xtune.knobs.table.KnobClient` (the knob plane's client): every change carries a
reason for xrtd's audit log, every set of values is one transaction (all or nothing), the lease is
renewed from a background thread while the loop runs, and `finish` keeps or restores the values
as the SLO file says. Per-window policies write `desired` straight into the shared table. Each
actuator is its own named xrtd client: its lease covers only its knobs, so another tuner's lease
running out leaves them alone.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import Any

from xtune.config.schema import Knob
from xtune.knobs.table import KnobClient, KnobError, KnobTable


class Choice(str):
    """An enum knob's value: the choice's name, which also converts to its index among the
    knob's choices (what a gauge of the knob shows)."""

    position: int

    def __new__(cls, name: str, index: int) -> Choice:
        choice = super().__new__(cls, name)
        choice.position = index
        return choice

    def __float__(self) -> float:
        return float(self.position)


def applied_value(knob: dict[str, Any]) -> Any:
    """What a knob holds as the SLO file names it: an enum knob's choice (xrtd's `applied` is the
    choice's index), an int knob's number."""
    return Choice(knob["text"], int(knob["applied"])) if knob.get("type") == "enum" else knob["applied"]


class Actuator:
    def __init__(
        self,
        socket_path: str,
        knobs: list[Knob],
        lease_ms: int = 1000,
        connect: Callable[[str], KnobClient] | None = None,
    ) -> None:
        """`connect(client_name)` opens the client (default: xrtd's socket at `socket_path`)."""
        self.knobs = knobs
        name = f"tuner-{os.getpid()}-{os.urandom(3).hex()}"
        self.client = connect(name) if connect else KnobClient(socket_path, client=name)
        self.registered: list[str] = []
        self.original: dict[str, Any] = {}
        self.current: dict[str, Any] = {}
        self.good: dict[str, Any] = {}
        self._table: KnobTable | None = None
        self._slots: dict[str, int] = {}
        try:
            for k in knobs:
                lo, hi = k.range if k.range else (None, None)
                reply = self.client.register(
                    k.name, k.backend, k.target, min=lo, max=hi, step=k.step, enum=k.values, netns=k.netns
                )
                self.registered.append(k.name)
                self.original[k.name] = applied_value(reply)
            self.current = dict(self.original)
            self.good = dict(self.original)
            self.client.start_lease(period=0.05, lease_ms=lease_ms)
        except BaseException:
            self.close(restore=True)
            raise

    def apply(self, values: dict[str, Any], reason: str) -> dict[str, Any]:
        """Apply all values in one transaction; returns what xrtd applied (read back)."""
        changed = {k: v for k, v in values.items() if self.current.get(k) != v}
        if changed:
            with self.client.transaction():
                for name, value in changed.items():
                    self.client.set(name, value, reason=reason)
            for knob in self.client.list():
                if knob["name"] in self.current:
                    self.current[knob["name"]] = applied_value(knob)
        return dict(self.current)

    def mark_good(self) -> None:
        """The current values hold the SLO: lease expiry and rollbacks return here."""
        self.client.good(self.registered)
        self.good = dict(self.current)

    def restore_original(self, reason: str) -> dict[str, Any]:
        """Back to the values found at registration (outside the knobs' ranges too); returns them."""
        for knob in self.client.rollback(self.registered, to="original", reason=reason):
            self.current[knob["name"]] = applied_value(knob)
        return dict(self.current)

    def rollback(self, reason: str) -> dict[str, Any]:
        """Back to the last good values through xrtd; returns them."""
        for knob in self.client.rollback(self.registered, to="good", reason=reason):
            self.current[knob["name"]] = applied_value(knob)
        return dict(self.current)

    def table(self) -> KnobTable:
        """The shared table (for writes from the fast path, no system call)."""
        if self._table is None:
            self._table = self.client.table()
            self._slots = {name: self._table.index(name) for name in self.registered}
        return self._table

    def write_desired(self, values: dict[str, int]) -> None:
        """Fast-path write of desired values; xrtd checks, journals and applies them."""
        table = self.table()
        for name, value in values.items():
            table.write_desired(self._slots[name], int(value))
        table.ring()
        self.current.update(values)

    def read_applied(self) -> dict[str, int]:
        table = self.table()
        return {name: table.read(slot).applied for name, slot in self._slots.items()}

    def close(self, restore: bool) -> None:
        """Stop the lease; keep the values in place, or restore the originals."""
        with contextlib.suppress(KnobError, OSError):
            self.client.stop_lease(release=True)
            if restore:
                if self.registered:
                    self.client.rollback(self.registered, to="original", reason="tuning finished: restore")
            elif self.registered:
                self.client.keep(self.registered)
        if self._table is not None:
            self._table.close()
            self._table = None
        if restore:
            for name in self.registered:
                with contextlib.suppress(KnobError, OSError):
                    self.client.unregister(name)
        self.client.close()
