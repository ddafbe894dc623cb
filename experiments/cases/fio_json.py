"""The block case's load: fio on the case's loop device, cold cache, its own figures as one JSON line.

    fio_json.py DEVICE SECONDS

Writes back dirty pages and drops the page cache (`sync; echo 3 > /proc/sys/vm/drop_caches`, the
whole host's) so every run starts cold, then runs two fio jobs one after the other (`stonewall`):
- `seq`: the whole device read SEQ_PASSES times, buffered, 4 KiB psync reads: what reaches the
  device is the kernel's readahead (read_ahead_kb, split at max_sectors_kb), so the queue's knobs
  set its rate. Every pass starts cold as the first does: fio opens the device again for each pass
  and invalidates its page cache when it does (BLKFLSBUF; the kernel also drops a block device's
  cache at its last close), so passes after the first are not read from memory (measured here:
  four passes run at the rate of one). One pass of 512 MiB lasts well under a second at this
  host's rates, and a pause of the shared host's CPUs moved single passes by 40 %; four passes
  halved that spread (coefficient of variation 0.38 -> 0.18 over 8 interleaved runs each);
- `rand`: SECONDS of 4 KiB random reads, O_DIRECT, libaio at queue depth 32: the scheduler's path.
Prints `{"seq_read_mib_s", "seq_read_p99_ms", "rand_read_iops", "rand_read_mib_s",
"rand_read_p99_ms"}` from fio's `--output-format=json` document (read bandwidth, IOPS and the
completion-latency percentiles). A field the document lacks, or that is not a number, is an error
naming the job and the field: the script exits non-zero and the trial fails (never a zero).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from typing import Any

BLOCK = "4k"
QUEUE_DEPTH = 32
SEQ_PASSES = 4  # reads of the whole device per run (see the docstring: each one cold)
P99 = "99.000000"  # fio's key for the 99th percentile in clat_ns.percentile
DROP_CACHES = "/proc/sys/vm/drop_caches"


class FioOutputError(ValueError):
    """fio's JSON document does not read as expected (which job, which field)."""


def command(device: str, seconds: str) -> list[str]:
    return [
        "fio", "--output-format=json", f"--filename={device}", f"--bs={BLOCK}", "--percentile_list=99",
        "--name=seq", "--rw=read", "--ioengine=psync", "--direct=0", "--size=100%", f"--loops={SEQ_PASSES}",
        "--name=rand", "--stonewall", "--rw=randread", "--ioengine=libaio", f"--iodepth={QUEUE_DEPTH}",
        "--direct=1", "--time_based", f"--runtime={seconds}", "--randrepeat=0",
    ]  # fmt: skip


def _field(doc: Any, job: str, path: tuple[str, ...]) -> float:
    where = f"job {job!r}: field {'.'.join(path)}"
    for part in path:
        if not isinstance(doc, dict) or part not in doc:
            raise FioOutputError(f"fio's JSON has no {where} (missing {part!r})")
        doc = doc[part]
    if isinstance(doc, bool) or not isinstance(doc, int | float) or not math.isfinite(doc):
        raise FioOutputError(f"fio's JSON {where} is {doc!r}, not a finite number")
    return float(doc)


def figures(doc: Any) -> dict[str, float]:
    """The figures this case reads from fio's JSON document (see the module's docstring)."""
    jobs = doc.get("jobs") if isinstance(doc, dict) else None
    if not isinstance(jobs, list):
        raise FioOutputError("fio's JSON has no field jobs (a list of the jobs' results)")
    by_name = {j.get("jobname"): j for j in jobs if isinstance(j, dict)}
    for name in ("seq", "rand"):
        if name not in by_name:
            raise FioOutputError(f"fio's JSON has no job {name!r} (jobs: {sorted(map(str, by_name))})")
        errors = _field(by_name[name], name, ("error",))
        if errors:
            raise FioOutputError(f"fio's JSON job {name!r}: field error is {errors:g} (the job failed)")
    seq, rand = by_name["seq"], by_name["rand"]
    mib = 1024 * 1024
    return {
        "seq_read_mib_s": _field(seq, "seq", ("read", "bw_bytes")) / mib,
        "seq_read_p99_ms": _field(seq, "seq", ("read", "clat_ns", "percentile", P99)) / 1e6,
        "rand_read_iops": _field(rand, "rand", ("read", "iops")),
        "rand_read_mib_s": _field(rand, "rand", ("read", "bw_bytes")) / mib,
        "rand_read_p99_ms": _field(rand, "rand", ("read", "clat_ns", "percentile", P99)) / 1e6,
    }


def parse(stdout: str) -> dict[str, float]:
    """fio's stdout (its JSON document, possibly after notes it prints first) read into figures."""
    start = stdout.find("{")
    try:
        doc = json.loads(stdout[start:]) if start >= 0 else None
    except json.JSONDecodeError as e:
        raise FioOutputError(f"fio's output is not a JSON document: {e}") from None
    if doc is None:
        raise FioOutputError("fio printed no JSON document")
    return figures(doc)


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        sys.exit("usage: fio_json.py DEVICE SECONDS")
    device, seconds = argv[1:]
    subprocess.run(["sync"], check=True)
    with open(DROP_CACHES, "w") as f:
        f.write("3\n")
    done = subprocess.run(command(device, seconds), capture_output=True, text=True)
    try:
        if done.returncode != 0:
            tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
            raise FioOutputError(f"fio exited with {done.returncode}: {tail}")
        out = parse(done.stdout)
    except FioOutputError as e:
        print(f"fio_json: {e}", file=sys.stderr)
        return 1
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
