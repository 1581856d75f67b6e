/* The workspace hook .sandman/worker-env.sh.
 *
 * The runner reads the hook on the host (after resolving symlinks: it must
 * stay inside the workspace; at most 64 KiB) and passes its text to a small
 * bash runner that becomes the tool's own exec: the runner sources the hook
 * in a child shell with its output capped (256 KiB) and a 10 s timeout,
 * keeps only the variables the hook exported or changed (each value at most
 * 32 KiB, all of them at most 128 KiB), drops sandman's and bash's own
 * names, overlays the rest, sets sandman's variables again and execs the
 * tool. One exec, so the hook costs no extra round trip and its file side
 * effects stay in the sandbox. It talks back through marker lines on stderr
 * carrying a per-call nonce, which server_hook_finish removes. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "server/server_internal.h"

/* $0 sandman-hook, $1 nonce, $2 hook text, $3 owned names, then the tool. */
static const char runner_script[] =
    "__sm_nonce=$1 __sm_hook=$2 __sm_owned=$3\n"
    "shift 3\n"
    "__sm_mark=$'\\036'\"sandman-hook-$__sm_nonce\"\n"
    "printf '%s begin\\n' \"$__sm_mark\" >&2\n"
    "__sm_dir=\n"
    "__sm_fail() {\n"
    "  printf '\\n%s fail %s\\n' \"$__sm_mark\" \"$1\" >&2\n"
    "  [ -n \"$__sm_dir\" ] && rm -rf -- \"$__sm_dir\"\n"
    "  exit 1\n"
    "}\n"
    "__sm_bytes() { local LC_ALL=C; __sm_len=${#1}; }\n"
    "__sm_dir=$(mktemp -d \"${TMPDIR:-/tmp}/sandman-hook.XXXXXX\" 2>/dev/null) ||\n"
    "  __sm_fail \"cannot create a temporary directory in ${TMPDIR:-/tmp}\"\n"
    "printf '%s' \"$__sm_hook\" >\"$__sm_dir/hook.sh\" || __sm_fail \"cannot write to $__sm_dir\"\n"
    "unset -v __sm_hook\n"
    "declare -A __sm_saved=()\n"
    "for __sm_n in $__sm_owned; do\n"
    "  [[ -v $__sm_n ]] && __sm_saved[$__sm_n]=${!__sm_n}\n"
    "done\n"
    "__sm_child() {\n"
    "  local __sm_n __sm_v __sm_rc __sm_total=0\n"
    "  local -A __sm_before=()\n"
    "  for __sm_n in $(compgen -e); do __sm_before[$__sm_n]=${!__sm_n}; done\n"
    "  . \"$__sm_dir/hook.sh\"\n"
    "  __sm_rc=$?\n"
    "  set +euo pipefail\n"
    "  if [ \"$__sm_rc\" -ne 0 ]; then\n"
    "    printf 'exited with status %d' \"$__sm_rc\" >\"$__sm_dir/err\"\n"
    "    return 1\n"
    "  fi\n"
    "  : >\"$__sm_dir/env\"\n"
    "  for __sm_n in $(compgen -e); do\n"
    "    case $__sm_n in SANDMAN_* | PWD | OLDPWD | SHLVL | _ | BASH* | SHELLOPTS | PIPESTATUS) continue ;; esac\n"
    "    if [[ -v \"__sm_before[$__sm_n]\" && \"${__sm_before[$__sm_n]}\" == \"${!__sm_n}\" ]]; then continue; fi\n"
    "    __sm_v=${!__sm_n}\n"
    "    __sm_bytes \"$__sm_v\"\n"
    "    if ((__sm_len > 32768)); then\n"
    "      printf 'exports %s with a value larger than 32 KiB' \"$__sm_n\" >\"$__sm_dir/err\"\n"
    "      return 1\n"
    "    fi\n"
    "    __sm_bytes \"$__sm_n=$__sm_v\"\n"
    "    __sm_total=$((__sm_total + __sm_len + 1))\n"
    "    if ((__sm_total > 131072)); then\n"
    "      printf 'exports more than 128 KiB of variables' >\"$__sm_dir/err\"\n"
    "      return 1\n"
    "    fi\n"
    "    printf '%s=%s\\0' \"$__sm_n\" \"$__sm_v\" >>\"$__sm_dir/env\"\n"
    "  done\n"
    "  return 0\n"
    "}\n"
    "set -m\n"
    "{ __sm_child </dev/null 2>&1 | head -c 262145 >\"$__sm_dir/out\"; exit \"${PIPESTATUS[0]}\"; } &\n"
    "__sm_pid=$!\n"
    "{ sleep 10; : >\"$__sm_dir/timeout\"; kill -KILL -- -\"$__sm_pid\"; } 2>/dev/null &\n"
    "__sm_wd=$!\n"
    "{ wait \"$__sm_pid\"; } 2>/dev/null\n"
    "__sm_rc=$?\n"
    "{ kill -KILL -- -\"$__sm_wd\"; wait \"$__sm_wd\"; } 2>/dev/null\n"
    "set +m\n"
    "[ -e \"$__sm_dir/timeout\" ] && __sm_fail \"timed out after 10 s\"\n"
    "__sm_len=$(wc -c <\"$__sm_dir/out\" 2>/dev/null) || __sm_len=0\n"
    "((__sm_len > 262144)) && __sm_fail \"wrote more than 256 KiB of output\"\n"
    "if [ \"$__sm_rc\" -ne 0 ]; then\n"
    "  head -c 4096 \"$__sm_dir/out\" >&2\n"
    "  __sm_v=\"exited with status $__sm_rc\"\n"
    "  [ -s \"$__sm_dir/err\" ] && __sm_v=$(cat \"$__sm_dir/err\")\n"
    "  __sm_fail \"$__sm_v\"\n"
    "fi\n"
    "while IFS= read -r -d '' __sm_kv; do\n"
    "  __sm_n=${__sm_kv%%=*}\n"
    "  case \" $__sm_owned \" in *\" $__sm_n \"*) continue ;; esac\n"
    "  export \"$__sm_kv\" 2>/dev/null\n"
    "done <\"$__sm_dir/env\"\n"
    "for __sm_n in $__sm_owned; do\n"
    "  if [[ -v \"__sm_saved[$__sm_n]\" ]]; then export \"$__sm_n=${__sm_saved[$__sm_n]}\"; else unset -v \"$__sm_n\"; fi\n"
    "done\n"
    "rm -rf -- \"$__sm_dir\"\n"
    "unset -v __sm_nonce __sm_owned __sm_mark __sm_dir __sm_n __sm_v __sm_kv __sm_len __sm_pid __sm_wd __sm_rc __sm_saved\n"
    "unset -f __sm_fail __sm_bytes __sm_child\n"
    "exec -- \"$@\"\n";

