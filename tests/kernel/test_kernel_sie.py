"""Kernel SIE end to end: analysis of Debian's kernel units on the host, xsie.ko in a QEMU guest.

One session fixture fetches Debian's current kernel packages (cached), builds xsie.ko and the guest
tools against them, analyzes seven perf-consts, boots the guest once with every guest test, and
collects the XSIE-RESULT lines of the serial console. Each guest check is one test here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import warnings
from pathlib import Path

import pytest
from xtune import paths
from xtune.sie import attach
from xtune.sie.differ import diff_functions
from xtune.sie.disasm import disassemble
from xtune.sie.elfcode import ElfCode
from xtune.sie.kernel import analyze as kernel
from xtune.sie.kernel import source as kernel_build
from xtune.sie.kernel import verify as kernel_verify
from xtune.sie.kernel.defines import find_define
from xtune.sie.scope import ScopeError, ScopeTable, Update
from xtune.testing import kernel_guest

KMOD = paths.ROOT / "kmod"
CONSTS = [
    "BLK_MAX_REQUEST_COUNT", "MAX_SOFTIRQ_RESTART", "SHRINK_BATCH",
    # KernelX's other perf-consts (guest/tests/55-57).
    "NR_MAX_BATCHED_MIGRATION", "BLK_MQ_RESOURCE_DELAY", "BLK_MQ_BUDGET_DELAY", "HYSTART_DELAY_MAX",
]  # fmt: skip
# BLK values: 2*V must stay below 128 or gcc switches to a 16-bit add (a different code shape).
VALUES = {"BLK_MAX_REQUEST_COUNT": [32, 8, 48]}
TESTLOAD_LIMITS = [100, 60, 150]
GUEST_CHECKS = [
    "blk_baseline", "blk_load", "blk_arm", "blk_v8", "blk_v128", "blk_applied", "blk_jump_optimized",
    "blk_disarmed",
    "blk_text_restored",
    "cmp_baseline", "cmp_load", "cmp_v10", "cmp_near_limits", "cmp_v200", "cmp_v200_int_min", "cmp_int_max",
    "cmp_int3", "cmp_disarmed",
    "softirq_baseline", "softirq_load", "softirq_arm", "softirq_v3", "softirq_v25", "softirq_disarmed",
    "softirq_text_restored",
    "shrink_baseline", "shrink_load", "shrink_arm", "shrink_v32", "shrink_v512", "shrink_disarmed",
    "shrink_text_restored",
    "migrate_baseline", "migrate_load", "migrate_arm", "migrate_v8", "migrate_v3", "migrate_v16",
    "migrate_applied", "migrate_disarmed", "migrate_text_restored",
    "resource_baseline", "resource_load", "resource_arm", "resource_v1236", "resource_v2468",
    "resource_applied", "resource_disarmed", "resource_text_restored",
    "budget_baseline", "budget_load", "budget_arm", "budget_v1236", "budget_v2468", "budget_applied",
    "budget_disarmed", "budget_text_restored",
    "hystart_load", "hystart_arm", "hystart_sets", "hystart_effect", "hystart_disarmed",
    "hystart_text_restored",
    "shifts_decode_refused", "shifts_hystart_load", "shifts_rack_load", "shifts_arm", "shifts_int3",
    "shifts_sets",
    "shifts_count_bounds", "shifts_spans_run", "shifts_rack_effect", "shifts_hystart_effect",
    "shifts_disarmed", "shifts_text_restored",
    "constraints_multiple_refused", "constraints_multiple_accepted", "constraints_applied",
    "constraints_store_not_applied", "constraints_store_applied", "constraints_v0_not_multiple",
    "constraints_power_refused", "constraints_power_accepted", "constraints_bad_line",
    "constraints_plain_range",
    "bounds_zero_refused", "bounds_above_refused", "bounds_store_not_applied", "bounds_store_applied",
    "bounds_default_v0",
    "per_thread_old_execution", "per_thread_new_execution", "per_thread_disarmed",
    "global_cold_part", "global_conditional_exit_refused", "global_idle_complete", "global_waits",
    "global_converges", "global_effect", "later_changes_immediate", "later_changes_global",
    "later_changes_per_thread",
    "flip_storm_flips", "flip_storm_kernel", "arm_storm_cycles", "arm_storm_kernel",
    "unload_in_transition", "unload_restores",
    "txn_abort", "txn_commit", "txn_atomic_pending", "txn_same_group", "txn_both_applied",
    "txn_disarm_together", "txn_restored",
    "bad_bytes", "bad_offset", "bad_probe", "bad_function", "bad_exit", "bad_mid_instruction",
    "bad_kernel_build", "bad_no_kernel",
    "bad_unloaded",
    "xrtd_register", "xrtd_set", "xrtd_effect", "xrtd_refuses_unloaded", "xrtd_unregister",
    "xrtd_restored", "xrtd_disarmed",
    "unload_armed", "unload_log", "unload_no_probes", "unload_text_exact",
]  # fmt: skip
CRASH = re.compile(r"Oops|BUG:|WARNING:|general protection|Call Trace|kernel panic", re.I)


def kernel_env_file() -> Path:
    run = subprocess.run([str(KMOD / "harness" / "fetch-kernel.sh")], capture_output=True, text=True)
    if run.returncode:
        pytest.fail(f"fetching Debian's kernel packages failed: {run.stderr[-1000:]}")
    return Path(run.stdout.strip())


def build_kmod() -> None:
    make = subprocess.run(
        ["make", "-s", "-C", str(KMOD), f"TOP={paths.ROOT}", f"BUILD={paths.BUILD}"],
        capture_output=True,
        text=True,
    )
    assert make.returncode == 0, f"building xsie.ko failed:\n{make.stdout[-2000:]}{make.stderr[-2000:]}"


def analyze_testload_limit() -> kernel.KernelAnalysis:
    """The test module's branch-only constant, from its own three builds (kmod/Makefile)."""
    objects = [paths.BUILD / "kmod" / "testload-limit" / str(v) / "xsie_testload.o" for v in TESTLOAD_LIMITS]
    return kernel.analyze_objects(
        "XSIE_TESTLOAD_LIMIT", objects, TESTLOAD_LIMITS, "kmod/testload/xsie_testload.c"
    )


