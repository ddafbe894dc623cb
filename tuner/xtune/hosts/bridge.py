"""A client of a remote xrtd through `xrtd-bridge`: the control protocol over ZeroMQ with CURVE.

Each `BridgeClient` is one DEALER socket, hence one xrtd connection on the host (the bridge keeps
one per remote peer) and, after `hello`, one xrtd client with its own lease. Keys are those of
`xrtd-bridge --keygen DIR` (`client.key`, `client.pub`, the host's `server.pub`). A refused key or a
wrong server key raises `KnobError` naming the cause; nothing reached xrtd.
"""

from __future__ import annotations

import time
from typing import Any

from xtune.knobs.table import KnobClient, KnobError
from xtune.signals.curve import ClientKeys, CurveError, HandshakeWatch


class BridgeClient(KnobClient):
    def __init__(
        self, endpoint: str, keys: ClientKeys, timeout: float = 10.0, client: str | None = None
    ) -> None:
        self.keys = keys
        super().__init__(endpoint, timeout, client)

    def _connect(self) -> None:
        import zmq

        self._zmq = zmq
        self._sock: Any = zmq.Context.instance().socket(zmq.DEALER)
        self._sock.setsockopt(zmq.LINGER, 0)
        self.keys.apply(self._sock)
        self._watch = HandshakeWatch(self._sock, self.socket_path, self.keys)
        self._sock.connect(self.socket_path)

    def _exchange(self, line: bytes) -> bytes:
        if self._sock.closed:
            raise KnobError(f"bridge at {self.socket_path}: connection given up after an earlier error")
        self._sock.send(line)
        deadline = time.monotonic() + self.timeout
        while not self._sock.poll(50):
            try:
                self._watch.check()
            except CurveError as e:
                self._disconnect()
                raise KnobError(f"bridge at {self.socket_path}: {e}") from None
            if time.monotonic() > deadline:
                # A reply that comes later would answer the next request: give the socket up.
                self._disconnect()
                raise KnobError(f"bridge at {self.socket_path}: no reply within {self.timeout:g} s")
        return bytes(self._sock.recv()) + b"\n"

    def _disconnect(self) -> None:
        if not self._sock.closed:
            self._watch.close()
            self._sock.close(linger=0)

    def connect_again(self) -> KnobClient:
        return BridgeClient(self.socket_path, self.keys, self.timeout, self.client_name)
