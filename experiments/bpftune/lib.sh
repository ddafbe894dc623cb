# shellcheck shell=dash
# Helpers of guest.sh, also sourced inside the client namespace (ip netns exec cli sh -c ...).

# The value of sysctl file $1 on one line, its fields separated by one space.
value() {
	tr -s '\t\n ' '   ' <"$1" 2>/dev/null | sed 's/ $//'
}

# Every value the tuners could move, one "path=value" line each, of the calling namespace.
snapshot() {
	for f in /proc/sys/net/core/* /proc/sys/net/ipv4/* /proc/sys/net/ipv4/neigh/default/* /proc/sys/net/ipv6/route/*; do
		# The owner's write bit: test -w is true for root even on read-only entries.
		case $(stat -c %A "$f") in -?w*) ;; *) continue ;; esac
		if [ -f "$f" ] && v=$(value "$f"); then
			echo "$f=$v"
		fi
	done
}

# Writes back every value of snapshot file $1 that differs now; prints what differs after.
restore() {
	while IFS='=' read -r f v; do
		[ "$(value "$f")" = "$v" ] || echo "$v" >"$f" 2>/dev/null
	done <"$1"
	snapshot | diff "$1" - | grep '^[-+]/' || true
}

# Sets the third field (the limit) of a three-field sysctl file $1 to $2, read back.
# (Not `read`: busybox reads a byte at a time, and a sysctl file read past offset 0 is empty.)
set_max() {
	# shellcheck disable=SC2046 # the three fields as $3 $4 $5
	set -- "$1" "$2" $(value "$1")
	echo "$3 $4 $2" >"$1" && [ "$(value "$1")" = "$3 $4 $2" ]
}
