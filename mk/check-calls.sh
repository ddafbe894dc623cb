#!/bin/bash
# The call graph between the files of a C program, from its object files (nm): prints an edge
# "caller callee" per file that calls a function another defines (shared variables are not
# calls and are not counted), and fails when files call each other in a cycle or, given a
# layers file, when a file calls a higher layer.
#
# usage: mk/check-calls.sh [--layers LAYERS] OBJ...
#   LAYERS: lines "name: file-stem ...", lowest layer first; a stem may end in * (backend_*).
# Calls through function pointers (backend methods, probe handlers) are not seen.
set -euo pipefail
layers=
if [ "${1:-}" = --layers ]; then
	layers=$2
	shift 2
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for o in "$@"; do
	f=$(basename "$o" .o)
	nm --defined-only "$o" | awk -v f="$f" '$2 == "T" {print $3, f}' >>"$tmp/defs"
	nm --undefined-only "$o" | awk -v f="$f" '{print $2, f}' >>"$tmp/uses"
done
sort -u "$tmp/defs" >"$tmp/defs.s"
sort -u "$tmp/uses" >"$tmp/uses.s"
# caller callee, one line per pair of files
join "$tmp/uses.s" "$tmp/defs.s" | awk '$2 != $3 {print $2, $3}' | sort -u >"$tmp/edges"
cat "$tmp/edges"

status=0
if ! tsort "$tmp/edges" >/dev/null 2>"$tmp/tsort"; then
	echo "CYCLE between files:" >&2
	cat "$tmp/tsort" >&2
	status=1
fi
if [ -n "$layers" ]; then
	layer_of() {
		awk -v f="$1" '
			/^[ \t]*(#|$)/ {next}
			{n++; for (i = 2; i <= NF; i++) {
				p = $i; if (p ~ /\*$/) {sub(/\*$/, "", p); if (index(f, p) == 1) {print n; exit}}
				else if (p == f) {print n; exit}}}' "$layers"
	}
	while read -r a b; do
		la=$(layer_of "$a")
		lb=$(layer_of "$b")
		if [ -z "$la" ] || [ -z "$lb" ]; then
			echo "NOT IN $layers: $a or $b" >&2
			status=1
		elif [ "$la" -lt "$lb" ]; then
			echo "LAYER: $a (layer $la) calls $b (layer $lb)" >&2
			status=1
		fi
	done <"$tmp/edges"
fi
exit $status
