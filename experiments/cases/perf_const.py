"""A case's compiled-in constant, retuned in its running server through xrtd's `sie-user` backend.

The key-value case's is `PROTO_IOBUF_LEN` of redis-server built from Debian's source package
(`experiments/real/redis/`): the scope table the analysis wrote holds the build id of that binary,
and the engine patches code at the addresses the table names, so the case runs exactly that binary
for every contender and refuses before starting anything when its build id differs (another build
has other code at those addresses).

A contender's settings are sysctl/sysfs targets; the perf-const's value travels beside them in
`Contender.perf_consts` (its knob's name -> value). The server process changes with every restart, so the
knob is registered on each new pid (`<pid>:<plan>`), set, and before the server stops restored and
unregistered, which disarms the engine: the process runs its original code again.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from xtune.config.schema import Knob
from xtune.knobs.table import KnobClient, KnobError
from xtune.sie import scope as sc
from xtune.sie.attach import plan_text, spans_hold_original
from xtune.sie.elfcode import file_build_id

BACKEND = "sie-user"


class NotTheAnalyzedBinary(RuntimeError):
    """The server binary is not the build the scope table was made for."""


@dataclass(frozen=True)
class PerfConst:
    name: str  # the constant, as the scope table names it
    knob: str  # its knob's name in the case's BO SLO file (and in `Contender.perf_consts`)
    scope: Path  # the committed scope table (`xtune analyze`)
    binary: Callable[[], Path]  # the server binary the table was made for (built on first use)

    def table(self) -> sc.ScopeTable:
        return sc.load(str(self.scope))

    def checked_binary(self) -> Path:
        """The server binary, once its build id is the scope table's; else NotTheAnalyzedBinary."""
        binary = self.binary()
        want, have = self.table().binary.build_id, file_build_id(binary)
        if have != want:
            raise NotTheAnalyzedBinary(
                f"{binary} has build id {have or '(none)'}, {self.scope.name} was made for {want}: "
                f"SIE retunes only the binary its table was analyzed from. Rebuild it from the same "
                f"source and flags (experiments/real/redis/build.sh) or analyze this one again "
                f"(xtune analyze)"
            )
        return binary

    def write_plan(self, path: Path) -> Path:
        """The engine's plan of this constant alone (as `xtune sie plan`): sie-user targets `<pid>:<plan>`."""
        table = self.table()
        const = table.const(self.name)
        if not const.tunable:
            raise RuntimeError(f"{self.name} is not tunable in {self.scope}")
        path.write_text(plan_text(table, [self.name]))
        return path

    def variables(self, pid: int, plan: Path) -> dict[str, str]:
        """The BO SLO file's variables for the knob: the running server and the analysis's range."""
        const = self.table().const(self.name)
        return {
            "SERVER_PID": str(pid),
            "PLAN": str(plan),
            "PERF_CONST_MIN": str(const.min_value),
            "PERF_CONST_MAX": str(const.max_value),
        }


def split(best: dict[str, int | str], knobs: dict[str, Knob]) -> tuple[dict[str, int | str], dict[str, int]]:
    """BO's best values (knob name -> value) as a contender's settings (target -> value) and its
    perf-consts (the knob's name in the SLO file -> value): a sie-user target names a pid that is
    gone once the server restarts, so the value is kept by name and armed on each new process."""
    settings: dict[str, int | str] = {}
    consts: dict[str, int] = {}
    for name, value in best.items():
        knob = knobs[name]
        if knob.backend == BACKEND:
            if not isinstance(value, int):
                raise ValueError(f"perf-const knob {name}: value {value!r} is not an integer")
            consts[name] = value
        else:
            settings[knob.target] = value
    return settings, consts


class ArmingFailed(RuntimeError):
    """The perf-const could not be set, or put back, in the running server."""


@dataclass(frozen=True)
class LiveConst:
    """A case's perf-const with its plan, set through the case's xrtd in whichever process runs."""

    const: PerfConst
    plan: Path
    socket: str  # xrtd's control socket

    @contextlib.contextmanager
    def armed(self, pid: int, value: int, why: str) -> Iterator[None]:
        """The constant at `value` in process `pid` while the block runs; restored and unregistered
        after it (the engine disarms) and the process's code checked byte-exact. ArmingFailed when
        xrtd refuses (bounds, build id, live bytes: before the block runs) or the disarm fails."""
        table = self.const.table()
        c = table.const(self.const.name)
        name = f"{self.const.knob}_{pid}"[:48]
        try:
            with KnobClient(self.socket) as client:
                client.register(name, BACKEND, f"{pid}:{self.plan}", min=c.min_value, max=c.max_value)
                try:
                    client.set(name, value, reason=why)
                    yield
                finally:
                    client.unregister(name)
        except KnobError as e:
            raise ArmingFailed(f"{self.const.name} = {value} in pid {pid} through xrtd: {e}") from e
        if not spans_hold_original(pid, table):
            raise ArmingFailed(
                f"pid {pid}: {self.const.name}'s spans differ from the original code after disarm"
            )
