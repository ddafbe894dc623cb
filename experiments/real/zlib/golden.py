"""The golden workload: files nginx serves gzip-compressed, whose compressed bytes must be identical
between two servers.

The files are generated (the same bytes on every host): text over a small vocabulary, where
3-byte matches at every distance are common, so TOO_FAR decides which deflate_slow keeps; runs of
it repeated farther apart than the window; and a file with a few repeated blocks in random bytes.
Each response is decompressed and compared with the file too."""

from __future__ import annotations

import hashlib
import http.client
import zlib
from pathlib import Path

FILES = {
    "text-64k.txt": 64 << 10,
    "text-256k.txt": 256 << 10,
    "text-1m.txt": 1 << 20,
    "mixed-256k.bin": 256 << 10,
}


def _stream(seed: bytes):
    """Deterministic pseudo-random bytes (SHA-256 in counter mode)."""
    i = 0
    while True:
        yield from hashlib.sha256(seed + i.to_bytes(8, "little")).digest()
        i += 1


def _text(n: int, seed: bytes) -> bytes:
    rnd = _stream(seed)
    letters = b"etaoinshrdlcumwfgypbvkjxqz"
    words = [bytes(letters[next(rnd) % 26] for _ in range(2 + next(rnd) % 7)) for _ in range(3000)]
    out = bytearray()
    while len(out) < n:
        out += words[(next(rnd) << 8 | next(rnd)) % len(words)] + (b"\n" if next(rnd) < 16 else b" ")
    return bytes(out[:n])


def _mixed(n: int, seed: bytes) -> bytes:
    rnd = _stream(seed)
    blocks = [bytes(next(rnd) for _ in range(512)) for _ in range(8)]
    out = bytearray()
    while len(out) < n:
        out += blocks[next(rnd) % 8] if next(rnd) < 64 else bytes(next(rnd) for _ in range(256))
    return bytes(out[:n])


def write_files(docroot: Path) -> None:
    docroot.mkdir(parents=True, exist_ok=True)
    for name, n in FILES.items():
        path = docroot / name
        if not path.exists():
            make = _mixed if name.endswith(".bin") else _text
            path.write_bytes(make(n, name.encode()))


def fetch_gzip(port: int, name: str) -> bytes:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        c.request("GET", f"/{name}", headers={"Accept-Encoding": "gzip"})
        r = c.getresponse()
        body = r.read()
        if r.status != 200 or r.getheader("Content-Encoding") != "gzip":
            raise RuntimeError(f"GET /{name}: status {r.status}, encoding {r.getheader('Content-Encoding')}")
        return body
    finally:
        c.close()


def run(port: int, docroot: Path) -> dict[str, dict[str, object]]:
    """Per file: the SHA-256 and size of the gzip body nginx sent (the deflate stream), checked to
    decompress to the file."""
    out: dict[str, dict[str, object]] = {}
    for name in FILES:
        body = fetch_gzip(port, name)
        if zlib.decompress(body, 31) != (docroot / name).read_bytes():
            raise RuntimeError(f"GET /{name}: the gzip body does not decompress to the file")
        out[name] = {"gzip_sha256": hashlib.sha256(body).hexdigest(), "gzip_bytes": len(body)}
    return out
