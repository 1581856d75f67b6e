/* Built-in settings (the one place they live), the settings hash, and the
 * names of modes, sync modes and failure kinds. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include <sandman/mode.h>
#include <sandman/sandbox.h>
#include <sandman/run.h>
#include <sandman/workspace.h>

#include "sandbox/sandbox_settings.h"

/* ---- built-in values ---- */
#define SM_DEFAULT_IMAGE "sandman/minimal:latest"
#define SM_DEFAULT_NETWORK "none"
#define SM_MIB ((int64_t)1024 * 1024)

void sm_sandbox_settings_defaults(sm_sandbox_settings *out) {
  memset(out, 0, sizeof *out);
  out->mode = SM_MODE_NONE;
  snprintf(out->image, sizeof out->image, "%s", SM_DEFAULT_IMAGE);
  snprintf(out->network, sizeof out->network, "%s", SM_DEFAULT_NETWORK);
  out->runtime[0] = '\0';
  out->user[0] = '\0';
  out->cpu = 1.0;
  out->memory = 512 * SM_MIB;
  out->pids = 256;
  out->disk = 1024 * SM_MIB;
  out->tmpfs = 64 * SM_MIB;
  out->nofile = 1024;
  out->read_only_root = 1;
  out->no_new_privileges = 1;
  out->drop_all_caps = 1;
  out->init = 1;
  out->timeout_s = 120.0;
  out->stdout_cap = SM_MIB;
  out->stderr_cap = SM_MIB;
  out->idle_timeout_s = 0;
  sm_workspace_protect_defaults(&out->protect);
}

void sm_run_request_init(sm_run_request *req) {
  memset(req, 0, sizeof *req);
  req->sync = SM_SYNC_DEFAULT;
  sm_sandbox_settings_defaults(&req->settings);
}

/* Only what shapes the container goes in: per-call settings (timeout,
 * output caps, passthrough, excludes, idle timeout) never force a new
 * sandbox. The text form is versioned so a future field cannot collide,
 * and the version changes when sandman's own container spec does (v2:
 * /workspace nosuid,nodev and gVisor's pids; v3: the container's own
 * processes run as root, calls as the sandbox's user), so that a keyed
 * sandbox made by an older sandman is replaced, never kept with a weaker
 * spec. */
void sm_sandbox_settings_hash(const sm_sandbox_settings *s, char out[65]) {
  char text[2048];
  int n = snprintf(text, sizeof text,
                   "v3\nimage=%s\nnetwork=%s\nruntime=%s\nuser=%s\ncpu=%.6f\nmemory=%lld\n"
                   "pids=%lld\ndisk=%lld\ntmpfs=%lld\nnofile=%lld\nread_only_root=%d\n"
                   "no_new_privileges=%d\ndrop_all_caps=%d\ninit=%d\n",
                   s->image, s->network, s->runtime, s->user, s->cpu, (long long)s->memory,
                   (long long)s->pids, (long long)s->disk, (long long)s->tmpfs,
                   (long long)s->nofile, s->read_only_root ? 1 : 0,
                   s->no_new_privileges ? 1 : 0, s->drop_all_caps ? 1 : 0, s->init ? 1 : 0);
  if (n < 0) n = 0;
  if ((size_t)n >= sizeof text) n = (int)sizeof text - 1;
  /* Which egress lists govern an allowlist sandbox (never their patterns:
   * a changed list is applied to the running sandbox, not a new one). The
   * line is absent otherwise, so other sandboxes keep their hashes. */
  if (s->egress_owner[0] && strcmp(s->network, "allowlist") == 0) {
    int m = snprintf(text + n, sizeof text - (size_t)n, "egress_owner=%s\n", s->egress_owner);
    if (m > 0 && (size_t)m < sizeof text - (size_t)n) n += m;
  }
  /* Allowlist sandboxes have no network and a relay (docs/network.md): one
   * made on an internal network by an older sandman is never reused. */
  if (strcmp(s->network, "allowlist") == 0) {
    int m = snprintf(text + n, sizeof text - (size_t)n, "egress=relay\n");
    if (m > 0 && (size_t)m < sizeof text - (size_t)n) n += m;
  }
  sandbox_sha256_hex(text, (size_t)n, out);
}

/* ---- names ---- */
static const char *const mode_names[] = {"none", "per_tool", "per_run", "per_worker"};

const char *sm_mode_name(sm_mode mode) {
  if ((int)mode < 0 || (int)mode > SM_MODE_PER_WORKER) return "none";
  return mode_names[mode];
}

int sm_mode_parse(const char *s, sm_mode *out, sm_error *err) {
  for (int i = 0; i <= SM_MODE_PER_WORKER; i++) {
    if (s && strcmp(s, mode_names[i]) == 0) {
      *out = (sm_mode)i;
      return 0;
    }
  }
  return sm_error_set(err, SM_EINVAL,
                      "unknown mode '%s' (use none, per_tool, per_run or per_worker)",
                      s ? s : "");
}

int sm_sync_mode_parse(const char *s, sm_sync_mode *out, sm_error *err) {
  if (s && strcmp(s, "none") == 0) *out = SM_SYNC_NONE;
  else if (s && strcmp(s, "in") == 0) *out = SM_SYNC_IN;
  else if (s && strcmp(s, "inout") == 0) *out = SM_SYNC_INOUT;
  else
    return sm_error_set(err, SM_EINVAL, "unknown sync mode '%s' (use none, in or inout)",
                        s ? s : "");
  return 0;
}

int sm_string_list_add(sm_string_list *list, const char *s, sm_error *err) {
  if (s == NULL) return sm_error_set(err, SM_EINVAL, "empty list entry");
  if (list->n >= SM_LIST_MAX)
    return sm_error_set(err, SM_EINVAL, "too many entries (at most %d)", SM_LIST_MAX);
  size_t len = strlen(s);
  if (len >= SM_NAME_MAX)
    return sm_error_set(err, SM_EINVAL, "entry too long (at most %d bytes): '%.40s...'",
                        SM_NAME_MAX - 1, s);
  memcpy(list->items[list->n], s, len + 1);
  list->n++;
  return 0;
}

/* ---- small shared helpers ---- */
void sandbox_sha256_hex(const void *data, size_t len, char out[65]) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int mdlen = 0;
  static const char hex[] = "0123456789abcdef";
  if (EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen != 32) {
    memset(out, '0', 64);
    out[64] = '\0';
    return;
  }
  for (unsigned int i = 0; i < 32; i++) {
    out[2 * i] = hex[md[i] >> 4];
    out[2 * i + 1] = hex[md[i] & 15];
  }
  out[64] = '\0';
}