def first_conditional_jump(unit: str, function: str) -> int:
    """The offset of a conditional jump in a distro function (for the guest's conditional-exit check)."""
    env = kernel_build.KernelEnv.fetch()
    define = find_define(env, "MAX_SOFTIRQ_RESTART")
    code = ElfCode(kernel_build.build_unit(env, define, unit, define.value))
    return next(
        i.off for i in disassemble(code, code.functions[function]) if i.is_jump and i.mnemonic != "jmp"
    )


@pytest.fixture(scope="session")
def analysis(tmp_path_factory: pytest.TempPathFactory) -> tuple[kernel.KernelAnalysis, Path]:
    out = tmp_path_factory.mktemp("kernel-analysis")
    result = kernel.analyze(CONSTS, VALUES, sites=kernel_guest.shift_sites())
    build_kmod()
    limit = analyze_testload_limit()
    spans = out / "spans.txt"
    # The test module runs in the same kernel: its spans carry the kernel's build id too.
    kernel_id = result.table.binary.build_id
    lines = kernel.xsie_lines(result) + kernel.xsie_lines(limit, len(result.table.consts), kernel_id)[1:]
    lines.append(f"# jcc handle_softirqs {first_conditional_jump('kernel/softirq.o', 'handle_softirqs'):#x}")
    spans.write_text("\n".join(lines) + "\n")
    (out / "scope.json").write_text(result.table.to_json())
    return result, spans


@pytest.fixture(scope="session")
def guest(analysis: tuple[kernel.KernelAnalysis, Path], tmp_path_factory: pytest.TempPathFactory) -> dict:
    if not shutil.which("qemu-system-x86_64"):
        pytest.skip("qemu-system-x86_64 is missing (Debian package qemu-system-x86)")
    env = kernel_env_file()
    build_kmod()
    out = tmp_path_factory.mktemp("guest")
    initrd, console = out / "initrd.gz", out / "console.log"
    build_env = dict(os.environ, BUILD=str(paths.BUILD))
    subprocess.run(
        [str(KMOD / "harness" / "build-initramfs.sh"), str(env), str(analysis[1]), str(initrd)],
        check=True,
        env=build_env,
    )
    run = subprocess.run([str(KMOD / "harness" / "run-guest.sh"), str(env), str(initrd), str(console), "420"])
    text = console.read_text(errors="replace")
    (paths.BUILD / "kmod" / "last-console.log").write_text(text)
    stalled = console.with_name(console.name + ".stalled")
    if stalled.exists():
        shutil.copy(stalled, paths.BUILD / "kmod" / "last-stalled-console.log")
        warnings.warn(
            "the first guest boot stalled before anything was armed and was retried; its console is "
            "build/kmod/last-stalled-console.log",
            stacklevel=1,
        )
    results = {}
    for m in re.finditer(r"^XSIE-RESULT (\S+) (PASS|FAIL) ?(.*)$", text, re.M):
        results[m.group(1)] = (m.group(2), m.group(3))
    return {"finished": run.returncode == 0, "console": text, "results": results}


