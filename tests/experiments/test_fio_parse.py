"""The block case's fio reader: fio's JSON document read into the case's figures; a document that
lacks a field, or holds something other than a finite number there, is an error naming the job and
the field."""

from __future__ import annotations

import copy
import json

import pytest
from cases.fio_json import SEQ_PASSES, FioOutputError, check_cold, command, figures, parse


def job(name: str, bw_bytes: int, iops: float, p99_ns: int) -> dict:
    return {
        "jobname": name,
        "error": 0,
        "read": {"bw_bytes": bw_bytes, "iops": iops, "clat_ns": {"percentile": {"99.000000": p99_ns}}},
        "write": {"bw_bytes": 0, "iops": 0.0},
    }


DOC = {
    "fio version": "fio-3.33",
    "jobs": [
        job("seq", 512 * 1024 * 1024, 131072.0, 25088),
        job("rand", 200 * 1024 * 1024, 51200.5, 2899968),
    ],
}


def test_figures() -> None:
    assert figures(DOC) == {
        "seq_read_mib_s": 512.0,
        "seq_read_p99_ms": 0.025088,
        "rand_read_iops": 51200.5,
        "rand_read_mib_s": 200.0,
        "rand_read_p99_ms": 2.899968,
    }


def test_notes_before_the_document_are_skipped() -> None:
    text = "note: both iodepth >= 1 and synchronous I/O engine are selected\n" + json.dumps(DOC)
    assert parse(text)["rand_read_iops"] == 51200.5


def test_missing_percentile_names_job_and_field() -> None:
    doc = copy.deepcopy(DOC)
    del doc["jobs"][1]["read"]["clat_ns"]["percentile"]["99.000000"]
    with pytest.raises(FioOutputError, match=r"job 'rand': field read\.clat_ns\.percentile\.99\.000000"):
        figures(doc)


def test_non_number_names_job_and_field() -> None:
    doc = copy.deepcopy(DOC)
    doc["jobs"][0]["read"]["bw_bytes"] = "fast"
    with pytest.raises(FioOutputError, match=r"job 'seq': field read\.bw_bytes is 'fast', not a finite"):
        figures(doc)


def test_missing_job_and_failed_job() -> None:
    with pytest.raises(FioOutputError, match=r"no job 'rand' \(jobs: \['seq'\]\)"):
        figures({"jobs": DOC["jobs"][:1]})
    doc = copy.deepcopy(DOC)
    doc["jobs"][0]["error"] = 5
    with pytest.raises(FioOutputError, match=r"job 'seq': field error is 5"):
        figures(doc)


def test_not_json() -> None:
    with pytest.raises(FioOutputError, match="no JSON document"):
        parse("fio: pid=0, err=2/file:filesetup.c:xxx\n")
    with pytest.raises(FioOutputError, match="not a JSON document"):
        parse('{"jobs": [')
    with pytest.raises(FioOutputError, match="no field jobs"):
        figures({"fio version": "fio-3.33"})


def test_command_names_the_two_jobs_in_order() -> None:
    cmd = command("/dev/loop8", "2")
    assert cmd[:3] == ["fio", "--output-format=json", "--filename=/dev/loop8"]
    assert cmd.index("--name=seq") < cmd.index("--name=rand") < cmd.index("--stonewall")
    assert "--runtime=2" in cmd
    # The sequential read passes over the device several times, each cold: nothing turns off fio's
    # invalidation of the device's page cache.
    assert f"--loops={SEQ_PASSES}" in cmd and SEQ_PASSES > 1
    assert not any(a.startswith("--invalidate") for a in cmd)


def with_io(seq_mib: int, rand_mib: int) -> dict:
    doc = copy.deepcopy(DOC)
    for j, mib in zip(doc["jobs"], (seq_mib, rand_mib), strict=True):
        j["read"]["io_bytes"] = mib << 20
    return doc


def test_a_run_the_device_did_not_read_in_full_is_an_error() -> None:
    # Four cold passes of 512 MiB and 250 MiB of random reads: the device read all of it.
    check_cold(with_io(2048, 250), 2298 << 20)
    # One pass served from the page cache: the device read 512 MiB less than the jobs.
    with pytest.raises(FioOutputError, match=r"device read 1786 MiB but the jobs 2298 MiB"):
        check_cold(with_io(2048, 250), 1786 << 20)
    with pytest.raises(FioOutputError, match=r"job 'seq': field read.io_bytes"):
        check_cold(DOC, 1 << 30)
