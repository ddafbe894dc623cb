"""One QEMU guest run for a benchmark or test: Debian's kernel, xsie.ko and the guest tools built
(kmod/Makefile), a spans file for the named perf-consts, one guest script under kmod/guest, its
serial console and the XSIE-METRIC lines it printed. Runs under /tmp/xtune-heavy.lock so that
concurrent measurements on the shared host do not overlap."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from xtune import paths
from xtune.sie.kernel import analyze as kernel
from xtune.sie.kernel import source as kernel_build

KMOD = paths.ROOT / "kmod"
HEAVY_LOCK = "/tmp/xtune-heavy.lock"
# BLK values: 2*V must stay below 128 or gcc switches to a 16-bit add (a different code shape).
VALUES = {"BLK_MAX_REQUEST_COUNT": [32, 8, 48]}
CRASH = re.compile(r"Oops|BUG:|WARNING:|general protection|kernel panic")
# KernelX's two TCP shift counts, literals of .c files (guest/tests/58): FILE, the line's text, TOKEN.
SHIFT_SITES = {
    "HYSTART_DELAY_MIN_SHIFT": ("net/ipv4/tcp_cubic.c", "ca->delay_min >> 3", "3"),
    "TCP_RACK_MIN_RTT_SHIFT": ("net/ipv4/tcp_recovery.c", "tcp_min_rtt(tp) >> 2", "2"),
}


def kernel_env() -> str:
    run = subprocess.run(
        [str(KMOD / "harness" / "fetch-kernel.sh")], capture_output=True, text=True, check=True
    )
    return run.stdout.strip()


def shift_sites() -> dict[str, str]:
    """SHIFT_SITES as NAME -> FILE:LINE:TOKEN (xtune analyze --kernel-site), each line found by its
    text in the prepared kernel tree."""
    source = kernel_build.KernelEnv.fetch().source
    sites = {}
    for name, (file, text, token) in SHIFT_SITES.items():
        [line] = [n for n, s in enumerate((source / file).read_text().splitlines(), 1) if text in s]
        sites[name] = f"{file}:{line}:{token}"
    return sites


def run_script(
    script: str,
    consts: list[str],
    files: Sequence[Path] = (),
    timeout_s: int = 420,
    sites: dict[str, str] | None = None,
) -> tuple[str, dict[str, int]]:
    """Boots a guest running kmod/guest/<script>.sh with `files` in /xsie/; (console, metrics).
    The spans file holds the #defines `consts` and the literals `sites` (name -> FILE:LINE:TOKEN)."""
    env_file = kernel_env()
    # What these guest scripts use: the guest xrtd (built by `make -C kmod`, the kernel tests)
    # is left out so that a change in progress in runtime/ does not stop them.
    out = paths.BUILD / "kmod"
    targets = [str(out / m) for m in ("xsie.ko", "xsie_testload.ko")]
    targets += [str(out / "guest" / t) for t in ("xsiectl", "plugload", "linesock")]
    subprocess.run(
        ["make", "-s", "-C", str(KMOD), f"TOP={paths.ROOT}", f"BUILD={paths.BUILD}", *targets], check=True
    )
    result = kernel.analyze(consts, {c: v for c, v in VALUES.items() if c in consts}, sites=sites)
    with tempfile.TemporaryDirectory() as tmp:
        spans, initrd, console = Path(tmp, "spans.txt"), Path(tmp, "initrd.gz"), Path(tmp, "console.log")
        spans.write_text("\n".join(kernel.xsie_lines(result)) + "\n")
        build_env = dict(os.environ, BUILD=str(paths.BUILD), GUEST_FILES=" ".join(str(f) for f in files))
        harness = KMOD / "harness"
        subprocess.run(
            [str(harness / "build-initramfs.sh"), env_file, str(spans), str(initrd), script],
            check=True,
            env=build_env,
        )
        run = subprocess.run(
            [
                "flock",
                HEAVY_LOCK,
                str(harness / "run-guest.sh"),
                env_file,
                str(initrd),
                str(console),
                str(timeout_s),
            ]
        )
        text = console.read_text(errors="replace")
    kept = paths.BUILD / "kmod" / f"last-{Path(script).name}-console.log"
    kept.write_text(text)
    # A guest whose kernel oopsed measured nothing trustworthy, even if it finished.
    crash = CRASH.search(text)
    if crash:
        raise RuntimeError(f"guest {script}: kernel trouble ({crash[0]!r}); console in {kept}")
    if run.returncode:
        raise RuntimeError(f"guest {script} did not finish; console in {kept}")
    return text, {m.group(1): int(m.group(2)) for m in re.finditer(r"^XSIE-METRIC (\S+) (-?\d+)", text, re.M)}
