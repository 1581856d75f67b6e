/* Commands run in the sandbox as the workspace's owner (workspace_box.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include <sandman/engine.h>
#include <sandman/util.h>

#include "common/buf.h"
#include "common/cleanup.h"
#include "workspace/workspace_box.h"
#include "workspace/digest.h"

#define RM_BATCH_PATHS 256
#define RM_BATCH_BYTES (96 * 1024)

typedef struct exec_out {
  common_buf err;
  common_buf *out; /* stdout kept here when given */
  int overflow;
  int out_optional; /* past out's cap, stdout is dropped (out->len = 0): no error */
  int out_dropped;
} exec_out;

static int exec_collect(void *ud, int stream, const char *data, size_t len) {
  exec_out *o = ud;
  if (stream == 1 && o->out) {
    if (o->out_dropped) return 0;
    if (common_buf_append(o->out, data, len) != 0) {
      if (o->out_optional) {
        o->out_dropped = 1;
        common_buf_reset(o->out);
        return 0;
      }
      o->overflow = 1;
      return SM_ETOOBIG;
    }
    return 0;
  }
  common_buf_append_capped(&o->err, data, len);
  return 0;
}

/* The end of a command, either way it ran: too much output, or a non-zero
 * exit code, is an error. */
static int exec_end(exec_out *o, int rc, int code, const char *argv0, int *code_out,
                    sm_error *err) {
  if (o->overflow)
    rc = sm_error_set(err, SM_ETOOBIG, "'%s' in the sandbox printed too much", argv0);
  if (rc == 0 && code_out) *code_out = code;
  if (rc == 0 && code != 0)
    rc = sm_error_set(err, SM_ESANDBOX, "'%s' in the sandbox exited with %d: %s", argv0, code,
                      o->err.data ? o->err.data : "");
  common_buf_dispose(&o->err);
  return rc;
}

static int box_exec(sm_engine *engine, const sm_workspace_target *t, const char *const *argv,
                    size_t argc, sm_read_fn in, void *in_ud, common_buf *out, int out_optional,
                    int *code_out, sm_error *err);

int workspace_box_exec(sm_engine *engine, const sm_workspace_target *t, const char *const *argv,
                       size_t argc, sm_read_fn in, void *in_ud, common_buf *out, int *code_out,
                       sm_error *err) {
  return box_exec(engine, t, argv, argc, in, in_ud, out, 0, code_out, err);
}

static int box_exec(sm_engine *engine, const sm_workspace_target *t, const char *const *argv,
                    size_t argc, sm_read_fn in, void *in_ud, common_buf *out, int out_optional,
                    int *code_out, sm_error *err) {
  if (code_out) *code_out = 0;
  exec_out o;
  common_buf_init(&o.err, 4096);
  o.out = out;
  o.overflow = 0;
  o.out_optional = out_optional;
  o.out_dropped = 0;
  int code = 0;
  if (t->run && engine == t->engine) {
    /* The sandbox layer's own way in (its agent): no engine round trips. */
    int rc = t->run(t->run_ud, argv, argc, in, in_ud, exec_collect, &o, &code, err);
    if (rc == 1) {
      common_buf_dispose(&o.err);
      sm_workspace_target plain = *t;
      plain.run = NULL;
      if (out) common_buf_reset(out);
      return box_exec(engine, &plain, argv, argc, in, in_ud, out, out_optional, code_out, err);
    }
    return exec_end(&o, rc, code, argv[0], code_out, err);
  }
  cleanup_json json_object *cfg = json_object_new_object();
  json_object *cmd = json_object_new_array();
  for (size_t i = 0; i < argc; i++) json_object_array_add(cmd, json_object_new_string(argv[i]));
  json_object_object_add(cfg, "Cmd", cmd);
  if (t->uid > 0) {
    char user[64];
    snprintf(user, sizeof user, "%d:%d", t->uid, t->gid > 0 ? t->gid : t->uid);
    json_object_object_add(cfg, "User", json_object_new_string(user));
  }
  json_object_object_add(cfg, "AttachStdin", json_object_new_boolean(in != NULL));
  json_object_object_add(cfg, "AttachStdout", json_object_new_boolean(1));
  json_object_object_add(cfg, "AttachStderr", json_object_new_boolean(1));
  json_object_object_add(cfg, "Tty", json_object_new_boolean(0));
  json_object_object_add(cfg, "WorkingDir", json_object_new_string("/"));
  char exec_id[SM_ENGINE_ID_MAX];
  int rc = sm_engine_exec_create(engine, t->container_id, cfg, exec_id, err);
  if (rc) {
    common_buf_dispose(&o.err);
    return rc;
  }
  sm_exec_io io = SM_EXEC_IO_INIT;
  io.output = exec_collect;
  io.output_ud = &o;
  io.stdin_read = in;
  io.stdin_ud = in_ud;
  /* With stdin the command first waits for the upload it follows. */
  io.timeout_s = in ? 3600 : 300;
  rc = sm_engine_exec_start(engine, exec_id, &io, err);
  if (rc == 0 && !o.overflow) rc = sm_engine_exec_inspect(engine, exec_id, NULL, &code, NULL, err);
  return exec_end(&o, rc, code, argv[0], code_out, err);
}

