"""Each host's Prometheus exporter in a run on several hosts, and the file-SD file that lists them.

The agents on the hosts are C only (xobserve, xrtd, xrtd-bridge) and export nothing: a host's
series are what the coordinator measured and applied on that host, so the coordinator serves them,
one exporter (`Metrics`, its own registry) per host on a free port of one address. The series
carry the exporter's own labels (`experiment`, `knob`, ...); the `host` label is the file-SD
target's, which Prometheus puts on every sample it scrapes from that target.

The file is `DIR/EXPERIMENT.json` in Prometheus' `file_sd_configs` format,
`[{"targets": ["ADDR:PORT"], "labels": {"host": NAME, "run": RUN}}, ...]`, replaced atomically
(written beside, then renamed) whenever its targets change. A host that leaves the run is
withdrawn (what the coordinator last exported for it is no longer known to hold: its lease
restores its knobs), every host is withdrawn when the run ends, and `close` removes the file.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import threading
from pathlib import Path

from xtune.tuning.metrics import Metrics


class HostExporters:
    def __init__(self, experiment: str, addr: str, sd_dir: Path) -> None:
        """Exporters bound to `addr`, listed in `sd_dir/EXPERIMENT.json`. ValueError, naming what
        is wrong, for an address no Prometheus can be told to scrape or a directory that cannot be
        made or written."""
        try:
            wildcard = ipaddress.ip_address(addr).is_unspecified
        except ValueError:  # a host name: Prometheus resolves it as given
            wildcard = False
        if wildcard:
            raise ValueError(
                f"exporter address {addr}: a wildcard is no address Prometheus can scrape; "
                "give this machine's address (or name) as the metrics address"
            )
        try:
            sd_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ValueError(f"Prometheus file-SD directory {sd_dir}: {e.strerror}") from e
        if not os.access(sd_dir, os.W_OK | os.X_OK):
            raise ValueError(f"Prometheus file-SD directory {sd_dir}: not writable")
        self.experiment = experiment
        self.addr = addr
        self.file = sd_dir / f"{experiment}.json"
        self._served: dict[str, tuple[Metrics, int]] = {}  # host -> its exporter, the run it serves
        self._lock = threading.Lock()  # hosts start and leave from their own threads

    def serve(self, host: str, run: int) -> Metrics:
        """A new exporter for `host`'s trials in `run`, listed in the file from now on."""
        metrics = Metrics(self.experiment)
        try:
            metrics.serve(self.addr, 0)
        except OSError as e:
            raise OSError(f"exporter on {self.addr}: {e.strerror or e}") from e
        with self._lock:
            previous = self._served.get(host)
            self._served[host] = (metrics, run)
            self._write()
        if previous is not None:
            previous[0].close()
        return metrics

    def withdraw(self, host: str) -> None:
        """Stop serving and listing `host` (nothing if it is not served). Never raises: it runs on
        the way out of a host's run, which must go on to restore the host's knobs."""
        with self._lock:
            served = self._served.pop(host, None)
            if served is None:
                return
            served[0].close()
            # Closed first: a file that cannot be rewritten still names a target that is down, and
            # Prometheus marks its series stale all the same.
            with contextlib.suppress(OSError):
                self._write()

    def targets(self) -> list[dict[str, object]]:
        """The file's content: one target per served host, its labels host and run."""
        host = f"[{self.addr}]" if ":" in self.addr else self.addr  # an IPv6 address
        return [
            {"targets": [f"{host}:{metrics.port}"], "labels": {"host": name, "run": str(run)}}
            for name, (metrics, run) in sorted(self._served.items())
        ]

    def close(self) -> None:
        """Every exporter stopped, the file removed."""
        with self._lock:
            served = list(self._served.values())
            self._served.clear()
            self.file.unlink(missing_ok=True)
        for metrics, _run in served:
            metrics.close()

    def __enter__(self) -> HostExporters:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _write(self) -> None:
        # Prometheus reads the file when it changes: it must never see half of it.
        tmp = self.file.with_name(f".{self.file.name}.tmp")
        tmp.write_text(json.dumps(self.targets(), indent=1) + "\n")
        os.replace(tmp, self.file)