def test_guest_finished(guest: dict) -> None:
    assert guest["finished"], "the guest did not reach XSIE-DONE:\n" + guest["console"][-3000:]


def test_guest_never_oopses(guest: dict) -> None:
    bad = [line for line in guest["console"].splitlines() if CRASH.search(line)]
    assert not bad, "kernel trouble on the console:\n" + "\n".join(bad[:40])


@pytest.mark.parametrize("name", GUEST_CHECKS)
def test_guest_check(guest: dict, name: str) -> None:
    assert name in guest["results"], f"guest check {name} did not report (see build/kmod/last-console.log)"
    status, detail = guest["results"][name]
    assert status == "PASS", f"{name}: {detail}"


def test_every_guest_result_is_known(guest: dict) -> None:
    """A FAIL of a check this file does not list must not go unnoticed."""
    failed = {n: d for n, (s, d) in guest["results"].items() if s == "FAIL"}
    assert not failed, failed


def test_analysis_spans(analysis: tuple[kernel.KernelAnalysis, Path]) -> None:
    result, spans = analysis
    table = ScopeTable.from_json(result.table.to_json())  # validates every field
    blk = table.const("BLK_MAX_REQUEST_COUNT")
    plug = [s for s in blk.spans if s.function == "blk_add_rq_to_plug"]
    assert len(plug) == 1 and "83e0e083c040" in plug[0].expected  # and $-32, %eax; add $64, %eax
    # The probe sits on the add (jump-optimizable) and pre-compensates its immediate.
    up = plug[0].update
    assert (up.kind, up.register, up.probe, up.v0, up.pre_add) == ("scale", "rax", 0x33, 32, 64)
    assert up.text == "xsie scale rax before +0x33"
    assert plug[0].exits and all(0 <= e < plug[0].safe[0].end for e in plug[0].exits)
    nr_ios = [s for s in blk.spans if s.function == "blk_start_plug_nr_ios"]
    assert [(s.update.kind, s.update.register, s.update.v0) for s in nr_ios] == [
        ("single_write", "rdx", None)
    ]
    softirq = table.const("MAX_SOFTIRQ_RESTART").spans
    assert [(s.function, s.update.kind, s.update.register) for s in softirq] == [
        ("handle_softirqs", "single_write", "r14")
    ]
    assert [s.function for s in table.const("SHRINK_BATCH").spans] == ["do_shrink_slab"]
    kernelx = {c: [(s.function, s.update.kind) for s in table.const(c).spans] for c in CONSTS[3:]}
    assert kernelx == {
        "NR_MAX_BATCHED_MIGRATION": [("migrate_pages", "cmp")],
        "BLK_MQ_RESOURCE_DELAY": [("blk_mq_dispatch_rq_list", "single_write")],
        "BLK_MQ_BUDGET_DELAY": [
            ("blk_mq_do_dispatch_sched", "single_write"),
            ("blk_mq_do_dispatch_ctx", "single_write"),
        ],
        "HYSTART_DELAY_MAX": [("cubictcp_acked", "single_write")],
    }
    assert all(not c.refusals for c in table.consts), [c.refusals for c in table.consts]
    text = spans.read_text()
    assert "span 2 set do_shrink_slab" in text
    assert "span 0 scale blk_add_rq_to_plug 0x2e 19c083e0e083c0406639c2 0x33 ax 32 1 0 32 64\n" in text
    sites = kernel_guest.SHIFT_SITES
    shifts = {c: [(s.function, s.update.kind) for s in table.const(c).spans] for c in sites}
    assert shifts == {
        "HYSTART_DELAY_MIN_SHIFT": [("cubictcp_acked", "shift")],
        "TCP_RACK_MIN_RTT_SHIFT": [("tcp_rack_detect_loss", "shift")],
    }
    assert f"span {len(CONSTS) + len(sites)} cmp testload_over " in text
    # The running kernel is named by its vmlinux build id; every const has a range (V >= 1, and
    # BLK's scale span leaves 2*V in a 32-bit register).
    assert text.startswith(
        f"kernel {kernel_verify.build_id(kernel_verify.vmlinux(kernel_build.KernelEnv.fetch()))}\n"
    )
    assert text.count("\nkernel ") == 0
    assert f"range 0 1 {2**30 - 1}\n" in text
    assert all(c.min_value == 1 for c in table.consts)


