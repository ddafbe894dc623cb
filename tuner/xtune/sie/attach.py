"""Driving the user-space SIE engine (build/bin/xsie-user) directly from a scope table: the
engine's own harness, for its tests and benchmarks. Values set here bypass xrtd's journal, audit
and restore on exit; `xtune sie` and every tuning path go through xrtd (`xtune.knobs.table.KnobClient`,
the `sie-user` backend).

`attach` starts `xsie-user run`, which arms the process and stays attached; `set_value` sends the
value over the engine's control socket and returns once the engine wrote it at a moment when no
thread was inside the perf-const's spans (or raises its refusal). The trampolines read the
engine's own value words, so no knob table is involved. Per attached pid a state folder keeps the
plan, the engine's state and its control socket.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from xtune import paths
from xtune.knobs.table import KNOB_TABLE_SIZE
from xtune.sie.elfcode import file_build_id
from xtune.sie.scope import PerfConst, ScopeError, ScopeTable

STATE_ROOT = Path(os.environ.get("XTUNE_SIE_STATE", "/run/xtune/sie"))


class SieError(RuntimeError):
    pass


def plan_text(
    table: ScopeTable, names: Iterable[str], knobs_path: str = paths.KNOBS_FILE, int3: bool = False
) -> str:
    """The engine's plan of the perf-consts `names`: one line per span (see runtime/sie/plan.c);
    `int3` forces the fallback. Each span names knob slot 0: only `arm`/`serve`, which read xrtd's
    `applied` there, use it, and no plan written here is for them (`run` owns the values)."""
    wanted = set(names)
    lines = [f"knobs {knobs_path} {KNOB_TABLE_SIZE:x}", f"load_vaddr {table.binary.load_vaddr:x}"]
    # Always: a binary linked without a build id is identified by its file's SHA-256.
    lines.append(f"binary {table.binary.build_id or '-'} {table.binary.sha256 or '-'}")
    if table.binary.library:
        if not table.binary.build_id:
            raise SieError(f"{table.binary.library}: a shared library without a build id cannot be found")
        lines.append(f"library {table.binary.library}")
    chosen = [c for c in table.consts if c.name in wanted]
    returns = [s.return_points for c in chosen for s in c.spans]
    if all(r is not None for r in returns):  # else the engine assumes some
        lines.append(f"returns_in_safe {sum(len(r or []) for r in returns)}")
    for c in chosen:
        lines.append(f"const {c.name} {c.values[0]} {_bounds(c)}")
        for s in c.spans:
            relocs = " ".join(
                f"{'knob' if r.kind == 'knob_abs64' else 'rel32'} {r.offset} {r.target & (2**64 - 1):x}"
                for r in s.relocs
            )
            safe = " ".join(f"{s.func_vaddr + r.start:x} {s.func_vaddr + r.end:x}" for r in s.safe)
            lines.append(
                f"span {c.name} 0 {s.vaddr:x} {'int3' if int3 else s.patch}"
                f" {s.expected} {s.trampoline}"
                f" {len(s.relocs)} {relocs} {len(s.safe)} {safe}".replace("  ", " ")
            )
    return "\n".join(lines) + "\n"


def _bounds(c: PerfConst) -> str:
    """MIN MAX MULTIPLE_OF POW2 of a `const` line: the values the engine accepts for `c`."""
    lo = "-" if c.min_value is None else str(c.min_value)
    hi = "-" if c.max_value is None else str(c.max_value)
    pow2 = getattr(c, "power_of_two", False) or c.constraint == "power of two"
    return f"{lo} {hi} {getattr(c, 'multiple_of', 1)} {int(pow2)}"


@dataclass
class Attachment:
    pid: int
    dir: Path
    consts: list[str]
    server: int = 0  # pid of `xsie-user run`, attached until detach

    @classmethod
    def load(cls, pid: int) -> Attachment:
        d = STATE_ROOT / str(pid)
        meta = d / "meta.json"
        if not meta.exists():
            raise SieError(f"pid {pid}: not attached (no {meta})")
        m = json.loads(meta.read_text())
        return cls(pid, d, m["consts"], m["server"])

    def save(self) -> None:
        meta = {"consts": self.consts, "server": self.server}
        (self.dir / "meta.json").write_text(json.dumps(meta, indent=1))


def process_consts(table: ScopeTable, names: list[str] | None = None) -> list[PerfConst]:
    """The perf-consts `names` (default: every tunable one) of a process's table, refused with the
    reason when one is not tunable or has kernel spans."""
    consts = [table.const(n) for n in names] if names else [c for c in table.consts if c.tunable]
    for c in consts:
        if not c.tunable:
            why = "; ".join(f"{r.function}: {r.reason}" for r in c.refusals) or "no spans"
            raise SieError(f"{c.name} is not tunable: {why}")
        if any(s.update.probe is not None for s in c.spans):
            raise SieError(f"{c.name}: kernel spans (kprobes for xsie.ko), not process trampolines")
    if not consts:
        raise SieError("no tunable perf-const in the scope table")
    return consts


def _check_pid(pid: int) -> None:
    if not Path(f"/proc/{pid}").exists():
        raise SieError(f"pid {pid}: no such process")


def attach(
    pid: int,
    table: ScopeTable,
    names: list[str] | None = None,
    timeout_ms: int = 2000,
    force_int3: bool = False,
) -> Attachment:
    """Arm the perf-consts `names` (default: every tunable one) in one transaction.

    `xsie-user run` stays attached as the process's tracer until detach: it makes every change
    (and serves the int3 fallback's hits, for spans that need it or with `force_int3`)."""
    _check_pid(pid)
    d = STATE_ROOT / str(pid)
    if (d / "meta.json").exists():
        raise SieError(f"pid {pid}: already attached ({d}); detach first")
    consts = process_consts(table, names)
    d.mkdir(parents=True, exist_ok=True)
    att = Attachment(pid, d, [c.name for c in consts])
    (d / "plan").write_text(plan_text(table, att.consts, int3=force_int3))
    args = ["--pid", str(pid), "--plan", str(d / "plan"), "--state", str(d / "state")]
    args += ["--timeout-ms", str(timeout_ms), "--control", str(d / "control")]
    try:
        att.server = _serve(args, d)
    except Exception:
        _cleanup(att)
        raise
    att.save()
    return att


_servers: dict[int, subprocess.Popen[str]] = {}  # servers started by this process, to reap them


def _serve(args: list[str], d: Path) -> int:
    log = open(d / "server.log", "w")  # noqa: SIM115 - the server keeps it
    p = subprocess.Popen(
        [str(paths.binary("xsie-user")), "run", *args],
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
        start_new_session=True,
    )
    log.close()
    assert p.stdout is not None
    line = p.stdout.readline()
    if not line.startswith("armed"):
        p.wait()
        raise SieError((d / "server.log").read_text().strip() or "xsie-user run failed")
    _servers[p.pid] = p
    return p.pid


def _stop_server(att: Attachment, timeout_ms: int) -> None:
    try:
        os.kill(att.server, signal.SIGTERM)
    except ProcessLookupError:
        pass  # it ended on its own (the process exited or called exec): its log says which
    deadline = time.monotonic() + 10 * timeout_ms / 1000 + 5
    p = _servers.pop(att.server, None)
    while time.monotonic() < deadline:
        if p is not None and p.poll() is not None or p is None and not Path(f"/proc/{att.server}").exists():
            break
        time.sleep(0.01)
    else:
        raise SieError(f"xsie-user run (pid {att.server}) did not finish disarming")
    if (att.dir / "state").exists() and Path(f"/proc/{att.pid}").exists():
        raise SieError((att.dir / "server.log").read_text().strip()[-3000:] or "disarm failed")


def set_value(pid: int, name: str, value: int, const: PerfConst | None = None) -> None:
    """Put `value` in effect for `name`; with its PerfConst, values the analysis does not cover are
    refused here too (the engine refuses them anyway, from the plan)."""
    att = Attachment.load(pid)
    if name not in att.consts:
        raise SieError(f"pid {pid}: {name} is not attached (attached: {', '.join(att.consts)})")
    if const is not None:
        try:
            const.check_value(value)
        except ScopeError as e:
            raise SieError(str(e)) from e
    reply = _control(att, f"set {name} {value}")
    if not reply.startswith("ok "):
        raise SieError(reply.removeprefix("err "))


def _control(att: Attachment, line: str, timeout: float = 60) -> str:
    """One command to the engine; its one-line reply. The engine answers a `set` within its
    quiescence timeout; no answer in `timeout` seconds means it is stuck, and the error says where."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        try:
            s.connect(str(att.dir / "control"))
            s.sendall(line.encode() + b"\n")
            reply = s.makefile().readline().strip()
        except OSError as e:
            stuck = engine_activity(att.server, att.pid)
            raise SieError(f"pid {att.pid}: the engine does not answer '{line}': {e}; {stuck}") from e
    return reply or f"err the engine (pid {att.server}) closed the connection"


# System calls an engine waits in, named in engine_activity.
_SYSCALLS = {0: "read", 7: "poll", 35: "nanosleep", 43: "accept", 61: "wait4", 230: "clock_nanosleep"}


def engine_activity(server: int, pid: int) -> str:
    """What the engine `server` and its process `pid` are doing now: for an error about a stuck engine."""
    try:
        state = Path(f"/proc/{server}/stat").read_text().rsplit(")", 1)[1].split()[0]
        call = Path(f"/proc/{server}/syscall").read_text().split()
    except OSError:
        return f"the engine (pid {server}) is gone"
    if call[0] in ("running", "-1"):
        doing = "running" if call[0] == "running" else "in user space"
    else:
        doing = f"in {_SYSCALLS.get(int(call[0]), 'system call ' + call[0])}"
        if call[0] == "61":
            waited = int(call[1], 16) & 0xFFFFFFFF  # a pid_t: -1 for any thread
            doing += f" for pid {waited - (waited >> 31 << 32)}"
    threads: dict[str, int] = {}
    for task in Path(f"/proc/{pid}/task").glob("*/stat"):
        try:
            s = task.read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        threads[s] = threads.get(s, 0) + 1
    return f"the engine (pid {server}) is in state {state}, {doing}; pid {pid}'s threads by state: {threads}"


def kill_tracing_engine(pid: int) -> str:
    """When an engine this process started is the tracer of `pid`: what it is doing, then SIGKILL
    (its tracees go free: a process with int3 spans dies of their next hit). '' otherwise."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return ""
    tracer = int(next((ln.split()[1] for ln in status.splitlines() if ln.startswith("TracerPid:")), "0"))
    p = _servers.pop(tracer, None)
    if p is None:
        return ""
    activity = engine_activity(tracer, pid)
    p.kill()
    p.wait()
    return activity


def detach(pid: int, timeout_ms: int = 2000) -> None:
    att = Attachment.load(pid)
    try:
        _stop_server(att, timeout_ms)
    finally:
        if att.server not in _servers and not Path(f"/proc/{att.server}").exists():
            _cleanup(att)  # the engine is gone: nothing is attached any more


def _cleanup(att: Attachment) -> None:
    for f in ("plan", "state", "meta.json", "server.log", "control"):
        (att.dir / f).unlink(missing_ok=True)
    att.dir.rmdir()


def load_base(pid: int, table: ScopeTable) -> int:
    """Where the table's binary starts in the process: its offset-0 mapping (of the executable, or
    of the one mapped file with the library's build id, as the engine finds it)."""
    maps = [m.split(maxsplit=5) for m in Path(f"/proc/{pid}/maps").read_text().splitlines()]
    maps = [m for m in maps if len(m) == 6 and m[2] == "00000000"]
    if not table.binary.library:
        exe = str(Path(f"/proc/{pid}/exe").resolve())
        return next(int(m[0].split("-")[0], 16) for m in maps if m[5] == exe)
    want = table.binary.build_id
    bases = [
        int(m[0].split("-")[0], 16) for m in maps if file_build_id(f"/proc/{pid}/map_files/{m[0]}") == want
    ]
    if len(bases) != 1:
        raise SieError(f"pid {pid}: {table.binary.library} is loaded {len(bases)} times")
    return bases[0]


def spans_hold_original(pid: int, table: ScopeTable) -> bool:
    """True when every span of the process holds exactly the scope table's original bytes."""
    bias = load_base(pid, table) - table.binary.load_vaddr
    with open(f"/proc/{pid}/mem", "rb") as mem:
        for c in table.consts:
            for s in c.spans:
                mem.seek(bias + s.vaddr)
                if mem.read(len(s.expected) // 2).hex() != s.expected:
                    return False
    return True
