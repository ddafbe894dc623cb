"""The golden workload: commands whose replies must be identical between two servers.

Values straddle the read sizes a PROTO_IOBUF_LEN change moves (one byte below, at and above
2/4/8/16/32 KiB, bulk arguments of redis's big-argument path, a 1 MiB one), sent as one pipeline
(many reads per call) and one command at a time; `CLIENT INFO` on a fresh connection reports the
query buffer the read path allocated and the reply buffer (PROTO_REPLY_CHUNK_BYTES), which depend
on the values themselves."""

from __future__ import annotations

import hashlib
import socket

SIZES = [
    0,
    1,
    100,
    2047,
    2048,
    4095,
    4096,
    8191,
    8193,
    16383,
    16384,
    16385,
    24577,
    32767,
    32768,
    40000,
    70000,
    300000,
    1 << 20,
]


def encode(cmd: list[bytes]) -> bytes:
    return b"*%d\r\n" % len(cmd) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in cmd)


def _parse(buf: bytes, i: int) -> int | None:
    """The end of the reply starting at buf[i], or None when it is not all there yet."""
    nl = buf.find(b"\r\n", i)
    if nl < 0:
        return None
    kind, head = buf[i : i + 1], buf[i + 1 : nl]
    if kind in b"+-:":
        return nl + 2
    n = int(head)
    if kind == b"$":
        end = nl + 2 + max(n, 0) + (2 if n >= 0 else 0)
        return end if n < 0 or len(buf) >= end else None
    j = nl + 2
    for _ in range(max(n, 0)):  # arrays
        j = _parse(buf, j)
        if j is None:
            return None
    return j


def ask(s: socket.socket, payload: bytes, replies: int) -> list[bytes]:
    s.sendall(payload)
    buf, out, i = b"", [], 0
    while len(out) < replies:
        end = _parse(buf, i) if i < len(buf) else None
        if end is None:
            chunk = s.recv(1 << 20)
            if not chunk:
                raise ConnectionError("the server closed the connection")
            buf += chunk
            continue
        out.append(buf[i:end])
        i = end
    return out


def value(n: int, seed: int) -> bytes:
    block = hashlib.sha256(b"%d" % seed).hexdigest().encode()
    return (block * (n // len(block) + 1))[:n]


def commands() -> list[list[bytes]]:
    cmds: list[list[bytes]] = [[b"FLUSHALL"]]
    for i, n in enumerate(SIZES):
        k = b"k%d" % i
        cmds += [
            [b"SET", k, value(n, i)],
            [b"APPEND", k, b"x" * i],
            [b"STRLEN", k],
            [b"GETRANGE", k, b"%d" % (n // 2), b"%d" % (n // 2 + 40)],
            [b"RPUSH", b"list", value(n % 5000, i)],
            [b"HSET", b"h", k, value(n % 3000, -i)],
            [b"INCRBY", b"count", b"%d" % n],
        ]
    cmds += [
        [b"MGET", *(b"k%d" % i for i in range(len(SIZES)))],
        [b"LRANGE", b"list", b"0", b"-1"],
        [b"HLEN", b"h"],
        [b"HMGET", b"h", *(b"k%d" % i for i in range(len(SIZES)))],  # HGETALL's order is
        [b"GET", b"count"],
        [b"DEBUG", b"DIGEST"],
    ]  # the process's random hash seed's
    return cmds


def client_info(port: int) -> dict[str, str]:
    """The query and reply buffers of a fresh connection whose first read is one small command."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        (reply,) = ask(s, encode([b"CLIENT", b"INFO"]), 1)
    fields = dict(f.split("=", 1) for f in reply.split(b"\r\n")[1].decode().split() if "=" in f)
    return {k: fields[k] for k in ("qbuf", "qbuf-free", "rbs")}


def run(port: int) -> dict[str, object]:
    """What the server answered: digests of the pipelined and the one-by-one replies, the dataset's
    DEBUG DIGEST, and the query buffer of a fresh connection."""
    cmds = commands()
    with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
        piped = ask(s, b"".join(map(encode, cmds)), len(cmds))
        single = [ask(s, encode(c), 1)[0] for c in cmds]
    for r in piped:
        if r.startswith(b"-"):
            raise RuntimeError(f"the golden workload got an error: {r[:200]!r}")
    return {
        "replies": len(piped),
        "pipelined_sha256": hashlib.sha256(b"".join(piped)).hexdigest(),
        "one_by_one_sha256": hashlib.sha256(b"".join(single)).hexdigest(),
        "dataset_digest": single[-1].split(b"\r\n")[0].decode(),
        "client_info": client_info(port),
    }
