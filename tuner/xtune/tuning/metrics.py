"""Prometheus exporter: knob values, objective, SLO margins, trials, rollbacks, frames, loop latency.

One registry per run (so tests can run several side by side), served on 127.0.0.1:9464 unless
told otherwise (port 0 picks a free port; `port` says which).
"""

from __future__ import annotations

from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server


class Metrics:
    def __init__(self, experiment: str) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.experiment = experiment
        self.knob_desired = Gauge(
            "xtune_knob_desired", "Value the tuner asked for", ["experiment", "knob"], registry=r
        )
        self.knob_applied = Gauge(
            "xtune_knob_applied", "Value xrtd applied", ["experiment", "knob"], registry=r
        )
        self.objective = Gauge(
            "xtune_objective", "Objective over the latest window", ["experiment"], registry=r
        )
        self.slo_margin = Gauge(
            "xtune_slo_margin",
            "Relative margin of an SLO line (negative: violated)",
            ["experiment", "slo"],
            registry=r,
        )
        self.trials = Counter(
            "xtune_trials", "Trials finished, by status", ["experiment", "status"], registry=r
        )
        self.rollbacks = Counter("xtune_rollbacks", "Guard rollbacks", ["experiment"], registry=r)
        self.frames = Counter("xtune_frames", "Observer frames consumed", ["experiment"], registry=r)
        self.frame_gaps = Counter(
            "xtune_frame_gaps", "Frames lost (sequence gaps)", ["experiment"], registry=r
        )
        self.loop_latency = Histogram(
            "xtune_loop_latency_seconds",
            "Fast-path time per frame (decode to decision)",
            ["experiment"],
            buckets=(5e-6, 1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 5e-3),
            registry=r,
        )
        self.port = 0
        self._server: WSGIServer | None = None

    def serve(self, addr: str = "127.0.0.1", port: int = 9464) -> int:
        """Start the HTTP exporter; returns the bound port."""
        self._server, _thread = start_http_server(port, addr=addr, registry=self.registry)
        self.port = self._server.server_port
        return self.port

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def knob(self, name: str, desired: float, applied: float) -> None:
        self.knob_desired.labels(self.experiment, name).set(desired)
        self.knob_applied.labels(self.experiment, name).set(applied)

    def window(self, objective: float | None, margins: dict[str, float]) -> None:
        if objective is not None:
            self.objective.labels(self.experiment).set(objective)
        for line, margin in margins.items():
            self.slo_margin.labels(self.experiment, line).set(margin)
