"""CURVE keys of the signal path and why a CURVE handshake with xobserve failed.

The key files are xobserve's (`xobserve --zmq-keygen DIR`, observers/README.md): one Z85 key per
file. A subscriber needs `client.key`, `client.pub` and the server's `server.pub`.

ZeroMQ gives a SUB socket no error for a refused handshake: it just receives nothing.
`HandshakeWatch` reads the socket's monitor events and turns a failed handshake into a
`CurveError` that names the likely cause.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# A wrong server key shows only as handshakes that end without detail (the server cannot decrypt
# the client's HELLO and drops the connection); a few in a row with no success are not chance.
NO_DETAIL_FAILURES = 3


class CurveError(ConnectionError):
    """The CURVE handshake with the publisher failed; the message names the likely cause."""


def _read_key(path: Path, secret: bool) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as e:
        raise CurveError(f"{path}: {e.strerror}") from None
    try:
        mode = os.fstat(fd).st_mode
        if secret and mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise CurveError(
                f"{path}: secret key readable by group or others (mode {stat.S_IMODE(mode):04o}): "
                "refused; chmod 600 it"
            )
        text = os.read(fd, 128).split()
    finally:
        os.close(fd)
    if not text or len(text[0]) != 40:
        raise CurveError(f"{path}: not a Z85 CURVE key (40 characters)")
    return text[0]


@dataclass(frozen=True)
class ClientKeys:
    """A subscriber's keypair and the publisher's public key, each Z85 (40 bytes)."""

    secret: bytes
    public: bytes
    server: bytes

    @classmethod
    def load(cls, directory: str | Path) -> ClientKeys:
        d = Path(directory)
        return cls(
            secret=_read_key(d / "client.key", secret=True),
            public=_read_key(d / "client.pub", secret=False),
            server=_read_key(d / "server.pub", secret=False),
        )

    def apply(self, sock: Any) -> None:
        """Make `sock` (a pyzmq socket, before it connects) a CURVE client of the server."""
        import zmq

        sock.setsockopt(zmq.CURVE_SECRETKEY, self.secret)
        sock.setsockopt(zmq.CURVE_PUBLICKEY, self.public)
        sock.setsockopt(zmq.CURVE_SERVERKEY, self.server)


class HandshakeWatch:
    """The handshake events of one connecting socket (its monitor, set up before it connects)."""

    def __init__(self, sock: Any, endpoint: str, keys: ClientKeys) -> None:
        import zmq

        self._zmq = zmq
        self.endpoint = endpoint
        self.keys = keys
        self.succeeded = False
        self._failures = 0
        self.monitor = sock.get_monitor_socket(
            zmq.EVENT_HANDSHAKE_SUCCEEDED
            | zmq.EVENT_HANDSHAKE_FAILED_AUTH
            | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
            | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
        )

    def check(self) -> None:
        """Read the pending events; raise `CurveError` when they say the handshake cannot succeed."""
        from zmq.utils.monitor import recv_monitor_message

        zmq = self._zmq
        while self.monitor.poll(0):
            msg = recv_monitor_message(self.monitor)
            event, value = msg["event"], msg["value"]
            if event == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                self.succeeded, self._failures = True, 0
            elif event == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
                raise CurveError(
                    f"{self.endpoint} refused this subscriber's CURVE key (ZAP status {value}): "
                    f"public key {self.keys.public.decode()} is not in the publisher's "
                    "authorized_clients"
                )
            elif event == zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL:
                raise CurveError(self._protocol_reason(value))
            elif event == zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL:
                self._failures += 1
                if self._failures >= NO_DETAIL_FAILURES:
                    raise CurveError(
                        f"CURVE handshake with {self.endpoint} failed {self._failures} times "
                        f"({os.strerror(value)}): the server key {self.keys.server.decode()} "
                        "is probably not the publisher's (server.pub does not match its server.key)"
                    )

    def _protocol_reason(self, value: int) -> str:
        zmq = self._zmq
        if value == zmq.PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH:
            return (
                f"{self.endpoint} does not speak CURVE (security mechanism mismatch): "
                "the publisher runs without --zmq-curve"
            )
        return f"CURVE handshake with {self.endpoint} failed: protocol error {value:#x}"

    def close(self) -> None:
        self.monitor.close(linger=0)
