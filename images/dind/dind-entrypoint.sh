#!/bin/bash
# Entry point of sandman/dind: a Docker Engine inside a privileged container,
# reached over TCP with mutual TLS, like the public docker:dind image.
#
# At first start it makes the certificates, in docker:dind's layout, so the
# same job configuration works with either image:
#   $DOCKER_TLS_CERTDIR/ca/      cert.pem key.pem        (keep private)
#   $DOCKER_TLS_CERTDIR/server/  ca.pem cert.pem key.pem (the engine's)
#   $DOCKER_TLS_CERTDIR/client/  ca.pem cert.pem key.pem (share this one with
#                                jobs: DOCKER_CERT_PATH=.../client)
# Certificates already there are kept (a volume makes them survive restarts).
# With server/ca.pem, cert.pem, key.pem given and no ca/key.pem, nothing is
# made: the certificates come from a CA outside (one CA for many engines).
# client/cert.pem is written last: a job may wait for it.
#
# Environment:
#   DOCKER_TLS_CERTDIR  where the certificates live (/certs); empty: no TLS,
#                       plain TCP on 2375 (only on a network you trust)
#   DOCKER_TLS_SAN      more subject alternative names for the server,
#                       e.g. "DNS:ci-engine IP:10.0.0.5"
#   DIND_KEY_BITS       RSA key size (3072)
#   DIND_CERT_DAYS      validity (825 days)
# Arguments are passed to dockerd.
set -euo pipefail

CERTDIR=${DOCKER_TLS_CERTDIR-/certs}
BITS=${DIND_KEY_BITS:-3072}
DAYS=${DIND_CERT_DAYS:-825}

log() { printf 'dind-entrypoint: %s\n' "$*" >&2; }

# Writes a file through a temporary name so a reader never sees half of it.
install_file() {
  local src=$1 dest=$2 mode=$3
  cp "$src" "$dest.tmp.$$"
  chmod "$mode" "$dest.tmp.$$"
  mv -f "$dest.tmp.$$" "$dest"
}

make_certs() {
  local dir=$1 tmp san
  # Certificates made elsewhere (one CA for several engines, e.g. the nodes
  # of a swarm): the server's three files and no CA key here. Used as they are.
  if [ ! -e "$dir/ca/key.pem" ] && [ -s "$dir/server/ca.pem" ] &&
    [ -s "$dir/server/cert.pem" ] && [ -s "$dir/server/key.pem" ]; then
    log "using the server certificates in $dir/server (made outside, no CA key here)"
    return 0
  fi
  mkdir -p "$dir/ca" "$dir/server" "$dir/client"
  tmp=$(mktemp -d)
  # shellcheck disable=SC2064
  trap "rm -rf '$tmp'" RETURN

  if [ ! -s "$dir/ca/key.pem" ] || [ ! -s "$dir/ca/cert.pem" ]; then
    log "generating a CA in $dir/ca"
    openssl genrsa -out "$tmp/ca-key.pem" "$BITS" 2>/dev/null
    openssl req -new -x509 -sha256 -days "$DAYS" -key "$tmp/ca-key.pem" \
      -subj "/CN=sandman dind CA" -out "$tmp/ca.pem"
    install_file "$tmp/ca-key.pem" "$dir/ca/key.pem" 0600
    install_file "$tmp/ca.pem" "$dir/ca/cert.pem" 0644
    # A new CA invalidates whatever it did not sign.
    rm -f "$dir/server/cert.pem" "$dir/client/cert.pem"
  fi

  if [ ! -s "$dir/server/cert.pem" ] || [ ! -s "$dir/server/key.pem" ]; then
    # The names a job may use for this engine: the compose service name,
    # the host name, localhost, the container's addresses, and any extra.
    san="DNS:docker,DNS:localhost,DNS:$(hostname),IP:127.0.0.1"
    local ip
    for ip in $(hostname -i 2>/dev/null || true); do
      case "$ip" in *:*) ;; *) san="$san,IP:$ip" ;; esac
    done
    for extra in ${DOCKER_TLS_SAN:-}; do san="$san,$extra"; done
    log "generating the server certificate ($san)"
    openssl genrsa -out "$tmp/server-key.pem" "$BITS" 2>/dev/null
    openssl req -new -sha256 -key "$tmp/server-key.pem" -subj "/CN=docker" -out "$tmp/server.csr"
    printf 'subjectAltName = %s\nextendedKeyUsage = serverAuth\n' "$san" >"$tmp/server.ext"
    openssl x509 -req -sha256 -days "$DAYS" -in "$tmp/server.csr" -CA "$dir/ca/cert.pem" \
      -CAkey "$dir/ca/key.pem" -CAcreateserial -CAserial "$tmp/ca.srl" \
      -extfile "$tmp/server.ext" -out "$tmp/server.pem" 2>/dev/null
    install_file "$dir/ca/cert.pem" "$dir/server/ca.pem" 0644
    install_file "$tmp/server-key.pem" "$dir/server/key.pem" 0600
    install_file "$tmp/server.pem" "$dir/server/cert.pem" 0644
  fi

  if [ ! -s "$dir/client/cert.pem" ] || [ ! -s "$dir/client/key.pem" ]; then
    log "generating the client certificate in $dir/client"
    openssl genrsa -out "$tmp/client-key.pem" "$BITS" 2>/dev/null
    openssl req -new -sha256 -key "$tmp/client-key.pem" -subj "/CN=sandman dind client" \
      -out "$tmp/client.csr"
    printf 'extendedKeyUsage = clientAuth\n' >"$tmp/client.ext"
    openssl x509 -req -sha256 -days "$DAYS" -in "$tmp/client.csr" -CA "$dir/ca/cert.pem" \
      -CAkey "$dir/ca/key.pem" -CAcreateserial -CAserial "$tmp/ca.srl" \
      -extfile "$tmp/client.ext" -out "$tmp/client.pem" 2>/dev/null
    install_file "$dir/ca/cert.pem" "$dir/client/ca.pem" 0644
    # Readable by a job running as another user in its own container, as
    # docker:dind does; the volume is the boundary.
    install_file "$tmp/client-key.pem" "$dir/client/key.pem" 0644
    install_file "$tmp/client.pem" "$dir/client/cert.pem" 0644
  fi
}

