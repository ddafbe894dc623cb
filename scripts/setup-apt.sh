#!/usr/bin/env bash
# Installs the Debian packages listed in apt-packages.txt that are missing; fast when none is.
set -euo pipefail
list="$(dirname "$0")/apt-packages.txt"
missing=()
while read -r pkg; do
	[[ -z "$pkg" || "$pkg" == \#* ]] && continue
	status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
	[[ "$status" == "install ok installed" ]] || missing+=("$pkg")
done <"$list"
[[ ${#missing[@]} -eq 0 ]] && exit 0
if [[ $(id -u) -ne 0 ]]; then
	echo "setup: missing Debian packages (${missing[*]}); run 'make setup' as root" >&2
	exit 1
fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# flock: parallel setups wait for each other instead of failing on dpkg's lock.
exec 9>/tmp/xtune-apt.lock
flock 9
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
