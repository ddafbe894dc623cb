"""Measurement windows: many observer frames (1-10 ms each) summarized into one window (~0.5 s).

Per signal kind: counters are summed and divided by the window's length (so `tcp.retransmits`
reads as per second), gauges are averaged, quantile items are averaged over the frames that had
samples (frames where the quantile was empty do not count).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xtune.signals.frames import Catalog, Frame


@dataclass
class Window:
    index: int
    start_ns: int
    end_ns: int
    frames: int
    lost: int
    values: dict[str, float]

    @property
    def seconds(self) -> float:
        return (self.end_ns - self.start_ns) / 1e9


@dataclass
class WindowAggregator:
    window_ns: int
    catalog: Catalog | None = None
    _sums: dict[str, float] = field(default_factory=dict)
    _counts: dict[str, int] = field(default_factory=dict)
    _start_ns: int = 0
    _frames: int = 0
    _lost: int = 0
    _last_seq: int = 0
    _index: int = 0

    def add(self, frame: Frame) -> Window | None:
        """Fold one frame in; return the window it closed, if any."""
        if self._frames == 0:
            self._start_ns = frame.window_start_ns
        if self._last_seq and frame.seq > self._last_seq + 1:
            self._lost += frame.seq - self._last_seq - 1
        self._last_seq = frame.seq
        self._frames += 1
        sums, counts, empty = self._sums, self._counts, frame.empty
        for name, value in frame.values.items():
            if name in empty:
                continue
            sums[name] = sums.get(name, 0.0) + value
            counts[name] = counts.get(name, 0) + 1
        if frame.window_end_ns - self._start_ns < self.window_ns:
            return None
        return self._close(frame.window_end_ns)

    def _close(self, end_ns: int) -> Window:
        seconds = max(end_ns - self._start_ns, 1) / 1e9
        kinds = self.catalog.by_name if self.catalog else {}
        values = {}
        for name, total in self._sums.items():
            info = kinds.get(name)
            if info is not None and info.kind == "counter":
                values[name] = total / seconds
            else:
                values[name] = total / self._counts[name]
        window = Window(self._index, self._start_ns, end_ns, self._frames, self._lost, values)
        self._index += 1
        self._sums, self._counts = {}, {}
        self._frames = self._lost = 0
        return window

    def reset(self) -> None:
        """Drop the partial window (after a knob change, so no window mixes two settings)."""
        self._sums, self._counts = {}, {}
        self._frames = self._lost = 0
