#!/usr/bin/env bash
# Network allowlist through sandman itself (docs/network.md): `sandman run
# --network allowlist` and a runner whose configuration sets it, against a
# stand-in internet on this machine (allowed.test and denied.test: HTTP on
# 80, HTTPS on 443 and 8443, on an internal network of the test's own that
# is also the proxy's outbound network, so no packet leaves the machine).
#   - an allowed name works with curl and Python's urllib through the proxy
#     variables; a denied name, an IP literal, the metadata address, a
#     CONNECT to an unlisted port, a Host that disagrees with the target and
#     a raw TCP connection that ignores the proxy all fail;
#   - the sandbox has no network, its relay shares its network namespace
#     only; nothing the engine host holds answers it (TCP, UDP, runc and
#     gVisor); a changed network mode replaces the sandbox (settings hash);
#     gVisor as `runsc` is refused;
#   - a changed allowlist reaches a running sandbox without recreating it:
#     `sandman config reload`, and SIGHUP to the runner;
#   - two agents with different allowlists on one runner each get their own;
#     a request cannot widen the runner's network;
#   - each decision is in the audit trail with the right sandbox and rule.
# Sandboxes are per_run and shared across checks (one per agent) to stay lean.
source "$(dirname "$0")/lib.sh"
require_engine

