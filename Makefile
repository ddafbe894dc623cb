# xtune: the two commands are `make demo` and `make test`; both set up and build first.
SHELL := /bin/bash
TOP := $(abspath .)
BUILD := $(TOP)/build
VENV := $(TOP)/.venv
PY := $(VENV)/bin/python
PYTHON ?= python3
export XTUNE_ROOT := $(TOP)
export XTUNE_BUILD := $(BUILD)
# Downloads that outlive a checkout (Debian kernel packages, source trees): shared by clones.
export XTUNE_CACHE ?= $(HOME)/.cache/xtune

# C components built by `make build`, each with its own Makefile writing into $(BUILD).
C_COMPONENTS := observers runtime experiments

PYTEST := $(PY) -m pytest

.PHONY: all setup apt-deps build test lint format demo bench clean image \
	test-fast test-observers test-runtime test-tuner test-sie test-kernel

all: build

setup: apt-deps $(VENV)/.installed $(BUILD)/include/vmlinux.h

apt-deps:
	@scripts/setup-apt.sh

# flock: several builds in one tree must not run pip into the same environment at once.
$(VENV)/.installed: pyproject.toml | apt-deps
	flock $(TOP)/.venv.lock $(MAKE) --no-print-directory venv-install

.PHONY: venv-install
venv-install:
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@if [ pyproject.toml -nt $(VENV)/.installed ]; then \
		$(PY) -m pip install -q --upgrade pip && \
		$(PY) -m pip install -q -e '.[dev]' && touch $(VENV)/.installed; fi

$(BUILD)/include/vmlinux.h: | apt-deps
	@mkdir -p $(dir $@)
	bpftool btf dump file /sys/kernel/btf/vmlinux format c > $@.tmp && mv $@.tmp $@

build: setup
	@for d in $(C_COMPONENTS); do \
		if [ -f $$d/Makefile ]; then $(MAKE) --no-print-directory -C $$d TOP=$(TOP) BUILD=$(BUILD) || exit 1; fi; \
	done

# The kernel tests spend most of their time in a single-threaded QEMU guest and touch nothing the
# others read: they run beside the rest (their report follows the rest's), which keeps the
# suite's wall time down on a 2-core host.
test: build
	@echo "tests/kernel running beside the others; its report: $(BUILD)/test-kernel.log"
	@$(PYTEST) -p no:cacheprovider tests/kernel > $(BUILD)/test-kernel.log 2>&1 & kernel=$$!; \
		trap "kill $$kernel 2> /dev/null" INT TERM; \
		$(PYTEST) --ignore=tests/kernel tests; rest=$$?; \
		wait $$kernel; status=$$?; \
		echo "== tests/kernel"; cat $(BUILD)/test-kernel.log; \
		[ $$rest -eq 0 ] && [ $$status -eq 0 ]

# No root, no network namespaces, no daemons: under a minute.
test-fast: setup
	$(PYTEST) -m fast tests

test-observers: build
	$(PYTEST) tests/observers

test-runtime: build
	$(PYTEST) tests/runtime

test-tuner: build
	$(PYTEST) tests/tuner

test-sie: build
	$(PYTEST) tests/sie

test-kernel: build
	$(PYTEST) tests/kernel

demo: build
	$(VENV)/bin/xtune demo

# The agent and the full podman image (docker/README.md); tests/docker builds and runs the agent.
image: build
	docker/build.sh agent
	docker/build.sh full

bench: build
	@for f in experiments/bench_*.py; do echo "== $$f"; $(PY) $$f || exit 1; done

# No C file of xrtd or xsie.ko calls a higher layer or round a cycle (mk/check-calls.sh on the
# objects); kmod's objects need its kernel headers (fetched and cached like for test-kernel).
.PHONY: check-calls
check-calls: build
	$(MAKE) --no-print-directory -C runtime/xrtd TOP=$(TOP) BUILD=$(BUILD) check-calls
	$(MAKE) --no-print-directory -C kmod TOP=$(TOP) BUILD=$(BUILD) check-calls

# README figures equal their JSON and no JSON is older than the sources it measured.
.PHONY: check-figures
check-figures:
	$(PY) scripts/check-figures

C_SOURCES = $(shell git ls-files '*.c' '*.h' | grep -v '/vmlinux.h$$')

# Shell scripts checked by shellcheck (kmod/'s guest scripts are not yet clean and are left out).
SHELL_SCRIPTS = $(shell git ls-files '*.sh' | grep -v '^kmod/')

# ruff; mypy on the package (it ships py.typed); the one-way layers of tuner/xtune (pyproject's
# [tool.importlinter]); shellcheck; clang-format.
lint: setup
	$(VENV)/bin/ruff check tuner tests experiments models
	$(VENV)/bin/ruff format --check tuner tests experiments models
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	shellcheck $(SHELL_SCRIPTS)
	clang-format --dry-run --Werror $(C_SOURCES)

format: setup
	$(VENV)/bin/ruff format tuner tests experiments models
	$(VENV)/bin/ruff check --fix tuner tests experiments models
	clang-format -i $(C_SOURCES)

clean:
	rm -rf $(BUILD)
	@for d in $(C_COMPONENTS) kmod; do \
		if [ -f $$d/Makefile ]; then $(MAKE) --no-print-directory -C $$d TOP=$(TOP) BUILD=$(BUILD) clean; fi; \
	done
