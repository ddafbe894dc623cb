"""Fixtures shared by every integration test."""

import os
import signal
import subprocess

import pytest
from xtune import paths

# A background job of a non-interactive shell starts with SIGINT ignored, and Python then keeps it
# ignored, as do the programs the tests start (an ignored signal stays ignored across exec). The
# tests that interrupt a run with Ctrl-C need it to act: a handler here is reset to the default in
# every child at exec.
signal.signal(signal.SIGINT, signal.default_int_handler)

# `make test-fast` (pytest -m fast): modules that need no root, no network namespace, no daemon and
# no kernel build, and run in seconds.
FAST_MODULES = {
    "tests/experiments/test_fio_parse.py",
    "tests/experiments/test_pgbench_parse.py",
    "tests/experiments/test_run_order.py",
    "tests/experiments/test_tuned_disk.py",
    "tests/observers/test_signal_decode.py",
    "tests/runtime/test_table_layout.py",
    "tests/tuner/test_adaptive_policy.py",
    "tests/tuner/test_benchmark_metrics.py",
    "tests/tuner/test_check_figures.py",
    "tests/tuner/test_config.py",
    "tests/tuner/test_console.py",
    "tests/tuner/test_expr.py",
    "tests/tuner/test_models.py",
    "tests/tuner/test_report.py",
    "tests/tuner/test_store.py",
}


def pytest_collection_modifyitems(config, items):
    root = config.rootpath
    for item in items:
        # A test of such a module that needs root (a PostgreSQL store, say) is not fast.
        if item.path.relative_to(root).as_posix() in FAST_MODULES and not item.get_closest_marker("root"):
            item.add_marker(pytest.mark.fast)


@pytest.fixture(scope="session")
def bin_dir():
    """Directory of the binaries `make build` produced."""
    if not paths.BIN.exists():
        pytest.fail(f"{paths.BIN} is missing: run `make build` first")
    return paths.BIN


@pytest.fixture
def netns():
    """A throwaway network namespace (name), deleted afterwards."""
    name = f"xt-test-{os.getpid()}-{os.urandom(3).hex()}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)
