#!/usr/bin/env bash
# `sandman run` against the real engine: every mode, the limits, the
# environment, stdin, output, timeouts, OOM, runtimes, concurrency.
source "$(dirname "$0")/lib.sh"
require_engine
# Unique per process: the same test may run from several build trees at once.
export SANDMAN_INSTANCE="${SANDMAN_INSTANCE}-$$"
tmpd=$(mktemp -d)
trap 'cleanup_instance; rm -rf "$tmpd"' EXIT
cleanup_instance

# Field of the JSON object on stdin: jf FIELD
jf() { python3 -c 'import json,sys
d=json.load(sys.stdin); v=d[sys.argv[1]]
print(json.dumps(v) if isinstance(v,(bool,list)) or v is None else v, end="")' "$1"; }
run() { timeout 300 "$SANDMAN" run "$@"; }
sandbox_name() { # sandbox_name MODE KEY
  printf 'sandman-%s-%s-%s' "$SANDMAN_INSTANCE" "$1" "$(printf '%s' "$2" | sha256sum | cut -c1-32)"
}
count_objects() { # count_objects LABEL=VALUE: containers + volumes of this instance
  local c v
  c=$(docker ps -aq --filter "label=io.sandman.instance=$SANDMAN_INSTANCE" --filter "label=$1" | wc -l)
  v=$(docker volume ls -q --filter "label=io.sandman.instance=$SANDMAN_INSTANCE" --filter "label=$1" | wc -l)
  echo $((c + v))
}

# ---- every mode runs a tool and returns its output and exit code ----
for args in "--mode none" "--mode per_tool" "--mode per_run --run-id modes" \
            "--mode per_worker --worker-id w-modes"; do
  set +e
  out=$(run $args -- sh -c 'echo hi; exit 3')
  rc=$?
  set -e
  expect_eq "$args: stdout" "hi" "$out"
  expect_eq "$args: exit code" 3 "$rc"
  j=$(run --json $args -- sh -c 'echo hi; exit 3' || true)
  expect_eq "$args: json mode" "$(awk '{print $2}' <<<"$args")" "$(jf mode <<<"$j")"
  expect_eq "$args: json exit_code" 3 "$(jf exit_code <<<"$j")"
  expect_eq "$args: failure_kind tool" tool "$(jf failure_kind <<<"$j")"
done

# ---- per_run: reused by the second call of the same run ----
j1=$(run --json --mode per_run --run-id reuse -- true)
j2=$(run --json --mode per_run --run-id reuse -- true)
expect_eq "per_run first call made the sandbox" false "$(jf reused <<<"$j1")"
expect_eq "per_run second call reused it" true "$(jf reused <<<"$j2")"
expect_eq "per_run same sandbox_id" "$(jf sandbox_id <<<"$j1")" "$(jf sandbox_id <<<"$j2")"
j3=$(run --json --mode per_run --run-id reuse-other -- true)
check "another run id gets another sandbox" test "$(jf sandbox_id <<<"$j3")" != "$(jf sandbox_id <<<"$j1")"
name=$(sandbox_name per_run "run:default:reuse")
labels=$(docker inspect -f '{{json .Config.Labels}}' "$name")
for l in managed instance mode project run worker agent scope-key config-hash created volume; do
  expect_contains "per_run label io.sandman.$l" "\"io.sandman.$l\"" "$labels"
done
expect_contains "per_run scope key" '"io.sandman.scope-key":"run:default:reuse"' "$labels"
vlabels=$(docker volume inspect -f '{{json .Labels}}' "$name-ws")
expect_contains "volume carries the labels" "\"io.sandman.instance\":\"$SANDMAN_INSTANCE\"" "$vlabels"

# ---- per_tool leaves nothing behind ----
j=$(run --json --mode per_tool -- true)
id=$(jf sandbox_id <<<"$j")
check "per_tool reported a sandbox id" test -n "$id"
expect_eq "per_tool container and volume gone" 0 "$(count_objects io.sandman.mode=per_tool)"
check "per_tool container gone by id" bash -c "! docker inspect $id >/dev/null 2>&1"

# ---- per_worker is pinned to its project ----
run --json --mode per_worker --worker-id pinned --project alpha -- true >/dev/null
set +e
j=$(run --json --mode per_worker --worker-id pinned --project beta -- true)
rc=$?
set -e
expect_eq "per_worker other project refused: failure_kind" policy "$(jf failure_kind <<<"$j")"
expect_eq "per_worker other project refused: exit" 125 "$rc"

# ---- limits ----
set +e
# The bomb runs in a subshell; the tool's own shell then uses builtins only
# (a shell that cannot fork gives up), and reports that it is still alive.
j=$(run --json --mode per_tool --pids 64 --timeout 60 -- \
  sh -c '(b() { b | b & }; b); i=0; while [ $i -lt 200000 ]; do i=$((i + 1)); done; echo survived')
set -e
expect_eq "fork bomb contained: the call returned" survived "$(jf stdout <<<"$j" | tail -n1)"
expect_contains "fork bomb hit the pids limit" "can't fork" "$(jf stderr <<<"$j")"
check "engine responsive after the fork bomb" docker version --format "{{.Server.Version}}"
out=$(run --mode per_tool -- echo still-fine)
expect_eq "sandman works after the fork bomb" still-fine "$out"

for m in "--mode per_tool" "--mode per_run --run-id oom"; do
  set +e
  j=$(run --json $m --mem 64m -- sh -c 'x=0123456789abcdef; while :; do x="$x$x"; done')
  rc=$?
  set -e
  expect_eq "memory bomb ($m): oom_killed" true "$(jf oom_killed <<<"$j")"
  expect_eq "memory bomb ($m): exit 137" 137 "$(jf exit_code <<<"$j")"
  expect_eq "memory bomb ($m): status 137" 137 "$rc"
done
set +e
j=$(run --json --mode per_run --run-id oom --mem 64m -- sh -c 'kill -9 $$')
set -e
expect_eq "SIGKILL without OOM is not oom_killed" false "$(jf oom_killed <<<"$j")"
expect_eq "SIGKILL exit 137" 137 "$(jf exit_code <<<"$j")"

start=$(date +%s)
j=$(run --json --mode per_tool -- sh -c 'head -c 52428800 /dev/zero | tr "\0" x; echo end >&2')
end=$(date +%s)
expect_eq "50 MB stdout capped at 1 MiB" 1048576 "$(jf stdout <<<"$j" | wc -c)"
expect_eq "50 MB stdout flagged truncated" true "$(jf stdout_truncated <<<"$j")"
expect_eq "stderr kept beside it" end "$(jf stderr <<<"$j")"
expect_eq "the tool finished undisturbed" 0 "$(jf exit_code <<<"$j")"
echo "# 50 MB through the cap in $((end - start)) s"

set +e
j=$(run --json --mode per_run --run-id slow --timeout 2 -- sh -c 'sleep 600 & sleep 600')
rc=$?
set -e
expect_eq "timeout: exit 124" 124 "$rc"
expect_eq "timeout: timed_out" true "$(jf timed_out <<<"$j")"
expect_eq "timeout: failure_kind" timeout "$(jf failure_kind <<<"$j")"
ps_out=$(docker exec "$(sandbox_name per_run run:default:slow)" ps)
expect_not_contains "timeout: no process left in the sandbox" "sleep 600" "$ps_out"
j=$(run --json --mode per_run --run-id slow -- echo after)
expect_eq "the sandbox still serves calls after a timeout" after "$(jf stdout <<<"$j" | tr -d '\n')"

set +e
j=$(run --json --mode per_tool --disk 10m -- sh -c 'head -c 20971520 /dev/zero > /workspace/big; r=$?; wc -c < /workspace/big; exit $r')
rc=$?
set -e
check "--disk 10m stops a 20 MB write" test "$rc" -ne 0
check "--disk 10m: at most 10 MiB written" test "$(jf stdout <<<"$j" | tr -d ' \n')" -le 10485760

out=$(run --mode per_tool -- ls /sys/class/net)
expect_eq "network none: only loopback" lo "$(echo $out)"
set +e
out=$(run --mode per_tool -- sh -c 'touch /etc/x 2>&1; echo rc=$?; touch /tmp/x && echo tmp-ok; touch /workspace/x && echo ws-ok')
set -e
expect_contains "read-only root file system" "Read-only file system" "$out"
expect_contains "/tmp is writable" tmp-ok "$out"
expect_contains "/workspace is writable" ws-ok "$out"
expect_eq "the tool is not root" 1000 "$(run --mode per_tool -- id -u)"
out=$(run --mode per_tool -- sh -c 'grep -E "^(CapEff|NoNewPrivs)" /proc/self/status')
expect_contains "no capabilities" "CapEff:	0000000000000000" "$out"
expect_contains "no new privileges" "NoNewPrivs:	1" "$out"

# ---- environment ----
export SECRET_X=hunter2
for m in "--mode none" "--mode per_tool"; do
  expect_eq "SECRET_X hidden ($m)" "[]" "$(run $m -- sh -c 'echo "[$SECRET_X]"')"
  expect_eq "SECRET_X with -e ($m)" "[hunter2]" "$(run $m -e SECRET_X -- sh -c 'echo "[$SECRET_X]"')"
  expect_eq "SECRET_X with -e K=V ($m)" "[v]" "$(run $m -e SECRET_X=v -- sh -c 'echo "[$SECRET_X]"')"
  expect_eq "SECRET_X by passthrough ($m)" "[hunter2]" \
    "$(run $m --env-passthrough 'SECRET_*' -- sh -c 'echo "[$SECRET_X]"')"
  expect_eq "SANDMAN_* never passed through ($m)" "[]" \
    "$(run $m --env-passthrough '*' -- sh -c 'echo "[$SANDMAN_STATE_DIR]"')"
done
unset SECRET_X
out=$(run --mode per_tool -- sh -c 'echo $HOME $TMPDIR $XDG_CONFIG_HOME $XDG_CACHE_HOME; pwd')
expect_eq "HOME, TMPDIR, XDG, working directory" \
  "/workspace /tmp /workspace/.config /tmp/.cache /workspace" "$(echo $out)"

# ---- stdin, stdout/stderr apart ----
for m in "--mode none" "--mode per_tool" "--mode per_run --run-id stdin"; do
  expect_eq "stdin passed through ($m)" data "$(echo data | run -i $m -- cat)"
  j=$(run --json $m -- sh -c 'echo out; echo err >&2')
  expect_eq "json stdout apart ($m)" out "$(jf stdout <<<"$j")"
  expect_eq "json stderr apart ($m)" err "$(jf stderr <<<"$j")"
done
expect_eq "no stdin without -i" "" "$(echo data | run --mode per_tool -- cat)"

# ---- command not found / not executable ----
for m in "--mode none" "--mode per_tool"; do
  set +e
  run $m -- no-such-command-here 2>"$tmpd/nf.err"
  expect_eq "not found: 127 ($m)" 127 "$?"
  run $m -- /etc/passwd 2>"$tmpd/nx.err"
  expect_eq "not executable: 126 ($m)" 126 "$?"
  set -e
  # The message names the command, not a line of sandman's wrapper script.
  expect_contains "not found: the message names the command ($m)" "no-such-command-here" "$(cat "$tmpd/nf.err")"
  expect_not_contains "not found: no wrapper line number ($m)" "line " "$(cat "$tmpd/nf.err")"
  expect_contains "not executable: the message names the file ($m)" "/etc/passwd" "$(cat "$tmpd/nx.err")"
  expect_not_contains "not executable: no wrapper line number ($m)" "line " "$(cat "$tmpd/nx.err")"
done
set +e
run --mode per_tool -- /etc 2>"$tmpd/dir.err"
expect_eq "a folder as the command: 126" 126 "$?"
set -e
expect_contains "a folder as the command: says so" "/etc: Is a directory" "$(cat "$tmpd/dir.err")"

# ---- runtimes ----
if docker info --format '{{json .Runtimes}}' | grep -q '"runsc"'; then
  out=$(run --mode per_tool --runtime runsc -- sh -c 'dmesg 2>/dev/null | head -n 3; cat /proc/version')
  expect_contains "runsc: the tool sees gVisor's kernel" gVisor "$out"
elif [ "${CI:-}" = "true" ]; then
  it_fail "runsc is not registered with the engine (scripts/setup.sh registers it)"
else
  echo "# runsc not registered: gVisor check skipped"
fi
set +e
err=$(run --mode per_tool --project-environment production --runtime no-such-runtime -- true 2>&1)
rc=$?
set -e
expect_eq "unknown runtime in production: exit 125" 125 "$rc"
expect_contains "unknown runtime: the error names it" "runtime 'no-such-runtime' is not registered" "$err"
expect_contains "unknown runtime: says how to register it" "daemon.json" "$err"
set +e
j=$(run --json --mode per_tool --project-environment development --runtime no-such-runtime -- echo ran 2>/dev/null)
rc=$?
set -e
expect_eq "unknown runtime in development: refused too (exit 125), never the host" 125 "$rc"
expect_not_contains "unknown runtime in development: nothing ran" 'ran' "$(jf stdout <<<"$j")"

# ---- SIGTERM cancels the call: tool killed, per_tool sandbox removed ----
"$SANDMAN" run --mode per_tool -- sleep 120 &
pid=$!
for _ in $(seq 1 100); do
  [ "$(docker ps -q --filter "label=io.sandman.instance=$SANDMAN_INSTANCE" --filter label=io.sandman.mode=per_tool | wc -l)" -gt 0 ] && break
  sleep 0.1
done
sleep 0.5
kill -TERM "$pid"
set +e
wait "$pid"
rc=$?
set -e
expect_eq "SIGTERM: exit 143" 143 "$rc"
expect_eq "SIGTERM: per_tool sandbox removed" 0 "$(count_objects io.sandman.mode=per_tool)"

# ---- twenty per_run calls for one run at once, from separate processes ----
tmp=$(mktemp -d)
for i in $(seq 1 20); do
  run --json --mode per_run --run-id crowd -- sh -c "echo call-$i" >"$tmp/$i.json" 2>"$tmp/$i.err" &
done
wait
good=0
for i in $(seq 1 20); do
  [ "$(jf stdout <"$tmp/$i.json" 2>/dev/null)" = "call-$i" ] && good=$((good + 1))
done
expect_eq "twenty concurrent calls: twenty correct results" 20 "$good"
ids=$(for i in $(seq 1 20); do jf sandbox_id <"$tmp/$i.json"; echo; done | sort -u | wc -l)
expect_eq "twenty concurrent calls: one sandbox id" 1 "$ids"
expect_eq "twenty concurrent calls: one container" 1 \
  "$(docker ps -aq --filter "label=io.sandman.instance=$SANDMAN_INSTANCE" --filter label=io.sandman.scope-key=run:default:crowd | wc -l)"
rm -rf "$tmp"

# ---- .env files stay on the host unless asked for ----
# They hold secrets the tool has no need of, and a .env the tool writes
# would be loaded by the host's tools: left out both ways by default.
envws=$tmpd/envws
mkdir -p "$envws/sub"
echo 'API_KEY=host-secret' >"$envws/.env"
echo 'API_KEY=local-secret' >"$envws/.env.local"
echo 'NESTED=1' >"$envws/sub/.env"
echo 'code' >"$envws/app.txt"
out=$(run --mode per_tool --workspace "$envws" -- sh -c \
  'ls -A . sub | tr "\n" " "; cat .env 2>/dev/null; echo "NODE_OPTIONS=--require=/tmp/evil" > .env; echo new > made.txt')
expect_contains "the workspace is copied in" "app.txt" "$out"
expect_not_contains "a .env is not copied into the sandbox" "host-secret" "$out"
expect_not_contains ".env.local is not copied either" ".env.local" "$out"
expect_eq ".env in a subfolder is not copied either" "0" "$(grep -c 'sub:.*\.env' <<<"$out")"
expect_eq "a .env the tool wrote does not come back" "API_KEY=host-secret" "$(cat "$envws/.env")"
expect_eq "other files come back" "new" "$(cat "$envws/made.txt")"
out=$(run --mode per_tool --workspace "$envws" --copy-env-files -- sh -c 'cat .env .env.local sub/.env')
expect_eq "--copy-env-files copies them" "API_KEY=host-secret API_KEY=local-secret NESTED=1" "$(echo $out)"
printf 'defaults:\n  workspace:\n    copy_env_files: true\n' >"$tmpd/envcfg.yaml"
out=$("$SANDMAN" --config "$tmpd/envcfg.yaml" run --mode per_tool --workspace "$envws" -- cat .env)
expect_eq "workspace.copy_env_files: true copies them" "API_KEY=host-secret" "$out"

# ---- usage errors, configuration, policy ----
set +e
run --mode sometimes -- true 2>/dev/null; expect_eq "bad --mode: exit 2" 2 "$?"
run 2>/dev/null; expect_eq "no command: exit 2" 2 "$?"
run --mem lots -- true 2>/dev/null; expect_eq "bad --mem: exit 2" 2 "$?"
run --network host -- true 2>/dev/null; expect_eq "--network host refused: exit 2" 2 "$?"
cfg=$(mktemp)
printf 'defaults:\n  mode: [oops\n' >"$cfg"
"$SANDMAN" --config "$cfg" run -- echo ran >/dev/null 2>&1; expect_eq "bad config file: exit 2" 2 "$?"
printf 'defaults:\n  tools:\n    deny: [browser]\n' >"$cfg"
j=$("$SANDMAN" --config "$cfg" run --json --tool browser -- echo ran)
rc=$?
expect_eq "refused tool: exit 125" 125 "$rc"
expect_eq "refused tool: failure_kind policy" policy "$(jf failure_kind <<<"$j")"
expect_eq "refused tool: nothing ran" "" "$(jf stdout <<<"$j")"
# Without --tool a plain command is checked as the tool exec, and said so.
printf 'defaults:\n  mode: none\n  tools:\n    deny: [exec]\n' >"$cfg"
err=$("$SANDMAN" --config "$cfg" run -- echo ran 2>&1 >/dev/null)
expect_contains "a refused plain command names the tool exec" "tool 'exec' refused" "$err"
expect_not_contains "a refused plain command: no '(none)'" "(none)" "$err"
rm -f "$cfg"
set -e
out=$("$SANDMAN" run --help)
for f in --mode --project --project-environment --agent --tool --user --run-id --worker-id --image \
         --network --cpu --mem --pids --disk --runtime --workspace --sync --timeout --env \
         --env-passthrough --stdin --json --exclude --copy-env-files; do
  expect_contains "--help lists $f" "$f" "$out"
done

it_done
