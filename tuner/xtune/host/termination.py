"""A process ended by SIGTERM or SIGHUP cleans up the way Ctrl-C makes it: stack unwinding.

Python's default for SIGTERM ends the process at once, so `finally` blocks and context managers
never run: a demo or run stopped by `timeout`, systemd or a closed terminal left its network
namespaces, its load processes and its private xobserve and xrtd behind (xrtd then kept the
knobs it held until its own lease ran out). Here the signal raises SystemExit in the main thread
instead, which every cleanup path already handles as it handles KeyboardInterrupt.
"""

from __future__ import annotations

import signal
from types import FrameType

SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def unwind_on_termination() -> None:
    """From now on SIGTERM and SIGHUP raise SystemExit(128 + signal) in the main thread."""

    def stop(signum: int, _frame: FrameType | None) -> None:
        # A second signal while the stack unwinds would cut the cleanup short: ignore it.
        for s in SIGNALS:
            signal.signal(s, signal.SIG_IGN)
        raise SystemExit(128 + signum)

    for s in SIGNALS:
        signal.signal(s, stop)