# What docker's own dind hack does before dockerd can nest.
prepare_kernel_mounts() {
  if [ -d /sys/kernel/security ] && ! mountpoint -q /sys/kernel/security; then
    mount -t securityfs none /sys/kernel/security 2>/dev/null ||
      log "could not mount securityfs (AppArmor profiles will not load)"
  fi
  # Mount propagation for the volumes of nested containers.
  mount --make-rshared / 2>/dev/null || true
  # cgroup v1 without --privileged (all capabilities added instead, where the
  # host engine cannot grant every one): the hierarchies come read-only;
  # dockerd needs to make cgroups for its containers.
  local m
  # mountinfo: field 5 the mount point, 6 its options, then optional fields
  # up to "-", then the file system type.
  for m in $(awk '{ for (i = 7; i < NF; i++) if ($i == "-") break }
                  $(i + 1) == "cgroup" && $6 ~ /^ro(,|$)/ { print $5 }' /proc/self/mountinfo); do
    mount -o remount,bind,rw "$m" 2>/dev/null || log "could not make $m writable"
  done
  # cgroup v2: move ourselves out of the root cgroup so that dockerd can
  # enable the controllers for its children.
  if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    mkdir -p /sys/fs/cgroup/init
    local p
    while read -r p; do echo "$p" >/sys/fs/cgroup/init/cgroup.procs 2>/dev/null || true; done \
      </sys/fs/cgroup/cgroup.procs
    sed -e 's/ / +/g' -e 's/^/+/' </sys/fs/cgroup/cgroup.controllers \
      >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || true
  fi
}

if [ "${1:-}" != "" ] && [ "${1#-}" = "$1" ]; then
  # A command rather than dockerd flags: run it (docker run sandman/dind sh).
  exec "$@"
fi

prepare_kernel_mounts
hosts=(--host=unix:///var/run/docker.sock)
if [ -n "$CERTDIR" ]; then
  make_certs "$CERTDIR"
  hosts+=(--host=tcp://0.0.0.0:2376 --tlsverify --tlscacert="$CERTDIR/server/ca.pem"
    --tlscert="$CERTDIR/server/cert.pem" --tlskey="$CERTDIR/server/key.pem")
else
  log "DOCKER_TLS_CERTDIR is empty: listening on tcp://0.0.0.0:2375 WITHOUT TLS"
  hosts+=(--host=tcp://0.0.0.0:2375)
fi
log "starting dockerd ${hosts[*]} $*"
exec dockerd "${hosts[@]}" "$@"