const char *server_hook_runner_script(void) { return runner_script; }

int server_hook_load(const char *ws, char **out_content, size_t *out_len, sm_error *err) {
  *out_content = NULL;
  *out_len = 0;
  char path[PATH_MAX];
  if ((size_t)snprintf(path, sizeof path, "%s/%s", ws, SM_HOOK_PATH) >= sizeof path)
    return sm_error_set(err, SM_EINVAL, SM_HOOK_PATH ": workspace path too long");
  struct stat st;
  if (lstat(path, &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return 0;
    return sm_error_set_errno(err, SM_EIO, errno, SM_HOOK_PATH);
  }
  char real[PATH_MAX];
  if (realpath(path, real) == NULL) {
    if (errno == ENOENT) return 0; /* a dangling link: no hook */
    return sm_error_set_errno(err, SM_EIO, errno, SM_HOOK_PATH);
  }
  size_t wl = strlen(ws);
  if (strncmp(real, ws, wl) != 0 || real[wl] != '/')
    return sm_error_set(err, SM_EUNSAFE,
                        SM_HOOK_PATH " resolves outside the workspace: refused");
  cleanup_fd int fd = open(real, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0)
    return sm_error_set_errno(err, SM_EIO, errno, SM_HOOK_PATH);
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
    return sm_error_set(err, SM_EUNSAFE, SM_HOOK_PATH " is not a regular file");
  if (st.st_size > SM_HOOK_SCRIPT_MAX)
    return sm_error_set(err, SM_ETOOBIG, SM_HOOK_PATH " is larger than 64 KiB");
  cleanup_free char *buf = malloc(SM_HOOK_SCRIPT_MAX + 2);
  if (buf == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory");
  size_t len = 0;
  for (;;) {
    ssize_t n = read(fd, buf + len, SM_HOOK_SCRIPT_MAX + 1 - len);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sm_error_set_errno(err, SM_EIO, errno, SM_HOOK_PATH);
    if (n == 0) break;
    len += (size_t)n;
    if (len > SM_HOOK_SCRIPT_MAX)
      return sm_error_set(err, SM_ETOOBIG, SM_HOOK_PATH " is larger than 64 KiB");
  }
  buf[len] = '\0';
  if (memchr(buf, '\0', len) != NULL)
    return sm_error_set(err, SM_EUNSAFE, SM_HOOK_PATH " contains a NUL byte");
  *out_content = steal_pointer(&buf);
  *out_len = len;
  return 0;
}

int server_hook_wrap(const char *const *argv, size_t argc, const char *content, const char *nonce,
                     const char *owned_names, char ***out_argv, size_t *out_argc, sm_error *err) {
  size_t n = argc + 7; /* bash -c SCRIPT $0 $1 $2 $3, then the tool */
  char **v = calloc(n + 1, sizeof *v);
  if (v == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory");
  const char *head[] = {"bash", "-c", runner_script, "sandman-hook", nonce, content,
                        owned_names};
  size_t k = 0;
  for (; k < 7; k++) v[k] = strdup(head[k]);
  /* bash -c SCRIPT $0 $1 $2 $3: the tool's argv follows as "$@". */
  for (size_t i = 0; i < argc; i++) v[k++] = strdup(argv[i]);
  for (size_t i = 0; i < k; i++) {
    if (v[i] == NULL) {
      common_strings_free(v, k);
      return sm_error_set(err, SM_ENOMEM, "out of memory");
    }
  }
  *out_argv = v;
  *out_argc = k;
  return 0;
}

static void marker(const char *nonce, char *buf, size_t size) {
  snprintf(buf, size, "\036sandman-hook-%s", nonce);
}

void server_hook_strip(const char *nonce, char *data, size_t *len) {
  char mark[48], begin[64];
  marker(nonce, mark, sizeof mark);
  snprintf(begin, sizeof begin, "%s begin\n", mark);
  size_t bl = strlen(begin);
  if (data && *len >= bl && memcmp(data, begin, bl) == 0) {
    memmove(data, data + bl, *len - bl + 1);
    *len -= bl;
  }
}

void server_hook_finish(const char *nonce, sm_run_result *r) {
  char begin[64], mark[48];
  marker(nonce, mark, sizeof mark);
  snprintf(begin, sizeof begin, "%s begin\n", mark);
  size_t bl = strlen(begin);
  int started = r->stderr_data && r->stderr_len >= bl && memcmp(r->stderr_data, begin, bl) == 0;
  if (started) server_hook_strip(nonce, r->stderr_data, &r->stderr_len);
  if (!started) {
    /* No start marker: the runner never ran. When the exec itself could
     * not start (bash missing), say so; other failures keep their kind. */
    if ((r->failure_kind == SM_FAIL_NONE || r->failure_kind == SM_FAIL_TOOL) &&
        (r->exit_code == 126 || r->exit_code == 127)) {
      r->ok = 0;
      r->failure_kind = SM_FAIL_TOOL;
      snprintf(r->error, sizeof r->error,
               SM_HOOK_PATH " could not run: bash is not available in the sandbox image "
                            "(the hook needs bash; use an image that has it, such as general)");
    }
    return;
  }
  char fail[64];
  snprintf(fail, sizeof fail, "\n%s fail ", mark);
  size_t fl = strlen(fail);
  char *hit = r->stderr_data ? memmem(r->stderr_data, r->stderr_len, fail, fl) : NULL;
  if (hit == NULL) return;
  const char *reason = hit + fl;
  const char *eol = memchr(reason, '\n', r->stderr_len - (size_t)(reason - r->stderr_data));
  int rl = eol ? (int)(eol - reason) : (int)strnlen(reason, 512);
  if (rl > 512) rl = 512;
  r->ok = 0;
  r->failure_kind = SM_FAIL_TOOL;
  if (r->exit_code == 0) r->exit_code = 1;
  snprintf(r->error, sizeof r->error, SM_HOOK_PATH " failed: %.*s", rl, reason);
  *hit = '\0';
  r->stderr_len = (size_t)(hit - r->stderr_data);
}