/* As the workspace's owner through the target's engine, stdout to out. */
static int box_run(const sm_workspace_target *t, const char *const *argv, size_t argc,
                   common_buf *out, sm_error *err) {
  return workspace_box_exec(t->engine, t, argv, argc, NULL, NULL, out, NULL, err);
}

/* Deletes paths (relative, sorted) in the sandbox with batched `rm -rf`. */
int workspace_box_delete(const sm_workspace_target *t, char **paths, size_t n, sm_error *err) {
  const char **argv = calloc(RM_BATCH_PATHS + 5, sizeof *argv);
  char **owned = calloc(RM_BATCH_PATHS, sizeof *owned);
  if (argv == NULL || owned == NULL) {
    free(argv);
    free(owned);
    return sm_error_set(err, SM_ENOMEM, "out of memory");
  }
  int rc = 0;
  size_t i = 0;
  const char *root = t->sandbox_path;
  size_t rlen = strlen(root);
  while (rlen > 1 && root[rlen - 1] == '/') rlen--;
  while (i < n && rc == 0) {
    size_t argc = 0, bytes = 0, k = 0;
    /* If the tool made a directory read-only, rm alone fails: then make
     * the parents writable for the owner and try once more. */
    argv[argc++] = "sh";
    argv[argc++] = "-c";
    argv[argc++] = "rm -rf -- \"$@\" 2>/dev/null && exit 0; "
                   "for p; do chmod u+rwx -- \"${p%/*}\" 2>/dev/null; "
                   "[ -d \"$p\" ] && chmod -R u+rwx -- \"$p\" 2>/dev/null; done; rm -rf -- \"$@\"";
    argv[argc++] = "sh";
    while (i < n && k < RM_BATCH_PATHS && bytes < RM_BATCH_BYTES) {
      size_t len = rlen + strlen(paths[i]) + 2;
      owned[k] = malloc(len);
      if (owned[k] == NULL) {
        rc = sm_error_set(err, SM_ENOMEM, "out of memory");
        break;
      }
      snprintf(owned[k], len, "%.*s/%s", (int)rlen, root, paths[i]);
      argv[argc++] = owned[k++];
      bytes += len;
      i++;
    }
    if (rc == 0) rc = box_run(t, argv, argc, NULL, err);
    for (size_t j = 0; j < k; j++) free(owned[j]);
  }
  free(argv);
  free(owned);
  if (rc) sm_error_wrap(err, "deleting in the sandbox what was deleted on the host");
  return rc;
}

/* Makes host links the engine's upload would refuse (relative, climbing
 * above the workspace), as the sandbox's user: what was there is replaced,
 * as the upload would. */
