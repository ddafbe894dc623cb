"""The case servers, Debian's packages with their stock configuration, each in a namespace.

Only what running a second instance beside the system's needs is overridden: the pid file, the
log destinations and, for redis, the address it listens on (stock: loopback only, and the client
is in another namespace) and RDB snapshots (off, so no run measures a background save).
nginx's access log is off: a million log lines per run would measure the disk. PostgreSQL runs a
private cluster (initdb's own postgresql.conf) with only its port, listen address and socket
directory set, and one pg_hba.conf line that lets the client's namespace in.

A case may run another build of the same server (`binary`) with the same stock config: the
key-value case runs redis-server built from Debian's source package, the binary its SIE scope table
was made for (perf_const.py).
"""

from __future__ import annotations

import abc
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from xtune.testing.postgres import init_cluster, server_command

NGINX_CONF = Path("/etc/nginx/nginx.conf")
REDIS_CONF = Path("/etc/redis/redis.conf")


def wait_port(netns: str, port: int, proc: subprocess.Popen[bytes], what: str, timeout: float = 10.0) -> None:
    """Until something listens on `port` in `netns` (ss), or raise with the server's state."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        out = subprocess.run(
            ["ip", "netns", "exec", netns, "ss", "-Hltn", f"sport = :{port}"], capture_output=True, text=True
        )
        if out.stdout.strip():
            return
        time.sleep(0.05)
    raise RuntimeError(f"{what} does not listen on port {port} after {timeout:g} s")


@dataclass
class Server(abc.ABC):
    """A server process in `netns`; each server's `command()` builds its command line in a private dir."""

    name: str
    netns: str
    port: int
    dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="xtune-case-")))
    proc: subprocess.Popen[bytes] | None = None
    binary: str | None = None  # the server's executable (None: the distribution's, found on PATH)

    @abc.abstractmethod
    def command(self) -> list[str]:
        """The server's command line (run in `netns`); its config files go in `dir`."""

    def start(self) -> None:
        log = open(self.dir / "server.log", "wb")  # noqa: SIM115 - owned by the child
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", self.netns, *self.command()],
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        log.close()
        try:
            wait_port(self.netns, self.port, self.proc, self.name)
        except RuntimeError as e:
            self.stop()
            raise RuntimeError(
                f"{e}: {(self.dir / 'server.log').read_text(errors='replace')[-500:]}"
            ) from None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


class Nginx(Server):
    def command(self) -> list[str]:
        text = NGINX_CONF.read_text()
        text = re.sub(r"^\s*pid\s+[^;]+;", f"pid {self.dir}/nginx.pid;", text, flags=re.M)
        text = re.sub(r"^(\s*)access_log\s+[^;]+;", r"\1access_log off;", text, flags=re.M)
        text = re.sub(r"^(\s*)error_log\s+[^;]+;", rf"\1error_log {self.dir}/error.log;", text, flags=re.M)
        conf = self.dir / "nginx.conf"
        conf.write_text(text)
        # Relative includes (sites-enabled/*, mime.types) resolve against /etc/nginx, as stock.
        return ["nginx", "-p", "/etc/nginx", "-c", str(conf), "-g", "daemon off;"]


class Redis(Server):
    def command(self) -> list[str]:
        return [
            self.binary or "redis-server", str(REDIS_CONF), "--daemonize", "no", "--supervised", "no",
            "--bind", "0.0.0.0", "--protected-mode", "no", "--port", str(self.port),
            "--pidfile", str(self.dir / "redis.pid"), "--logfile", "", "--save", "", "--dir", str(self.dir),
        ]  # fmt: skip


class Postgres(Server):
    """A private cluster in `dir`/pgdata, made by initdb on first start and kept across restarts
    (the pgbench tables survive a contender change). The unix socket is in the data directory, so
    nothing touches the system cluster's /var/run/postgresql."""

    def command(self) -> list[str]:
        data = self.dir / "pgdata"
        # Stock pg_hba.conf admits only loopback; the load comes from the veth's peer.
        init_cluster(data, hba="host all postgres samenet trust  # xtune case: the client namespace's veth")
        return server_command(data, self.port, "*")


class NetMix(Server):
    """iperf3's and sockperf's servers (netmix.py serve); `port` is iperf3's, the one waited for."""

    def command(self) -> list[str]:
        return [sys.executable, str(Path(__file__).with_name("netmix.py")), "serve"]


SERVERS: dict[str, type[Server]] = {"nginx": Nginx, "redis": Redis, "postgres": Postgres, "netmix": NetMix}
