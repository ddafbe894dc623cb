"""The dashboard's HTTP server (stdlib `http.server`): the page, its script and `/api/state`.

Local by default (127.0.0.1). The page polls `/api/state?experiment=ID` and redraws in place;
nothing is loaded from outside (no CDN).
"""

from __future__ import annotations

import json
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from xtune.dashboard.state import Sources, snapshot

STATIC = Path(__file__).parent / "static"
FILES = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/dashboard.js": ("dashboard.js", "text/javascript; charset=utf-8"),
    "/dashboard.css": ("dashboard.css", "text/css; charset=utf-8"),
}


class DashboardServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, sources: Sources, addr: str = "127.0.0.1", port: int = 0) -> None:
        self.sources = sources
        self._thread: threading.Thread | None = None
        super().__init__((addr, port), _Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}/"

    def start(self) -> DashboardServer:
        """Serve in a background thread (tests); `serve_forever()` serves in the caller's."""
        self._thread = threading.Thread(target=self.serve_forever, name="dashboard", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
        if self._thread is not None:
            self._thread.join(5)


class _Handler(BaseHTTPRequestHandler):
    server: DashboardServer

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        url = urlsplit(self.path)
        if url.path == "/api/state":
            query = parse_qs(url.query)
            try:
                experiment = int(query["experiment"][0]) if query.get("experiment") else None
            except ValueError:
                self._send(HTTPStatus.BAD_REQUEST, b"experiment: not an integer\n", "text/plain")
                return
            body = json.dumps(snapshot(self.server.sources, experiment), allow_nan=False)
            self._send(HTTPStatus.OK, body.encode(), "application/json")
        elif url.path in FILES:
            name, kind = FILES[url.path]
            self._send(HTTPStatus.OK, (STATIC / name).read_bytes(), kind)
        else:
            self._send(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain")

    def _send(self, status: HTTPStatus, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (http.server's name)
        """Quiet: one line per poll would flood the terminal."""
