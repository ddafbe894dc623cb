"""Debian's nginx on a free loopback port, gzip-compressing what it serves through a given
libz.so.1 (LD_LIBRARY_PATH), and wrk against it."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

from real.process import Started
from real.redis.server import free_port

NGINX = "/usr/sbin/nginx"
# One process (no master: the process that loads libz is the one started), gzip level 6 (levels
# 4-9 run deflate_slow) for every response, no logs but errors.
CONF = """daemon off;
master_process off;
worker_processes 1;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log;
events {{ worker_connections 256; }}
http {{
    access_log off;
    default_type text/plain;
    gzip on;
    gzip_comp_level 6;
    gzip_min_length 0;
    gzip_types *;
    client_body_temp_path {prefix}/tmp;
    proxy_temp_path {prefix}/tmp;
    fastcgi_temp_path {prefix}/tmp;
    uwsgi_temp_path {prefix}/tmp;
    scgi_temp_path {prefix}/tmp;
    server {{
        listen 127.0.0.1:{port};
        root {docroot};
    }}
}}
"""


class Server(Started):
    """nginx serving `docroot` with `libz` (a file, loaded as libz.so.1) in place of the system's."""

    def __init__(self, libz: Path, docroot: Path, workdir: Path) -> None:
        self.port = free_port()
        prefix = workdir / f"nginx-{self.port}"
        (prefix / "tmp").mkdir(parents=True, exist_ok=True)
        (prefix / "lib").mkdir(exist_ok=True)
        (prefix / "lib" / "libz.so.1").unlink(missing_ok=True)
        (prefix / "lib" / "libz.so.1").symlink_to(libz.resolve())
        conf = prefix / "nginx.conf"
        conf.write_text(CONF.format(prefix=prefix, port=self.port, docroot=docroot.resolve()))
        self.log = prefix / "error.log"
        self.proc = subprocess.Popen(
            [NGINX, "-p", str(prefix), "-c", str(conf), "-e", str(self.log)],
            stdin=subprocess.DEVNULL,
            env={"LD_LIBRARY_PATH": str(prefix / "lib"), "PATH": "/usr/sbin:/usr/bin:/bin"},
        )
        # nginx writes its pid file once its listening sockets are bound, before it serves.
        for _ in range(200):
            if (prefix / "nginx.pid").exists():
                break
            if self.proc.poll() is not None:
                raise RuntimeError(f"nginx exited with {self.proc.returncode}: {self._log_tail()}")
            time.sleep(0.05)
        else:
            self.stop()
            raise RuntimeError(f"nginx wrote no pid file within 10 s: {self._log_tail()}")
        maps = Path(f"/proc/{self.pid}/maps").read_text()
        if str(libz.resolve()) not in maps:
            self.stop()
            raise RuntimeError(f"nginx did not load {libz} (LD_LIBRARY_PATH ignored?)")

    def _log_tail(self) -> str:
        return self.log.read_text()[-500:] if self.log.exists() else ""


def benchmark(port: int, path: str, seconds: int) -> float:
    """Requests per second wrk reports for gzip'd GETs of `path` (1 thread, 4 connections)."""
    r = subprocess.run(
        [
            "wrk",
            "-t1",
            "-c4",
            f"-d{seconds}s",
            "-H",
            "Accept-Encoding: gzip",
            f"http://127.0.0.1:{port}{path}",
        ],
        capture_output=True,
        text=True,
        timeout=seconds + 60,
        check=True,
    )
    m = re.search(r"Requests/sec:\s*([0-9.]+)", r.stdout)
    if not m or "Non-2xx" in r.stdout or "Socket errors" in r.stdout:
        raise RuntimeError(f"wrk: no clean result:\n{r.stdout}")
    return float(m.group(1))
