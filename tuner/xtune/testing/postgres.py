"""A private PostgreSQL cluster: Debian's binaries, initdb's stock configuration, run as `postgres`.

PostgreSQL refuses to run as root, so every command runs as the postgres user. The unix socket is
in the data directory: nothing touches the system cluster's /var/run/postgresql. The case servers
run `server_command` in a namespace; tests start and stop a `Cluster` with pg_ctl.
"""

from __future__ import annotations

import contextlib
import shlex
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from xtune.host.services import free_port

PG_ROOT = Path("/usr/lib/postgresql")  # Debian's: <major>/bin/{initdb,postgres,pg_ctl}
AS_POSTGRES = ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups"]


def pg_bin() -> Path:
    """The bin directory of the newest PostgreSQL major version installed."""
    found = sorted(PG_ROOT.glob("*/bin/postgres"), key=lambda p: int(p.parent.parent.name))
    if not found:
        raise FileNotFoundError(f"no {PG_ROOT}/*/bin/postgres (is Debian's `postgresql` package installed?)")
    return found[-1].parent


def reachable_by_others(path: Path) -> None:
    """Search (not read) permission on `path` and the private temp dirs above it (mkdtemp's 0700):
    the postgres user must reach its data directory. Only dirs under the temp dir are changed;
    anything else must already be reachable."""
    tmp = Path(tempfile.gettempdir()).resolve()
    for d in (path.resolve(), *path.resolve().parents):
        if d == tmp or not d.is_relative_to(tmp):
            break
        mode = d.stat().st_mode
        if not mode & stat.S_IXOTH:
            d.chmod(stat.S_IMODE(mode) | stat.S_IXOTH)


def init_cluster(data: Path, hba: str = "") -> None:
    """initdb into `data` (superuser `postgres`) unless a cluster is already there; `hba` is a
    pg_hba.conf line to append (the stock file admits only local and loopback clients)."""
    if (data / "PG_VERSION").exists():
        return
    reachable_by_others(data.parent)
    shutil.rmtree(data, ignore_errors=True)  # a half-made cluster from an interrupted initdb
    data.mkdir(mode=0o700)
    shutil.chown(data, "postgres", "postgres")
    # --no-sync: a throwaway cluster need not survive a host crash; saves seconds of fsync.
    init = [*AS_POSTGRES, str(pg_bin() / "initdb"), "-D", str(data), "-U", "postgres", "--no-sync"]
    out = subprocess.run(init, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"initdb exited with {out.returncode}: {out.stderr.strip()[-500:]}")
    if hba:
        with open(data / "pg_hba.conf", "a") as f:
            f.write(hba + "\n")


def server_options(data: Path, port: int, listen: str) -> list[str]:
    """The settings a second cluster beside the system's needs: its port, address and socket dir."""
    return ["-c", f"port={port}", "-c", f"listen_addresses={listen}", "-c", f"unix_socket_directories={data}"]


def server_command(data: Path, port: int, listen: str) -> list[str]:
    """The postmaster in the foreground, as the postgres user."""
    return [*AS_POSTGRES, str(pg_bin() / "postgres"), "-D", str(data), *server_options(data, port, listen)]


@dataclass
class Cluster:
    """A cluster in `dir`/pgdata on 127.0.0.1:`port`, kept across stops; started and stopped by
    pg_ctl, which waits until the server accepts connections or has shut down."""

    dir: Path
    port: int = field(default_factory=free_port)

    @property
    def data(self) -> Path:
        return self.dir / "pgdata"

    def _pg_ctl(self, *args: str) -> None:
        cmd = [*AS_POSTGRES, str(pg_bin() / "pg_ctl"), "-D", str(self.data), "-w", *args]
        out = subprocess.run(cmd, capture_output=True, text=True, cwd="/")  # postgres may not read ours
        if out.returncode != 0:
            log = (self.data / "server.log").read_text(errors="replace")[-500:]
            raise RuntimeError(f"pg_ctl {args[0]} exited with {out.returncode}: {out.stderr.strip()} {log}")

    def start(self) -> None:
        init_cluster(self.data)
        options = shlex.join(server_options(self.data, self.port, "127.0.0.1"))
        self._pg_ctl("start", "-l", str(self.data / "server.log"), "-o", options)

    def stop(self, mode: str = "fast") -> None:
        """`fast`: roll back open transactions and shut down cleanly; `immediate`: quit at once,
        as a crash would (the next start recovers from the write-ahead log)."""
        self._pg_ctl("stop", "-m", mode)

    def create_database(self, name: str) -> str:
        """A new empty database; returns its SQLAlchemy URL."""
        cmd = [str(pg_bin() / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", name]
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"createdb {name} exited with {out.returncode}: {out.stderr.strip()}")
        return f"postgresql://postgres@127.0.0.1:{self.port}/{name}"


@contextlib.contextmanager
def temporary_cluster() -> Iterator[Cluster]:
    """A new cluster in a temp dir, started; stopped and its directory removed on exit."""
    cluster = Cluster(Path(tempfile.mkdtemp(prefix="xtune-pg-")))
    try:
        cluster.start()
        try:
            yield cluster
        finally:
            cluster.stop()
    finally:
        shutil.rmtree(cluster.dir, ignore_errors=True)
