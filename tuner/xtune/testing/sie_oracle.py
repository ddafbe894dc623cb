"""The rebuild oracle: the original binary retuned through SIE to V' must print exactly what the
binary rebuilt with V' prints, for every input. Shared by tests/sie and experiments/bench_sie_user.py
(which counts its verdicts per form), so it lives in the package. A corpus program built as a shared
library runs under tests/sie/targets/so_main.c, which loads it and calls its main."""

from __future__ import annotations

import random
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from xtune import paths
from xtune.sie import attach as eng
from xtune.sie.analyze import analyze
from xtune.sie.scope import PerfConst, ScopeError, ScopeTable
from xtune.sie.spec import Spec, spec_from_dict
from xtune.sie.variants import build_one

CORPUS = paths.ROOT / "tests" / "sie" / "corpus"
SO_MAIN = paths.ROOT / "tests" / "sie" / "targets" / "so_main.c"
_so_main_lock = threading.Lock()  # the oracle's worker threads build it once
ALL_LEVELS = [(cc, opt) for cc in ("gcc", "clang") for opt in ("-O0", "-O2", "-O3")]
CONFIGS = ALL_LEVELS
# Corpus programs whose spec opts in to `persistent = true` honestly: store_global stores K to a
# global and reads it back within the same call, so each store holding the value current at its
# time is what the program means. (alloc_size does not cope: its ring keeps the size it was
# allocated with while the index follows the new K, so it is tested without the opt-in.)
OPT_IN: dict[str, dict[str, object]] = {"store_global": {"persistent": True}}
# The share of corpus cases retuned exactly, as tuner/xtune/sie/README.md claims it (206 of 228).
PASS_RATE = 0.903
KILL_GRACE_S = 10  # a killed target is reaped at once unless its tracer is stuck
VALUES = [64, 32, 128]
PROBES = [48, 100, 16, 256, 5]
# Values each retuned case is checked with at least (when its range allows): a table whose
# constraints refuse most PROBES (`multiple_of`, `power_of_two`) is checked with allowed values
# no analysis build used besides (`probe_values`).
MIN_PROBES = 3
INPUTS = [
    -1000,
    -129,
    -65,
    -64,
    -63,
    -1,
    0,
    1,
    7,
    31,
    32,
    33,
    47,
    63,
    64,
    65,
    95,
    127,
    128,
    129,
    255,
    300,
    12345,
]


@dataclass
class Case:
    program: str
    cc: str
    opt: str
    spec: Spec
    table: ScopeTable | None = None
    verdict: str = ""  # pass | fail | refused
    detail: list[str] = field(default_factory=list)
    probes: list[int] = field(default_factory=list)  # the values retuned to and compared
    # PROBES the table refuses, and with `multiple_of` or `power_of_two` a value of its range that
    # breaks them: each must be refused by the engine
    refused_values: list[int] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.program}[{self.cc}{self.opt}]"


def make_spec(src: Path, cc: str, opt: str, values: list[int] = VALUES, **extra: object) -> Spec:
    data = {"source": src.name, "constant": "K", "values": values, "build": f"{cc} {opt} -o {{out}} {{src}}"}
    return spec_from_dict({**data, **extra}, src.parent / "spec.toml")


def case(program: str, cc: str, opt: str, **extra: object) -> Case:
    return Case(program, cc, opt, make_spec(CORPUS / f"{program}.c", cc, opt, VALUES, **extra))


def shared_case(program: str, cc: str, opt: str, **extra: object) -> Case:
    """The program built as a shared library (its main called by so_main)."""
    c = case(program, cc, f"{opt} -shared -fPIC", library=f"lib{program}.so", **extra)
    c.opt = f"{opt} .so"
    return c


def command(spec: Spec, binary: Path) -> list[str]:
    """How to run a build: itself, or a library under so_main (built once)."""
    if not spec.library:
        return [str(binary)]
    loader = paths.BUILD / "sie-analysis" / "so_main"
    with _so_main_lock:
        if not loader.exists() or loader.stat().st_mtime < SO_MAIN.stat().st_mtime:
            loader.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run(["gcc", "-O2", "-o", str(loader), str(SO_MAIN)], check=True)
    return [str(loader), str(binary)]


class Target:
    """A corpus program answering one line per input line: a binary, or a command (see `command`)."""

    def __init__(self, binary: Path | list[str]) -> None:
        cmd = [str(binary)] if isinstance(binary, Path) else binary
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def ask(self, inputs: list[int]) -> list[str]:
        assert self.p.stdin and self.p.stdout
        out = []
        for n in inputs:
            self.p.stdin.write(f"{n}\n")
            self.p.stdin.flush()
            out.append(self.p.stdout.readline().strip())
        return out

    def close(self) -> None:
        kill(self.p)


def kill(p: subprocess.Popen[str]) -> None:
    """SIGKILL a target and reap it. Its tracer must reap it first: an engine this process started
    that does not within a short grace is stuck, and is killed too, and the error says where it was
    stuck (never a test that hangs until its timeout)."""
    p.kill()
    try:
        p.wait(timeout=KILL_GRACE_S)
        return
    except subprocess.TimeoutExpired:
        stuck = eng.kill_tracing_engine(p.pid)
    if stuck:
        p.wait(timeout=KILL_GRACE_S)  # its engine is gone: the process is reaped now
    why = stuck or "its tracer is no engine this process started"
    raise AssertionError(f"pid {p.pid} was not reaped {KILL_GRACE_S} s after SIGKILL: {why}")


def worker_answer(n: int, k: int) -> str:
    """The answer of the worker targets (mt_target, probed_target, fork_target, ...) to input n
    with their perf-const K = k."""
    return str(n - k if n >= k else n + 1000000)


