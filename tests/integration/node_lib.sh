# Shared by the integration tests that run Node (sourced after lib.sh): the
# TypeScript client's folder, built, with its npm packages from the lockfile
# (scripts/setup.sh installs them). Outside CI a missing Node or package set
# skips (exit 77); in CI it fails.
TS_DIR=$SRC_DIR/clients/typescript

require_node() {
  local why=""
  command -v node >/dev/null || why="node is not installed"
  [ -z "$why" ] && [ ! -d "$TS_DIR/node_modules/@modelcontextprotocol/sdk" ] && why="$TS_DIR/node_modules is missing (scripts/setup.sh installs it)"
  [ -z "$why" ] && [ ! -f "$TS_DIR/dist/index.js" ] && why="the TypeScript client is not built (scripts/setup.sh builds it)"
  [ -z "$why" ] && return 0
  if [ "${CI:-}" = "true" ]; then echo "FAIL: CI=true and $why" >&2; exit 1; fi
  echo "SKIP: $why"
  exit 77
}

# What every Node suite needs: an engine, Node with the built client, the
# sandman binary for the client to start, and this test's instance removed
# at the end.
node_suite_setup() {
  require_engine
  require_node
  trap cleanup_instance EXIT
  export SANDMAN_BIN=$SANDMAN
}

# Runs node's test runner on the named files of clients/typescript/test.
node_tests() {
  local files=()
  for f in "$@"; do files+=("$TS_DIR/test/$f"); done
  (cd "$TS_DIR" && node --test --test-reporter=spec "${files[@]}")
}

# For suites that take snapshots: at the end, every snapshot image of this
# test's instance goes too (then the instance's containers and volumes).
node_remove_snapshot_images_on_exit() {
  trap node_remove_snapshot_images EXIT
}

node_remove_snapshot_images() {
  local ids=()
  mapfile -t ids < <(docker images -q --filter "label=io.sandman.snapshot.instance=$SANDMAN_INSTANCE" | sort -u)
  if [ "${#ids[@]}" -gt 0 ]; then docker rmi -f "${ids[@]}" >/dev/null 2>&1; fi
  cleanup_instance
}
