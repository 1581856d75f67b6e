#!/usr/bin/env bash
# The fresh engine's dockerd (scripts/lib/fresh_engine.sh), started in its
# network namespace and a mount namespace of its own (slave: nothing it
# mounts reaches the machine's). /sys is mounted again so that its network
# devices are the namespace's, not the machine's (as `ip netns exec` does);
# the cgroup hierarchies under /sys/fs/cgroup are carried over onto it.
#   nsenter --net=/run/netns/NS unshare --mount --propagation slave \
#     bash fresh-dockerd.sh DIR [DOCKERD ARGS...]
set -euo pipefail
dir=$1
shift
mkdir -p "$dir/cgroup"
mount --rbind /sys/fs/cgroup "$dir/cgroup"
mount -t sysfs -o nosuid,nodev,noexec sysfs /sys
mount --rbind "$dir/cgroup" /sys/fs/cgroup
umount -l "$dir/cgroup"
exec dockerd "$@"
