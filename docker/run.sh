#!/usr/bin/env bash
# Runs the xtune image against the host it is started on: BPF and knobs need the host's kernel
# interfaces, so the container is privileged and shares the host's PID and network namespaces.
set -euo pipefail
exec docker run --rm -it --privileged --pid=host --network=host \
	-v /sys/kernel/btf:/sys/kernel/btf:ro \
	-v /sys/fs/bpf:/sys/fs/bpf \
	-v /sys/kernel/tracing:/sys/kernel/tracing \
	-v /sys/kernel/debug:/sys/kernel/debug \
	-v /dev/shm:/dev/shm \
	-v /run/xtune:/run/xtune \
	-v /var/lib/xtune:/var/lib/xtune \
	-v "$PWD":/work -w /work \
	xtune "$@"