def test_cmp_update_fields(analysis: tuple[kernel.KernelAnalysis, Path]) -> None:
    """The test module's `cmp $100, %edi`: a cmp update on edi, probed on the compare itself."""
    table = ScopeTable.from_json(analyze_testload_limit().table.to_json())
    [span] = table.const("XSIE_TESTLOAD_LIMIT").spans
    up = span.update
    assert (span.function, up.kind, up.register, up.probe, up.v0) == ("testload_over", "cmp", "rdi", 7, 100)
    assert span.patch == "int3" and span.state.target == "flags"


def test_bad_kernel_updates_are_refused(analysis: tuple[kernel.KernelAnalysis, Path]) -> None:
    """Validation names the bad update field; the spans file refuses a user-space update and the
    process engine refuses kernel spans."""
    good = json.loads(analysis[0].table.to_json())
    blk = next(i for i, c in enumerate(good["consts"]) if c["name"] == "BLK_MAX_REQUEST_COUNT")
    scale = next(i for i, s in enumerate(good["consts"][blk]["spans"]) if s["update"]["kind"] == "scale")
    where = rf"\$\.consts\[{blk}\]\.spans\[{scale}\]\.update"
    cases = [
        ({"v0": None}, where + ": a scale update needs register, probe and v0"),
        ({"v0": 31}, where + r"\.v0: 31 is not the compiled value 32"),
        ({"probe": 0}, where + r"\.probe: 0x0 is outside the span"),
        ({"kind": "single_write", "v0": None}, where + r"\.pre_add: only a scale update has one"),
        ({"kind": "rotate"}, where + r"\.kind: Input should be 'single_write', .* not 'rotate'"),
    ]
    for edit, msg in cases:
        data = json.loads(json.dumps(good))
        data["consts"][blk]["spans"][scale]["update"].update(edit)
        with pytest.raises(ScopeError, match=msg):
            ScopeTable.from_dict(data)
    with pytest.raises(ScopeError, match=r"\$\.version: Input should be \d+, not 1"):
        ScopeTable.from_dict({**good, "version": 1})
    user = ScopeTable.from_dict(good)
    user.consts[blk].spans[scale].update = Update("inverse", "sub eax, ecx")
    with pytest.raises(ScopeError, match=r"blk_add_rq_to_plug\+0x2e: not a kernel span"):
        kernel.xsie_lines(kernel.KernelAnalysis(user, {}))
    with pytest.raises(attach.SieError, match="kernel spans"):
        attach.attach(os.getpid(), analysis[0].table, ["SHRINK_BATCH"])


def test_blk_unit_builds_match_the_distro_kernel() -> None:
    """block/blk-mq.o built with 32, 8 and 128: only blk_add_rq_to_plug changes, and the
    original build is found byte for byte (relocations aside) in Debian's vmlinux."""
    env = kernel_build.KernelEnv.fetch()
    define = find_define(env, "BLK_MAX_REQUEST_COUNT")
    assert define.value == 32
    codes = [ElfCode(kernel_build.build_unit(env, define, "block/blk-mq.o", v)) for v in (32, 8, 128)]
    changed = {d.name for d in diff_functions(codes[:2])} | {
        d.name for d in diff_functions([codes[0], codes[2]])
    }
    assert changed == {"blk_add_rq_to_plug"}
    image = kernel_verify.vmlinux(env)
    assert kernel_verify.matches(image, codes[0].functions["blk_add_rq_to_plug"]) == 1
    assert kernel_verify.matches(image, codes[1].functions["blk_add_rq_to_plug"]) == 0


def test_unknown_perf_const_is_refused() -> None:
    env = kernel_build.KernelEnv.fetch()
    with pytest.raises(kernel_build.KernelBuildError, match="NO_SUCH_CONST_XSIE"):
        find_define(env, "NO_SUCH_CONST_XSIE")


def test_analyze_kernel_command(tmp_path: Path, analysis: tuple[kernel.KernelAnalysis, Path]) -> None:
    """`xtune analyze --kernel` writes the scope table and spans file (units cached by the fixture)."""
    scope, spans = tmp_path / "scope.json", tmp_path / "spans.txt"
    run = subprocess.run(
        [str(paths.ROOT / ".venv/bin/xtune"), "analyze", "--kernel", "SHRINK_BATCH", "-o", str(scope)]
        + ["--xsie", str(spans)],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    table = ScopeTable.from_json(scope.read_text())
    assert [s.function for s in table.const("SHRINK_BATCH").spans] == ["do_shrink_slab"]
    assert "set do_shrink_slab" in spans.read_text()
    bad = subprocess.run(
        [str(paths.ROOT / ".venv/bin/xtune"), "analyze", "--kernel", "NO_SUCH_CONST_XSIE"]
        + ["-o", str(tmp_path / "bad.json")],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "NO_SUCH_CONST_XSIE" in bad.stderr
    assert not (tmp_path / "bad.json").exists()
