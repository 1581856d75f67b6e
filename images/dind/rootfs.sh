#!/usr/bin/env bash
# Root file system of sandman/dind: the general image's Debian minbase root
# file system (see ../general/rootfs.sh, cached the same way) plus Debian's
# docker.io, iptables, openssl (TLS certificates at first start) and procps.
# A local stand-in for the public docker:dind image where no registry can
# be reached.
#
#   rootfs.sh DEST | --tar FILE
set -euo pipefail
export SANDMAN_ROOTFS_FLAVOUR=dind
export SANDMAN_ROOTFS_EXTRA="docker.io iptables openssl procps"
exec "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../general/rootfs.sh" "$@"