INST=$SANDMAN_INSTANCE
IMG=sandman-test/egress-world:$INST
WORLD=$INST-world
it_runner_workdir
cleanup_all() {
  stop_worker
  egress_listen_stop 2>/dev/null || true
  cleanup_instance
  local n
  for n in $(docker network ls -q --filter "label=io.sandman.instance=$INST" 2>/dev/null); do
    docker network rm "$n" >/dev/null 2>&1 || true
  done
  docker network rm "$WORLD" >/dev/null 2>&1 || true
  docker image rm -f "$IMG" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
[ -n "${EGRESS_KEEP:-}" ] || trap cleanup_all EXIT

# ---- the stand-in internet ----
"$SANDMAN" image build "$SRC_DIR/tests/fixtures/egress-world" --tag "$IMG" >/dev/null
docker network create --internal --label "io.sandman.instance=$INST" "$WORLD" >/dev/null
printf 'subjectAltName=DNS:allowed.test,DNS:denied.test\n' >"$WORK/ext.cnf"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=sandman test CA" \
  -keyout "$WORK/ca.key" -out "$WORK/ca.pem" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj /CN=allowed.test -keyout "$WORK/srv.key" -out "$WORK/srv.csr" 2>/dev/null
openssl x509 -req -in "$WORK/srv.csr" -CA "$WORK/ca.pem" -CAkey "$WORK/ca.key" -CAcreateserial -days 2 \
  -extfile "$WORK/ext.cnf" -out "$WORK/srv.pem" 2>/dev/null
server() {
  docker run -d --name "$INST-$1" --label "io.sandman.instance=$INST" --network "$WORLD" --network-alias "$1.test" \
    -u 0:0 -e "NAME=$1.test" -e "CERT_PEM=$(cat "$WORK/srv.pem")" -e "KEY_PEM=$(cat "$WORK/srv.key")" \
    "$IMG" python3 -c "$(cat "$SRC_DIR/tests/fixtures/egress-world/server.py")" >/dev/null
  docker inspect -f "{{(index .NetworkSettings.Networks \"$WORLD\").IPAddress}}" "$INST-$1"
}
ALLOWED_IP=$(server allowed)
DENIED_IP=$(server denied)
CA_PEM=$(cat "$WORK/ca.pem")

# The configuration: allowlist everywhere; coder reaches allowed.test (its
# address listed: the stand-in lives on an engine network, which the proxy
# refuses unless listed), other reaches denied.test. metadata.test is pinned
# to the cloud metadata address for the proxy's resolver.
CFG=$WORK/sandman.yaml
write_config() { # $1: coder's extra allow patterns (YAML, or nothing)
  cat >"$CFG" <<EOF
defaults:
  network: allowlist
  image: $IMG
agents:
  coder:
    egress:
      allow: ["allowed.test:443", "allowed.test:80", "$ALLOWED_IP/32", "metadata.test"${1:+, $1}]
      deny: ["*.blocked.test"]
  other:
    egress:
      allow: ["denied.test:443", "$DENIED_IP/32"]
egress_proxy:
  network: $WORLD
  hosts:
    metadata.test: 169.254.169.254
audit:
  file: $WORK/audit.jsonl
EOF
}
write_config ""

# sb AGENT RUN SCRIPT: the script in the agent's per_run sandbox; output and
# errors on stdout, the exit status of the tool.
sb() {
  "$SANDMAN" --config "$CFG" run --mode per_run --agent "$1" --run-id "$2" -e "CA_PEM=$CA_PEM" \
    -- sh -c "printf '%s' \"\$CA_PEM\" > /tmp/ca.pem; $3" 2>&1
}
CURL="curl -fsS --max-time 20 --cacert /tmp/ca.pem"

# ---- sandman run --network allowlist (from the configuration) ----
out=$(sb coder r1 "$CURL https://allowed.test/" || true)
expect_contains "run: curl reaches an allowed name over HTTPS (CONNECT)" "hello from allowed.test" "$out"
out=$(sb coder r1 "$CURL http://allowed.test/" || true)
expect_contains "run: curl reaches an allowed name over plain HTTP (absolute form)" "hello from allowed.test" "$out"
out=$(sb coder r1 "python3 -c \"import ssl,urllib.request as u; print(u.urlopen('https://allowed.test/', context=ssl.create_default_context(cafile='/tmp/ca.pem'), timeout=20).read().decode())\"" || true)
expect_contains "run: Python's urllib reaches it through the proxy variables" "hello from allowed.test" "$out"
out=$(sb coder r1 'env | grep -i _proxy= | sort | tr "\n" " "')
expect_contains "run: HTTPS_PROXY is set" "HTTPS_PROXY=http://127.0.0.1:3128" "$out"
expect_contains "run: https_proxy is set" "https_proxy=http://127.0.0.1:3128" "$out"
expect_contains "run: NO_PROXY is set" "NO_PROXY=localhost" "$out"
expect_contains "run: no_proxy is set" "no_proxy=localhost" "$out"

# The flag itself (not only the configuration's default) asks for allowlist.
out=$("$SANDMAN" --config "$CFG" run --mode per_tool --network allowlist --agent coder \
  -e "CA_PEM=$CA_PEM" -- sh -c "printf '%s' \"\$CA_PEM\" > /tmp/ca.pem; $CURL https://allowed.test/" 2>&1 || true)
expect_contains "run --network allowlist (the flag): curl reaches an allowed name" "hello from allowed.test" "$out"

refused() { # description script
  local rc=0 o
  o=$(sb coder r1 "$2") || rc=$?
  if [ "$rc" -ne 0 ] && [[ "$o" != *"hello from"* ]]; then it_pass "$1"; else it_fail "$1: exit $rc, [$o]"; fi
}
refused "run: a denied name is refused" "$CURL https://denied.test/"
refused "run: an IP literal that is not listed is refused" "$CURL http://$DENIED_IP/"
refused "run: the metadata address is refused" "$CURL http://169.254.169.254/latest/meta-data/"
refused "run: a listed name resolving to link-local (metadata) is refused" "$CURL http://metadata.test/"
refused "run: CONNECT to an unlisted port is refused" "$CURL https://allowed.test:8443/"
refused "run: a Host header that disagrees with the target is refused" "$CURL -H 'Host: denied.test' http://allowed.test/"
refused "run: raw TCP ignoring the proxy gets nowhere (allowed server's address)" \
  "python3 -c \"import socket; socket.create_connection(('$ALLOWED_IP', 443), timeout=5)\""
refused "run: curl told to ignore the proxy gets nowhere (no outside DNS)" "$CURL --noproxy '*' https://allowed.test/"

# ---- the proxy and nothing else: the engine host's own addresses ----
# (issue 25, finding 3; tests/integration/egress_probe.sh) Listeners of the
# test's own on every address this host holds (the gateways of the engine's
# networks among them), TCP and UDP; an allowlist sandbox tries each, under
# runc and under gVisor (runsc-net): nothing may arrive.
source "$SRC_DIR/tests/integration/egress_probe.sh"
egress_listen_start "$WORK/listen"
egress_probe "run (runc)" --mode per_run --agent coder --run-id r1
egress_probe "run (gVisor, runsc-net)" --mode per_tool --runtime runsc-net --agent coder
out=$("$SANDMAN" --config "$CFG" run --mode per_tool --runtime runsc-net --agent coder -e "CA_PEM=$CA_PEM" \
  -- sh -c "printf '%s' \"\$CA_PEM\" > /tmp/ca.pem; $CURL https://allowed.test/" 2>&1 || true)
expect_contains "run (gVisor, runsc-net): the allowed name through the proxy" "hello from allowed.test" "$out"
egress_listen_stop

# No network of its own: its relay is the one container in its network
# namespace and shares nothing else with it; the proxy is on its outbound
# network only and listens on none. The same sandbox across calls.
id1=$("$SANDMAN" --config "$CFG" run --json --mode per_run --agent coder --run-id r1 -- true | jq -r .sandbox_id)
coder_name=$(docker inspect -f '{{.Name}}' "$id1" | tr -d /)
expect_eq "run: the sandbox has network mode none" "none" "$(docker inspect -f '{{.HostConfig.NetworkMode}}' "$id1")"
relay=$(docker ps -q --filter "label=io.sandman.instance=$INST" --filter "label=io.sandman.egress-sandbox=$id1")
expect_eq "run: it has one relay, named after it" "/$coder_name-egress" "$(docker inspect -f '{{.Name}}' $relay 2>&1)"
expect_eq "run: the relay joins its network namespace" "container:$id1" \
  "$(docker inspect -f '{{.HostConfig.NetworkMode}}' $relay 2>&1)"
shares=$(docker inspect -f '{{.HostConfig.PidMode}} {{.HostConfig.IpcMode}} {{.HostConfig.UTSMode}} {{.HostConfig.VolumesFrom}}' $relay 2>&1)
expect_not_contains "run: ... and no other of its namespaces, nor its volumes" "$id1" "$shares"
expect_eq "run: the relay runs as the proxy's user without capabilities" "65534:65534 [ALL]" \
  "$(docker inspect -f '{{.Config.User}} {{.HostConfig.CapDrop}}' $relay 2>&1)"
expect_eq "run: the relay's one mount is the proxy's socket volume, read-only" "sandman-egress-$INST-socket:false" \
  "$(docker inspect -f '{{range .Mounts}}{{.Name}}:{{.RW}}{{end}}' $relay 2>&1)"
expect_eq "run: the proxy is on its outbound network only" "$WORLD" \
  "$(docker inspect -f '{{range $k, $v := .NetworkSettings.Networks}}{{$k}}{{end}}' "sandman-egress-$INST" 2>&1)"
PROXY_IP=$(docker inspect -f "{{(index .NetworkSettings.Networks \"$WORLD\").IPAddress}}" "sandman-egress-$INST")
out=$(docker exec "$INST-allowed" python3 -c "import socket; socket.create_connection(('$PROXY_IP', 3128), timeout=5)" 2>&1 || true)
expect_contains "run: the proxy listens on no network (its port, from beside it)" "refused" "$out"
orphans() { # relays of the instance whose sandbox is gone
  local n=0 r sb
  for r in $(docker ps -aq --filter "label=io.sandman.instance=$INST" --filter "label=io.sandman.egress=relay"); do
    sb=$(docker inspect -f '{{index .Config.Labels "io.sandman.egress-sandbox"}}' "$r")
    docker inspect "$sb" >/dev/null 2>&1 || n=$((n + 1))
  done
  echo "$n"
}
expect_eq "run: no relay outlives its sandbox (the per_tool ones went with theirs)" "0" "$(orphans)"

# ---- live policy: sandman config reload ----
write_config "\"allowed.test:8443\", \"$ALLOWED_IP:8443\""
reload=$("$SANDMAN" --config "$CFG" config reload 2>&1 || true)
expect_contains "config reload: applied to the running sandbox" "applied to 1 running" "$reload"
# Straight into the container (no sandman call in between re-applies it).
out=$(docker exec -e "CA_PEM=$CA_PEM" "$id1" sh -c "printf '%s' \"\$CA_PEM\" > /tmp/ca2.pem; curl -sS --max-time 20 --cacert /tmp/ca2.pem https://allowed.test:8443/" 2>&1 || true)
expect_contains "config reload: the running sandbox reaches what the new list allows" "hello from allowed.test" "$out"
id2=$("$SANDMAN" --config "$CFG" run --json --mode per_run --agent coder --run-id r1 -- true | jq -r .sandbox_id)
expect_eq "config reload: without recreating the sandbox" "$id1" "$id2"
write_config ""

# A changed network mode is another sandbox (the settings hash has it).
id3=$("$SANDMAN" --config "$CFG" run --json --mode per_run --network none --agent coder --run-id r1 -- true |
  jq -r .sandbox_id)
check "run: --network none replaces the allowlist sandbox of the run" [ -n "$id3" ] && [ "$id3" != "$id1" ]

# gVisor registered with its network off cannot carry it: a clear refusal.
out=$("$SANDMAN" --config "$CFG" run --mode per_tool --runtime runsc --agent coder -- true 2>&1 || true)
expect_contains "run: --runtime runsc is refused with the way out" "use --runtime runsc-net" "$out"

# ---- the runner: two agents, one runner, SIGHUP ----
IT_WORKER_GLOBAL=(--config "$CFG")
rm -f "$SOCK"
"$SANDMAN" --log-level debug --config "$CFG" worker start --sandbox-mode per_run \
  --listen "unix:$SOCK" --token-file "$WORK/token" >>"$WORK/runner.log" 2>&1 &
WORKER_PID=$!
for _ in $(seq 1 100); do [ -S "$SOCK" ] && break; sleep 0.1; done
exec_call() { # body
  curl -sS --unix-socket "$SOCK" -H "Authorization: Bearer $(cat "$WORK/token")" \
    -H 'Content-Type: application/json' -d "$1" http://localhost/v1/execute
}
call() { # agent run script
  local body
  body=$(jq -cn --arg a "$1" --arg r "$2" --arg s "printf '%s' \"\$CA_PEM\" > /tmp/ca.pem; $3" --arg ca "$CA_PEM" \
    '{agent: $a, run_id: $r, argv: ["sh", "-c", $s], env: {CA_PEM: $ca}}')
  exec_call "$body"
}
out=$(call coder rc "$CURL https://allowed.test/ 2>&1" | jq -r .stdout)
expect_contains "runner: coder reaches allowed.test" "hello from allowed.test" "$out"
out=$(call coder rc "$CURL https://denied.test/ 2>&1" | jq -r .stdout)
expect_not_contains "runner: coder does not reach denied.test" "hello from" "$out"
out=$(call other ro "$CURL https://denied.test/ 2>&1" | jq -r .stdout)
expect_contains "runner: other (its own list) reaches denied.test" "hello from denied.test" "$out"
out=$(call other ro "$CURL https://allowed.test/ 2>&1" | jq -r .stdout)
expect_not_contains "runner: other does not reach allowed.test" "hello from" "$out"
ans=$(exec_call '{"agent": "coder", "run_id": "rc", "network": "bridge", "argv": ["true"]}')
expect_contains "runner: a request cannot widen the network" "wider than" "$ans"

coder_sb=$(call coder rc "true" | jq -r .sandbox_id)
write_config "\"allowed.test:8443\", \"$ALLOWED_IP:8443\""
kill -HUP "$WORKER_PID"
for _ in $(seq 1 100); do grep -q "configuration reloaded" "$WORK/runner.log" && break; sleep 0.1; done
expect_contains "runner: SIGHUP reloads the configuration" "egress policy applied to 2 running" "$(cat "$WORK/runner.log")"
out=$(docker exec -e "CA_PEM=$CA_PEM" "$coder_sb" sh -c "printf '%s' \"\$CA_PEM\" > /tmp/ca2.pem; curl -sS --max-time 20 --cacert /tmp/ca2.pem https://allowed.test:8443/" 2>&1 || true)
expect_contains "runner: after SIGHUP the running sandbox reaches the newly allowed port" "hello from allowed.test" "$out"
expect_eq "runner: ... without recreating it" "$coder_sb" "$(call coder rc "true" | jq -r .sandbox_id)"
stop_worker

# ---- the audit trail: each decision with its sandbox and rule ----
trail=$("$SANDMAN" --config "$CFG" audit --json 2>/dev/null)
ev() { # event sandbox dst_host → how many
  jq -c --arg e "$1" --arg s "$2" --arg h "$3" \
    'select(.unmapped.event == $e and .unmapped.sandbox == $s and (.dst_endpoint.hostname // .dst_endpoint.ip) == $h)' <<<"$trail" | wc -l
}
check "audit: every line is JSON" jq -e . <<<"$trail" >/dev/null
check "audit: the allowed CONNECT of coder's sandbox" [ "$(ev egress.allowed "$coder_name" allowed.test)" -ge 1 ]
check "audit: the denied name, in coder's sandbox" [ "$(ev egress.denied "$coder_name" denied.test)" -ge 1 ]
check "audit: the metadata address" [ "$(ev egress.denied "$coder_name" 169.254.169.254)" -ge 1 ]
rule=$(jq -r --arg s "$coder_name" 'select(.unmapped.event == "egress.denied" and .unmapped.sandbox == $s and .dst_endpoint.hostname == "denied.test") | .unmapped.rule' <<<"$trail" | head -1)
check "audit: a denial names its rule ($rule)" [ -n "$rule" ] && [ "$rule" != null ]
other_name=$(docker ps --filter "label=io.sandman.instance=$INST" --filter "label=io.sandman.agent=other" --format '{{.Names}}' | head -1)
check "audit: other's allowed connection is under other's sandbox" [ "$(ev egress.allowed "$other_name" denied.test)" -ge 1 ]
bytes=$(jq -r --arg s "$coder_name" 'select(.unmapped.event == "egress.allowed" and .unmapped.sandbox == $s) | .traffic.bytes_in // 0' <<<"$trail" | sort -n | tail -1)
check "audit: an allowed connection carries its bytes ($bytes)" [ "${bytes:-0}" -gt 0 ]

# ---- a relay whose sandbox went away by hand: the reaper removes it ----
docker rm -f "$coder_sb" >/dev/null
check "reap: the relay of a sandbox removed by hand is left over at first" [ "$(orphans)" -ge 1 ]
"$SANDMAN" --config "$CFG" sandbox reap >/dev/null 2>&1 || true
expect_eq "reap: removes relays whose sandbox is gone" "0" "$(orphans)"

it_done
