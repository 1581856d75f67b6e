# Sourced by the egress tests (issue 25, finding 3): does an allowlist
# sandbox reach anything of the engine host's own?
#
#   egress_listen_start DIR     listeners of the test's own (egress_listen.py)
#                               on every address this host holds but loopback
#                               and IPv6 link-local (the gateways of the
#                               engine's networks among them), TCP and UDP on
#                               one port; checks that each one receives
#   egress_probe WHAT ARGS...   `"$SANDMAN" --config "$CFG" run ARGS... --
#                               python3 -c PROBE`: the sandbox sends to every
#                               address (and to its own default gateway, if
#                               it has one) over UDP, then connects over TCP;
#                               checks that nothing arrived anywhere and that
#                               the sandbox has no device but loopback
#   egress_listen_stop
#
# Markers the test sends itself after each probe show that the listeners
# still receive and that whatever the sandbox sent came before them (each
# socket is served in arrival order), so "nothing arrived" is read without
# a timed wait. Needs lib.sh's checks, python3 and iproute2 on the host,
# python3 in the sandbox's image.

egress_host_addrs() {
  ip -o addr show | awk '{print $4}' | cut -d/ -f1 | grep -v -e '^127\.' -e '^::1$' -e '^fe80:' | sort -u |
    tr '\n' ' '
}

EGRESS_LISTEN=
EGRESS_LISTEN_PID=
EGRESS_ADDRS=
EGRESS_PORT=0

egress_listen_start() {
  EGRESS_LISTEN=$1
  mkdir -p "$EGRESS_LISTEN"
  EGRESS_ADDRS=$(egress_host_addrs)
  python3 "$SRC_DIR/tests/integration/egress_listen.py" "$EGRESS_LISTEN" $EGRESS_ADDRS 2>"$EGRESS_LISTEN/err" &
  EGRESS_LISTEN_PID=$!
  local _
  for _ in $(seq 1 300); do [ -s "$EGRESS_LISTEN/port" ] && break; sleep 0.1; done
  EGRESS_PORT=$(cat "$EGRESS_LISTEN/port" 2>/dev/null || echo 0)
  egress_send_markers selfcheck || true
  check "host: a listener on each of the host's $(wc -w <<<"$EGRESS_ADDRS") addresses, TCP and UDP (port $EGRESS_PORT)" \
    egress_wait_markers selfcheck
}

egress_listen_stop() {
  [ -n "$EGRESS_LISTEN_PID" ] || return 0
  kill "$EGRESS_LISTEN_PID" 2>/dev/null || true
  wait "$EGRESS_LISTEN_PID" 2>/dev/null || true
  EGRESS_LISTEN_PID=
}

egress_send_markers() { # word
  python3 - "$EGRESS_PORT" "$1" $EGRESS_ADDRS <<'PY'
import socket, sys
port, word = int(sys.argv[1]), sys.argv[2].encode()
for a in sys.argv[3:]:
    fam = socket.AF_INET6 if ":" in a else socket.AF_INET
    c = socket.socket(fam)
    c.settimeout(10)
    c.connect((a, port))
    c.sendall(word)
    c.close()
    socket.socket(fam, socket.SOCK_DGRAM).sendto(word, (a, port))
PY
}

egress_arrived() { grep -c " $1\$" "$EGRESS_LISTEN/log" || true; }

egress_wait_markers() { # word: every listener has its TCP and UDP marker (bounded)
  local want=$((2 * $(wc -w <<<"$EGRESS_ADDRS"))) _
  for _ in $(seq 1 600); do [ "$(egress_arrived "$1")" -ge "$want" ] && return 0; sleep 0.1; done
  return 1
}

EGRESS_PROBE='
import socket, struct, sys
port, targets = int(sys.argv[1]), sys.argv[2:]
try:
    for line in open("/proc/net/route").read().splitlines()[1:]:
        f = line.split()
        if f[1] == "00000000" and f[2] != "00000000":
            targets.append(socket.inet_ntoa(struct.pack("<I", int(f[2], 16))))
            print("gateway", targets[-1])
except OSError:
    pass
for a in targets:
    fam = socket.AF_INET6 if ":" in a else socket.AF_INET
    try:
        socket.socket(fam, socket.SOCK_DGRAM).sendto(b"attack", (a, port))
        print("udp-sent", a)
    except OSError as e:
        print("udp-failed", a, e)
    try:
        c = socket.socket(fam)
        c.settimeout(5)
        c.connect((a, port))
        c.sendall(b"attack")
        c.close()
        print("tcp-reached", a)
    except OSError as e:
        print("tcp-failed", a, e)
print("probe-done")
'

egress_probe() { # description, then the arguments of sandman run before "--"
  local what=$1 out
  shift
  out=$("$SANDMAN" --config "$CFG" run "$@" -- python3 -c "$EGRESS_PROBE" "$EGRESS_PORT" $EGRESS_ADDRS 2>&1 || true)
  expect_contains "$what: the probe ran" "probe-done" "$out"
  expect_not_contains "$what: no TCP connection to any host address" "tcp-reached" "$out"
  egress_send_markers "after-$what" || true
  check "$what: the listeners took the markers sent after it" egress_wait_markers "after-$what"
  expect_eq "$what: nothing arrived at any host address, TCP or UDP" "0" "$(egress_arrived attack)"
  out=$("$SANDMAN" --config "$CFG" run "$@" -- sh -c 'tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " " | sort | tr "\n" " "' 2>&1 || true)
  expect_eq "$what: no network interface but loopback" "lo " "$out"
}
