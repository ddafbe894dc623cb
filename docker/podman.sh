#!/usr/bin/env bash
# podman with xtune's settings (docker/containers.conf: runtime and limits); arguments as podman's.
exec env CONTAINERS_CONF="$(cd "$(dirname "$0")" && pwd)/containers.conf" podman "$@"
