#!/usr/bin/env bash
# Builds an xtune image with podman and prints its name and ID (the ID is this build's even when
# another checkout retags the name): `build.sh agent` (the C daemons and their libraries) or
# `build.sh full` (also the sources and the tuner's virtual environment). The binaries are the
# checkout's build/bin (`make build`; Debian 12 like the image). The build context is staged in a
# temporary directory so that the checkout's .venv and build tree are not sent.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(dirname "$here")
bin=${XTUNE_BUILD:-$top/build}/bin
kind=${1:-}
case $kind in
agent | full) ;;
*)
	echo "usage: $0 agent|full" >&2
	exit 2
	;;
esac

for b in xobserve xrtd xrtd-bridge xsie-user xcubic; do
	[[ -x $bin/$b ]] || {
		echo "build: $bin/$b is missing: run 'make build' first" >&2
		exit 1
	}
done
base=$("$here/base.sh")
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
mkdir "$ctx/bin" "$ctx/src"
cp -a "$bin/." "$ctx/bin/"
extra=()
if [[ $kind == full ]]; then
	# The tracked files of the checkout as they are in the work tree.
	git -C "$top" ls-files -z | tar -C "$top" --null --ignore-failed-read -T - -c | tar -C "$ctx/src" -x
	[[ -x $top/.venv/bin/pip ]] || {
		echo "build: $top/.venv is missing: run 'make setup' first" >&2
		exit 1
	}
	"$top/.venv/bin/pip" freeze --all --exclude-editable >"$ctx/constraints.txt"
	# pip trusts the host's CA bundle (a host behind a TLS-inspecting proxy has the proxy's CA
	# there); mounted for the build, it does not stay in the image.
	extra+=(--volume /etc/ssl/certs/ca-certificates.crt:/run/host-ca.crt:ro --build-arg PIP_CERT=/run/host-ca.crt)
fi
image=localhost/xtune-$kind:latest
"$here/podman.sh" build --build-arg BASE="$base" -f "$here/$kind.Containerfile" -t "$image" \
	--iidfile "$ctx/id" "${extra[@]}" "$ctx" >&2
echo "$image $(cat "$ctx/id")"
