"""The block case's load: fio on the case's loop device, cold cache, its own figures as one JSON line.

    fio_json.py DEVICE SECONDS

Runs two fio jobs one after the other (`stonewall`):
- `seq`: the whole device read SEQ_PASSES times, buffered, 4 KiB psync reads: what reaches the
  device is the kernel's readahead (read_ahead_kb, split at max_sectors_kb), so the queue's knobs
  set its rate. One pass of 512 MiB lasts well under a second at this host's rates, and the shared
  host's CPUs moved single passes by tens of percent; several passes average that out;
- `rand`: SECONDS of 4 KiB random reads, O_DIRECT, libaio at queue depth 32: the scheduler's path.
Every pass starts cold: fio invalidates the device's page cache each time it opens it (its
`invalidate`, on by default: BLKFLSBUF for a block device), and it opens it again for each pass.
That is checked, not assumed: the device's own count of sectors read (/sys/block/NAME/stat) must
grow by at least what both jobs read, or part of the sequential read came from memory and the run
is an error. Only the device's cache is dropped: the host's (`drop_caches`) would make everything
else on the host read its files again from the disk while fio measures it.
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
from pathlib import Path
from typing import Any

BLOCK = "4k"
QUEUE_DEPTH = 32
SEQ_PASSES = 4  # reads of the whole device per run (see the docstring: each one cold)
P99 = "99.000000"  # fio's key for the 99th percentile in clat_ns.percentile
SECTOR = 512  # /sys/block/NAME/stat counts 512-byte sectors whatever the device's block size


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


def document(stdout: str) -> Any:
    """fio's JSON document from its stdout (possibly after notes it prints first)."""
    start = stdout.find("{")
    try:
        doc = json.loads(stdout[start:]) if start >= 0 else None
    except json.JSONDecodeError as e:
        raise FioOutputError(f"fio's output is not a JSON document: {e}") from None
    if doc is None:
        raise FioOutputError("fio printed no JSON document")
    return doc


def parse(stdout: str) -> dict[str, float]:
    """fio's stdout read into figures."""
    return figures(document(stdout))


def check_cold(doc: Any, device_bytes: int) -> None:
    """The device read at least what both jobs read (`read.io_bytes`), or part of the sequential
    read was served from the page cache: an error, never a figure."""
    jobs = {j.get("jobname"): j for j in doc["jobs"] if isinstance(j, dict)}
    asked = sum(_field(jobs[name], name, ("read", "io_bytes")) for name in ("seq", "rand"))
    if device_bytes < asked:
        raise FioOutputError(
            f"the device read {device_bytes / 2**20:.0f} MiB but the jobs {asked / 2**20:.0f} MiB: "
            "part of the sequential read came from the page cache (is the device held open with "
            "fio's invalidate off?)"
        )


def device_read_bytes(device: str) -> int:
    """Bytes the block device has read since it was made (its stat file's sectors read)."""
    return int((Path("/sys/block") / Path(device).name / "stat").read_text().split()[2]) * SECTOR


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        sys.exit("usage: fio_json.py DEVICE SECONDS")
    device, seconds = argv[1:]
    before = device_read_bytes(device)
    done = subprocess.run(command(device, seconds), capture_output=True, text=True)
    try:
        if done.returncode != 0:
            tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
            raise FioOutputError(f"fio exited with {done.returncode}: {tail}")
        doc = document(done.stdout)
        out = figures(doc)
        check_cold(doc, device_read_bytes(device) - before)
    except FioOutputError as e:
        print(f"fio_json: {e}", file=sys.stderr)
        return 1
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