def arm_change_disarm(t: Target, table: ScopeTable, rnd: random.Random, cycles: int, changes: int) -> None:
    """`cycles` times: arm K, set it to `changes` random values of its valid range, each checked on a
    random input, disarm and check the text is byte-exact again."""
    const = table.const("K")
    lo, hi = const.min_value or 1, const.max_value or 5000
    for cycle in range(cycles):
        eng.attach(t.p.pid, table, ["K"], timeout_ms=5000)
        for _ in range(changes):
            k = rnd.randint(lo, hi)
            eng.set_value(t.p.pid, "K", k, const)
            n = rnd.randint(0, 6000)
            assert t.ask([n]) == [worker_answer(n, k)], cycle
        eng.detach(t.p.pid, timeout_ms=5000)
        assert eng.spans_hold_original(t.p.pid, table), f"text differs after disarm {cycle}"


class LineTarget:
    """A target program driven one text line at a time (commands such as "f 3000", not only
    numbers); `line()` reads an answer the program sends on its own."""

    def __init__(self, path: str) -> None:
        self.p = subprocess.Popen([path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def ask(self, line: str) -> str:
        assert self.p.stdin and self.p.stdout
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        return self.p.stdout.readline().strip()

    def line(self) -> str:
        assert self.p.stdout
        return self.p.stdout.readline().strip()

    def close(self) -> None:
        kill(self.p)


def reference(spec: Spec, value: int) -> list[str]:
    binary = build_one(spec, value)
    r = subprocess.run(
        command(spec, binary), input="".join(f"{n}\n" for n in INPUTS), capture_output=True, text=True
    )
    return r.stdout.split()


def _accepts(const: PerfConst, value: int) -> bool:
    try:
        const.check_value(value)
    except ScopeError:
        return False
    return True


def probe_values(const: PerfConst) -> list[int]:
    """The PROBES the table allows and, while fewer than MIN_PROBES, allowed values that are no
    analysis value (odd multiples of `multiple_of` from 5 on, then powers of two, then the values
    nearest the middle of the range, for a narrow one), then the analysis values other than the
    original (a range of few allowed values, e.g. powers of two up to 512)."""
    probes = [v for v in PROBES if _accepts(const, v)]
    m = const.multiple_of
    extra = [m * k for k in range(5, 40, 2) if m * k not in const.values] + [
        2**k for k in range(1, 31) if 2**k not in const.values
    ]
    if const.min_value is not None and const.max_value is not None:  # a narrow range (a band): its middle
        mid = (const.min_value + const.max_value) // 2
        extra += [v for d in range(64) for v in (mid - d, mid + d) if v not in const.values]
    for v in [*extra, *const.values[1:]]:
        if len(probes) >= MIN_PROBES:
            break
        if v not in probes and _accepts(const, v):
            probes.append(v)
    return probes


def run_case(case: Case, force_int3: bool = False) -> Case:
    case.table = analyze(case.spec)
    const = case.table.consts[0]
    if not const.tunable:
        case.verdict = "refused"
        case.detail = [f"{r.function}: {r.reason} {r.detail}".strip() for r in const.refusals]
        return case
    probes = case.probes = probe_values(const)
    case.refused_values = [v for v in PROBES if not _accepts(const, v)]
    if probes and (const.multiple_of > 1 or const.power_of_two):  # inside the range, off the constraint
        case.refused_values.append(probes[0] + 1)
    binary = Path(case.table.binary.path)
    t = Target(command(case.spec, binary))
    try:
        before = t.ask(INPUTS)
        try:
            eng.attach(t.p.pid, case.table, ["K"], force_int3=force_int3)
        except eng.SieError as e:  # the table said tunable: failing to apply it is a failure
            case.verdict, case.detail = "fail", [f"attach: {e}"]
            return case
        ok = bool(probes)
        if not probes:
            case.detail.append("no probe value inside the validated range")
        for v in case.refused_values:  # refused by the engine itself, from the plan (no `const` here)
            try:
                eng.set_value(t.p.pid, "K", v)
            except eng.SieError:
                continue
            ok = False
            case.detail.append(f"K={v}: the engine took a value the table refuses")
        for v in probes:
            eng.set_value(t.p.pid, "K", v, const)
            got, want = t.ask(INPUTS), reference(case.spec, v)
            if got != want:
                ok = False
                bad = [f"{n}: {g} != {w}" for n, g, w in zip(INPUTS, got, want, strict=False) if g != w]
                case.detail.append(f"K={v}: {len(bad)} outputs differ, e.g. {bad[:3]}")
        eng.detach(t.p.pid)
        if not eng.spans_hold_original(t.p.pid, case.table):
            ok = False
            case.detail.append("text differs from the original after detach")
        if t.ask(INPUTS) != before:
            ok = False
            case.detail.append("output after detach differs from the original")
        case.verdict = "pass" if ok else "fail"
    finally:
        t.close()
    return case


def corpus_cases(shared: bool = False) -> list[Case]:
    make = shared_case if shared else case
    return [
        make(src.stem, cc, opt, **OPT_IN.get(src.stem, {}))
        for src in sorted(CORPUS.glob("*.c"))
        for cc, opt in CONFIGS
    ]


def run_corpus(
    workers: int = 2, force_int3: bool = False, only: tuple[str, str] | None = None, shared: bool = False
) -> list[Case]:
    """`only`: one (cc, opt) of CONFIGS; `shared`: the programs built as shared libraries."""
    cases = [c for c in corpus_cases(shared) if only is None or (c.cc, c.opt.removesuffix(" .so")) == only]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda c: run_case(c, force_int3), cases))
