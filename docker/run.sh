#!/usr/bin/env bash
# Runs an xtune image against the host it is started on: `run.sh agent|full COMMAND...`.
# BPF and knobs act on the host's kernel, so the container is privileged and shares the host's PID
# and network namespaces; bpffs, tracefs, debugfs, /dev/shm (signal ring, knob table), /run/xtune
# (control socket) and /var/lib/xtune (journal, so that a restarted container restores what a
# killed one changed) are the host's. The current directory is /work in the container.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
kind=${1:-}
case $kind in
agent | full) shift ;;
*)
	echo "usage: $0 agent|full COMMAND..." >&2
	exit 2
	;;
esac
mkdir -p /run/xtune /var/lib/xtune
tty=()
[[ -t 0 ]] && tty=(--tty)
exec "$here/podman.sh" run --rm --interactive "${tty[@]}" --privileged --pid=host --network=host \
	--volume /sys/fs/bpf:/sys/fs/bpf \
	--volume /sys/kernel/tracing:/sys/kernel/tracing \
	--volume /sys/kernel/debug:/sys/kernel/debug \
	--volume /dev/shm:/dev/shm \
	--volume /run/xtune:/run/xtune \
	--volume /var/lib/xtune:/var/lib/xtune \
	--volume "$PWD":/work --workdir /work \
	"localhost/xtune-$kind" "$@"