int workspace_box_links(const sm_workspace_target *t, ws_entry **links, size_t n, sm_error *err) {
  const char **argv = calloc(2 * RM_BATCH_PATHS + 6, sizeof *argv);
  if (argv == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory");
  int rc = 0;
  size_t i = 0;
  while (i < n && rc == 0) {
    size_t argc = 0, bytes = 0, k = 0;
    argv[argc++] = "sh";
    argv[argc++] = "-c";
    argv[argc++] = "cd -- \"$1\" && shift && while [ $# -ge 2 ]; do "
                   "rm -rf -- \"$2\" && ln -s -- \"$1\" \"$2\" || exit 1; shift 2; done";
    argv[argc++] = "sh";
    argv[argc++] = t->sandbox_path;
    while (i < n && k < RM_BATCH_PATHS && bytes < RM_BATCH_BYTES) {
      argv[argc++] = links[i]->link;
      argv[argc++] = links[i]->path;
      bytes += strlen(links[i]->link) + strlen(links[i]->path) + 2;
      k++;
      i++;
    }
    rc = box_run(t, argv, argc, NULL, err);
  }
  free(argv);
  if (rc) sm_error_wrap(err, "making the workspace's links that leave it");
  return rc;
}

int workspace_box_wipe(const sm_workspace_target *t, sm_error *err) {
  const char *argv[] = {"sh", "-c", "cd -- \"$1\" && rm -rf -- * .[!.]* ..?*", "sh",
                        t->sandbox_path};
  int rc = box_run(t, argv, 5, NULL, err);
  if (rc) sm_error_wrap(err, "clearing the sandbox workspace");
  return rc;
}

int workspace_box_list(sm_engine *engine, const sm_workspace_target *t, int64_t max_entries,
                       int64_t max_path, sm_read_fn in, void *in_ud, ws_manifest *listing,
                       sm_error *err) {
  /* TZ set: stat's %z (read only for its nanoseconds) then does not look
   * for the zone file once per entry, a quarter of the listing's time. An
   * entry whose path passes WS_LIST_PATH_MAX ($2 matches it: -path's `?`
   * takes a '/' too) is printed as "L|./path" and not entered, so find and
   * stat never meet a path they cannot take (busybox's find fails on one). */
#define WS_LIST_FIND                                                                    \
  "find . -mindepth 1 \\( -path \"$2\" -prune -exec printf 'L|%s\\n' {} + \\) -o "     \
  "-exec stat -c '%s|%Y|%Z|%z|%f|%n' {} +"
  static const char script[] = "export TZ=UTC0; cd -- \"$1\" && " WS_LIST_FIND;
  static const char waiting[] =
      "export TZ=UTC0; read -r go && [ \"$go\" = go ] && cd -- \"$1\" && " WS_LIST_FIND;
  char too_long[WS_LIST_PATH_MAX + 8];
  memcpy(too_long, "./", 2);
  memset(too_long + 2, '?', WS_LIST_PATH_MAX + 1);
  memcpy(too_long + 3 + WS_LIST_PATH_MAX, "*", 2);
  const char *argv[] = {"sh", "-c", in ? waiting : script, "sh", t->sandbox_path, too_long};
  /* Typical lines are well under 352 bytes; past the cap the full copy
   * (with its own limits) is used instead. */
  int64_t cap = max_entries * 352;
  if (cap > ((int64_t)64 << 20)) cap = (int64_t)64 << 20;
  common_buf out;
  common_buf_init(&out, (size_t)cap);
  int rc = workspace_box_exec(engine, t, argv, 6, in, in_ud, &out, NULL, err);
  if (rc == 0)
    rc = workspace_probe_parse(out.data ? out.data : "", out.len, max_entries, max_path, listing,
                               err);
  common_buf_dispose(&out);
  return rc;
}

/* After an upload only what was sent needs its ctime: when that is a few
 * paths, stat is given them (no walk of the whole workspace); else the
 * whole listing. */
#define LIST_SENT_PATHS 256
#define LIST_SENT_BYTES (96 * 1024)

int workspace_box_list_sent(const sm_workspace_target *t, int64_t max_entries, int64_t max_path,
                            ws_entry **sent, size_t n, ws_manifest *listing, sm_error *err) {
  size_t bytes = 0;
  for (size_t i = 0; i < n && bytes <= LIST_SENT_BYTES; i++) bytes += strlen(sent[i]->path) + 3;
  if (n == 0 || n > LIST_SENT_PATHS || bytes > LIST_SENT_BYTES)
    return workspace_box_list(t->engine, t, max_entries, max_path, NULL, NULL, listing, err);
  static const char script[] =
      "export TZ=UTC0; cd -- \"$1\" && shift && exec stat -c '%s|%Y|%Z|%z|%f|%n' -- \"$@\"";
  const char **argv = calloc(n + 5, sizeof *argv);
  char **owned = calloc(n + 1, sizeof *owned);
  int rc = 0;
  if (argv == NULL || owned == NULL) rc = sm_error_set(err, SM_ENOMEM, "out of memory");
  size_t argc = 0;
  if (rc == 0) {
    argv[argc++] = "sh";
    argv[argc++] = "-c";
    argv[argc++] = script;
    argv[argc++] = "sh";
    argv[argc++] = t->sandbox_path;
  }
  for (size_t i = 0; rc == 0 && i < n; i++) {
    /* "./" as find prints them: the listing parser wants that form. */
    size_t len = strlen(sent[i]->path) + 3;
    owned[i] = malloc(len);
    if (owned[i] == NULL) {
      rc = sm_error_set(err, SM_ENOMEM, "out of memory");
      break;
    }
    snprintf(owned[i], len, "./%s", sent[i]->path);
    argv[argc++] = owned[i];
  }
  common_buf out;
  common_buf_init(&out, (size_t)n * 352 + 4096);
  if (rc == 0) rc = box_run(t, argv, argc, &out, err);
  if (rc == 0)
    rc = workspace_probe_parse(out.data ? out.data : "", out.len, max_entries, max_path, listing,
                               err);
  common_buf_dispose(&out);
  for (size_t i = 0; owned && i < n; i++) free(owned[i]);
  free(owned);
  free(argv);
  return rc;
}

/* Exit code of the unpacker's wrapper when the unpacker is not there. */
#define UNPACKER_MISSING 112

/* How a copy in reaches the sandbox (upload.c says why): the engine's
 * upload into an untouched sandbox; else sandman's unpacker, run as the
 * sandbox's user with the stream on its stdin. */
int workspace_box_put(const sm_workspace_target *t, sm_read_fn reader, void *ud, int *missing,
                      common_buf *listing, sm_error *err) {
  *missing = 0;
  if (t->untouched)
    return sm_engine_archive_put(t->engine, t->container_id, t->sandbox_path, reader, ud, err);
  if (t->unpacker == NULL || t->unpacker[0] == '\0')
    return sm_error_set(err, SM_EINVAL, "no unpacker to copy into a sandbox that may run "
                                        "processes (sm_workspace_target.unpacker)");
  const char *argv[] = {"/bin/sh", "-c", "[ -x \"$1\" ] || exit 112; exec \"$@\"", "sh",
                        t->unpacker, "untar", t->sandbox_path, "--list"};
  int code = 0;
  int rc = box_exec(t->engine, t, argv, listing ? 8 : 7, reader, ud, listing, 1, &code, err);
  if (rc == SM_ESANDBOX && code == UNPACKER_MISSING) *missing = 1;
  return rc;
}

int workspace_box_install_unpacker(const sm_workspace_target *t, sm_error *err) {
  if (t->install == NULL)
    return sm_error_set(err, SM_ESANDBOX, "sandman's unpacker %s is not in the sandbox",
                        t->unpacker);
  int rc = t->install(t->install_ud, err);
  if (rc) sm_error_wrap(err, "installing sandman's unpacker in the sandbox");
  return rc;
}

int workspace_box_digest(const sm_workspace_target *t, int64_t max_entries,
                         const sm_string_list *excludes, char hex[65], uint64_t *count,
                         sm_error *err) {
  if (t->run == NULL || t->unpacker == NULL || t->unpacker[0] == '\0')
    return sm_error_set(err, SM_EUNSUPPORTED, "no agent session for the workspace's digest");
  size_t nex = excludes ? excludes->n : 0;
  const char **argv = calloc(nex + 5, sizeof *argv);
  if (argv == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory");
  char max[24];
  snprintf(max, sizeof max, "%lld", (long long)max_entries);
  size_t argc = 0;
  argv[argc++] = t->unpacker;
  argv[argc++] = "wsdigest";
  argv[argc++] = t->sandbox_path;
  argv[argc++] = max;
  for (size_t i = 0; i < nex; i++) argv[argc++] = excludes->items[i];
  common_buf out;
  common_buf_init(&out, WS_DIGEST_LINE_MAX);
  int rc = workspace_box_exec(t->engine, t, argv, argc, NULL, NULL, &out, NULL, err);
  if (rc == 0 && workspace_unchanged_parse(out.data ? out.data : "", out.len, hex, count) != 0)
    rc = sm_error_set(err, SM_EPROTOCOL, "the workspace's digest did not parse");
  common_buf_dispose(&out);
  free(argv);
  return rc;
}
