/* Hibernate: a keyed sandbox's processes written to disk by the engine's
 * checkpoint and restored with them running (rest.h, docs/state.md).
 *
 * The engine (Docker 20.10) starts a container only from a checkpoint in
 * that container's own checkpoint folder, and a container restored once
 * cannot be started from a checkpoint again (its runtime's task is left
 * behind by the next checkpoint). So the checkpoint is written straight
 * into a successor: a container made like the sandbox (its inspect's
 * config, its image by id, its volume), created and not started, whose
 * checkpoint folder is <engine root>/containers/<id>/checkpoints; the old
 * container goes and the successor takes its name. It carries the label
 * io.sandman.origin, the sandbox's first container id, by which callers
 * that kept that id still find it.
 *
 * /workspace is a tmpfs that goes with the old container, so it is saved
 * (frozen, before the checkpoint) like a stop's, and put back before the
 * restore through a keeper: a small container of sandman's own that holds
 * the volume mounted (the engine mounts a volume for a container's start
 * and drops it with the last user) while the archive goes in and the
 * successor starts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sandman/egress.h>
#include <sandman/log.h>
#include <sandman/util.h>

#include "common/thread.h"
#include "sandbox/agent.h"
#include "sandbox/helper.h"
#include "sandbox/lifecycle.h"
#include "sandbox/rest.h"
#include "sandbox/ws_save.h"

#define CHECKPOINT SANDBOX_REST_CHECKPOINT
#define DOWN_WAIT_MS 30000
#define EXECS_WAIT_MS 10000
#define EXECS_POLL_MS 100
#define NET_TABLE_MAX (1 << 20)
#define KEEPER_SCRIPT "trap 'exit 0' TERM INT HUP; sleep 3600 & wait $!"

static int is(const char *a, const char *b) { return a && b && strcmp(a, b) == 0; }
static const char *id_of(sandbox_rest_op *op) {
  const char *id = sandbox_json_str(op->insp, "Id", NULL);
  return id ? id : op->name;
}

static int put(sandbox_rest_op *op, sm_error *err) {
  op->has_rec = 1;
  return sandbox_rest_write(op->ctx->state_dir, op->name, &op->rec, err);
}

int sandbox_rest_can_checkpoint(sm_engine *e, json_object *insp, int *gvisor, sm_error *err) {
  json_object *info = NULL, *v = NULL;
  *gvisor = 0;
  const char *rt = sandbox_json_str(insp, "HostConfig", "Runtime");
  sm_error ignore = SM_ERROR_INIT;
  if (rt && *rt && sandbox_runtime_present(e, rt, gvisor, &ignore) != 0)
    *gvisor = strncmp(rt, "runsc", 5) == 0;
  int rc = sm_engine_info(e, &info, err);
  if (rc) return rc;
  int experimental = json_object_object_get_ex(info, "ExperimentalBuild", &v) &&
                     json_object_get_boolean(v);
  json_object_put(info);
  if (experimental) return 0;
  /* Said before anything is touched: the sandbox stays as it is. */
  if (*gvisor)
    return sm_error_set(err, SM_EUNSUPPORTED,
                        "hibernate is refused: it needs the engine's checkpoints, which the engine "
                        "at %s does not offer (its experimental mode is off: \"experimental\": "
                        "true in its daemon.json, then restart it; docs/state.md); freeze or stop "
                        "the sandbox instead",
                        sm_engine_host(e));
  return sm_error_set(err, SM_EUNSUPPORTED,
                      "hibernate is refused: this sandbox runs under %s, whose checkpoint needs "
                      "a working CRIU on the engine's host, and the engine at %s does not offer "
                      "checkpoints (its experimental mode is off: \"experimental\": true in its "
                      "daemon.json, then restart it; docs/state.md); freeze or stop the sandbox "
                      "instead, or make it with --runtime runsc (gVisor)",
                      rt && *rt ? rt : "runc", sm_engine_host(e));
}

/* The engine's words for a failed checkpoint, with what to do. Under runc
 * the usual cause is CRIU, missing or not working on the engine's host;
 * the engine's long answer is kept for the rest. */
static int checkpoint_failed(json_object *insp, int gvisor, sm_error *err) {
  char why[SM_ERROR_MESSAGE_MAX];
  snprintf(why, sizeof why, "%s", err->message);
  if (gvisor) return sm_error_set(err, SM_ESANDBOX, "the engine's checkpoint failed: %s", why);
  const char *rt = sandbox_json_str(insp, "HostConfig", "Runtime");
  int missing = strstr(why, "\"criu\": executable file not found") != NULL;
  return sm_error_set(err, SM_EUNSUPPORTED,
                      "hibernate is refused: this sandbox runs under %s, whose checkpoint needs "
                      "a working CRIU on the engine's host, and %s%s; freeze or stop the sandbox "
                      "instead, or make it with --runtime runsc (gVisor), whose checkpoint works",
                      rt && *rt && strcmp(rt, "runc") != 0 ? rt : "runc",
                      missing ? "CRIU is not installed there (the engine found no `criu`)"
                              : "the engine's checkpoint failed (check `criu check` there): ",
                      missing ? "" : why);
}

/* ---- the successor ---- */

static void side_name(const char *name, const char *what, char *out, size_t len) {
  snprintf(out, len, "%s-%s", name, what);
}

/* A container made like the one inspected: its config and host config,
 * its image by id, the origin label. */
static json_object *successor_config(json_object *insp, const char *origin) {
  json_object *cfg = NULL, *hc = NULL, *c = NULL, *h = NULL, *labels = NULL;
  if (!json_object_object_get_ex(insp, "Config", &cfg) ||
      !json_object_object_get_ex(insp, "HostConfig", &hc))
    return NULL;
  if (json_object_deep_copy(cfg, &c, NULL) != 0 || json_object_deep_copy(hc, &h, NULL) != 0) {
    json_object_put(c);
    return NULL;
  }
  /* The image by id (its tag may have moved since); the name it was made
   * with stays in a label for the listing. */
  const char *image = sandbox_json_str(insp, "Image", NULL);
  const char *ref = sandbox_json_str(cfg, "Image", NULL);
  if (image) json_object_object_add(c, "Image", json_object_new_string(image));
  if (!json_object_object_get_ex(c, "Labels", &labels) || !json_object_is_type(labels, json_type_object)) {
    labels = json_object_new_object();
    json_object_object_add(c, "Labels", labels);
  }
  json_object_object_add(labels, "io.sandman.origin", json_object_new_string(origin));
  if (ref && strncmp(ref, "sha256:", 7) != 0 && !json_object_object_get_ex(labels, "io.sandman.image", NULL))
    json_object_object_add(labels, "io.sandman.image", json_object_new_string(ref));
  json_object_object_add(c, "HostConfig", h);
  return c;
}

/* With its anonymous volumes (a successor's /.sandman: spec.c); a named
 * one (its /workspace, shared with the sandbox) stays. */
static void remove_quietly(sm_engine *e, const char *ref) {
  sm_error ignore = SM_ERROR_INIT;
  sm_engine_container_remove(e, ref, 1, 1, &ignore);
}

static int make_successor(sandbox_rest_op *op, sm_error *err) {
  char next[SM_NAME_MAX + 16];
  side_name(op->name, "next", next, sizeof next);
  remove_quietly(op->e, next); /* a leftover of an attempt cut short and undone */
  json_object *config = successor_config(op->insp, op->rec.origin[0] ? op->rec.origin : id_of(op));
  if (config == NULL) return sm_error_set(err, SM_EPROTOCOL, "sandbox %s: its config cannot be read", op->name);
  int rc = sm_engine_container_create(op->e, next, config, op->rec.next_id, NULL, err);
  json_object_put(config);
  if (rc) return sm_error_wrap(err, "making the container sandbox %s comes back in", op->name);
  return put(op, err);
}

static int checkpoint_dir(sm_engine *e, const char *id, char *out, size_t len, sm_error *err) {
  json_object *info = NULL;
  int rc = sm_engine_info(e, &info, err);
  if (rc) return rc;
  const char *root = sandbox_json_str(info, "DockerRootDir", NULL);
  if (root == NULL || *root != '/') rc = sm_error_set(err, SM_EPROTOCOL, "the engine says no DockerRootDir");
  else snprintf(out, len, "%s/containers/%s/checkpoints", root, id);
  json_object_put(info);
  return rc;
}

int sandbox_rest_checkpoint_folder(sm_engine *e, const char *id, char *out, size_t len,
                                   sm_error *err) {
  char dir[4096];
  int rc = checkpoint_dir(e, id, dir, sizeof dir, err);
  if (rc == 0 && snprintf(out, len, "%s/%s", dir, CHECKPOINT) >= (int)len)
    rc = sm_error_set(err, SM_EINVAL, "path too long");
  return rc;
}

/* The old container goes and the successor takes the sandbox's name. */
static int swap_in(sandbox_rest_op *op, const char *old_id, sm_error *err) {
  char next[SM_NAME_MAX + 16], aside[SM_NAME_MAX + 16];
  side_name(op->name, "next", next, sizeof next);
  side_name(op->name, "hib", aside, sizeof aside);
  sm_error ignore = SM_ERROR_INIT;
  if (sm_egress_revoke(op->e, op->name, &ignore) != 0) sm_error_clear(&ignore);
  /* Each step may have been done already by an attempt cut short. */
  sm_engine_container_rename(op->e, old_id, aside, &ignore);
  sm_error_clear(&ignore);
  int rc = sm_engine_container_rename(op->e, op->rec.next_id, op->name, err);
  if (rc == SM_ECONFLICT) {
    json_object *cur = NULL;
    if (sm_engine_container_inspect(op->e, op->name, &cur, &ignore) == 0 &&
        is(sandbox_json_str(cur, "Id", NULL), op->rec.next_id)) {
      rc = 0;
      sm_error_clear(err);
    }
    json_object_put(cur);
  }
  if (rc) return sm_error_wrap(err, "naming the hibernated sandbox %s", op->name);
  rc = sm_engine_container_remove(op->e, old_id, 1, 1, err);
  if (rc == SM_ENOTFOUND) rc = 0, sm_error_clear(err);
  if (rc) sm_log(SM_LOG_WARN, "sandbox %s: its old container: %s (a reap removes it)", op->name, err->message);
  sm_error_clear(err);
  sandbox_agents_forget(op->ctx->agents, old_id);
  snprintf(op->rec.id, sizeof op->rec.id, "%s", op->rec.next_id);
  op->rec.next_id[0] = '\0';
  snprintf(op->rec.state, sizeof op->rec.state, "hibernated");
  op->rec.pending[0] = op->rec.prior[0] = '\0';
  op->rec.since = sm_now();
  return put(op, err);
}

/* Undoes a hibernation whose checkpoint was not written: the successor
 * goes, the sandbox runs (or stays frozen) as before. */
static void hibernate_undo(sandbox_rest_op *op, const char *prior) {
  sm_error ignore = SM_ERROR_INIT;
  char path[4096];
  char next[SM_NAME_MAX + 16];
  side_name(op->name, "next", next, sizeof next);
  if (op->rec.next_id[0]) remove_quietly(op->e, op->rec.next_id);
  remove_quietly(op->e, next); /* made, its id not recorded yet */
  if (sandbox_rest_ws_path(op->ctx->state_dir, op->name, path, sizeof path, &ignore) == 0) unlink(path);
  if (is(prior, "running")) sm_engine_container_unpause(op->e, op->rec.id, &ignore);
  else if (is(prior, "frozen")) sm_engine_container_pause(op->e, op->rec.id, &ignore); /* thawed */
  snprintf(op->rec.state, sizeof op->rec.state, "%s", prior[0] ? prior : "running");
  op->rec.pending[0] = op->rec.prior[0] = op->rec.next_id[0] = '\0';
  op->rec.ws_saved = 0;
  op->rec.workspace_bytes = 0;
  sandbox_rest_write(op->ctx->state_dir, op->name, &op->rec, &ignore);
}

/* How many of container id's engine execs still run (-1: not known). */
static int execs_running(sm_engine *e, const char *id) {
  json_object *insp = NULL, *ids = NULL;
  sm_error ignore = SM_ERROR_INIT;
  if (sm_engine_container_inspect(e, id, &insp, &ignore) != 0) return -1;
  int n = 0;
  if (json_object_object_get_ex(insp, "ExecIDs", &ids) && json_object_is_type(ids, json_type_array))
    for (size_t i = 0; i < json_object_array_length(ids); i++) {
      int running = 0;
      const char *x = json_object_get_string(json_object_array_get_idx(ids, i));
      if (x && sm_engine_exec_inspect(e, x, &running, NULL, NULL, &ignore) == 0 && running) n++;
      sm_error_clear(&ignore);
    }
  json_object_put(insp);
  return n;
}

/* How many TCP sockets listen in the sandbox (its /proc/net/tcp and tcp6,
 * state 0A), -1 when they cannot be read (no /bin/sh, no /proc). */
static int tcp_listeners(sm_engine *e, const char *id) {
  static const char *const argv[] = {"/bin/sh", "-c",
                                     "cat /proc/net/tcp && { cat /proc/net/tcp6 2>/dev/null || :; }"};
  common_buf out;
  common_buf_init(&out, NET_TABLE_MAX);
  sm_error ignore = SM_ERROR_INIT;
  int code = -1, n = -1;
  if (sandbox_exec_helper(e, id, argv, 3, NULL, NULL, NULL, 30, &out, &code, &ignore) == 0 &&
      code == 0 && common_buf_append(&out, "", 1) == 0) {
    n = 0;
    for (char *line = out.data, *next; line && *line; line = next) {
      next = strchr(line, '\n');
      if (next) *next++ = '\0';
      char sl[16] = "", local[64] = "", remote[64] = "", st[8] = "";
      if (sscanf(line, "%15s %63s %63s %7s", sl, local, remote, st) == 4 && strcmp(st, "0A") == 0) n++;
    }
  }
  common_buf_dispose(&out);
  return n;
}

/* No engine exec runs in the sandbox: a process whose stdio is an exec's
 * holds the host's file descriptors, which gVisor's restore cannot open
 * again (the restore then fails and the processes are lost). The runner's
 * idle agent sessions end first (their agent exits at the end of its
 * stdin; a frozen sandbox is thawed for that and for the look at its
 * sockets, *thawed says so); anything else still running after a bounded
 * wait refuses the hibernate. A listening TCP socket refuses it too: the
 * checkpoint cannot save one a process waits on, and gVisor ends the
 * sandbox when its checkpoint fails. */
static int execs_ended(sandbox_rest_op *op, const char *was, int *thawed, sm_error *err) {
  const char *id = op->rec.id;
  *thawed = 0;
  if (is(was, "frozen")) {
    int rc = sm_engine_container_unpause(op->e, id, err);
    if (rc == SM_ECONFLICT) rc = 0, sm_error_clear(err);
    if (rc) return rc;
    *thawed = 1;
  }
  int listening = tcp_listeners(op->e, id);
  if (listening != 0)
    return sm_error_set(err, SM_EUNSUPPORTED,
                        "hibernate is refused: %s in sandbox %s, which gVisor's checkpoint "
                        "cannot save (a failed checkpoint ends the sandbox); freeze or stop it "
                        "instead",
                        listening < 0 ? "its TCP sockets cannot be listed (/proc/net/tcp)"
                                      : "a process listens on a TCP port",
                        op->name);
  sandbox_agents_forget(op->ctx->agents, id);
  int n = execs_running(op->e, id);
  double deadline = sm_monotonic_ms() + EXECS_WAIT_MS;
  while (n != 0 && sm_monotonic_ms() < deadline) {
    common_sleep_ms(EXECS_POLL_MS);
    n = execs_running(op->e, id);
  }
  if (n == 0) return 0;
  return sm_error_set(err, SM_EBUSY,
                      "hibernate is refused: %s in sandbox %s (gVisor cannot restore a process "
                      "attached to the engine's exec); retry when it has ended, or freeze or "
                      "stop the sandbox instead",
                      n < 0 ? "its processes cannot be listed" : "a process started by an engine exec still runs",
                      op->name);
}

/* Frozen, /workspace saved, the successor made, the checkpoint written
 * into it (the old container stops). */
static int hibernate_steps(sandbox_rest_op *op, const char *was, int gvisor, sm_error *err) {
  char path[4096], dir[4096];
  const char *id = op->rec.id;
  int thawed = 0;
  int rc = gvisor ? execs_ended(op, was, &thawed, err) : 0;
  if (rc == 0) rc = sandbox_rest_ws_path(op->ctx->state_dir, op->name, path, sizeof path, err);
  if (rc == 0 && (is(was, "running") || thawed)) {
    rc = sm_engine_container_pause(op->e, id, err);
    if (rc == SM_ECONFLICT) rc = 0, sm_error_clear(err);
  }
  if (rc == 0) rc = sandbox_ws_save(op->e, id, path, 0, &op->rec.workspace_bytes, err);
  if (rc == 0) {
    op->rec.ws_saved = 1;
    rc = make_successor(op, err);
  }
  if (rc == 0) rc = checkpoint_dir(op->e, op->rec.next_id, dir, sizeof dir, err);
  if (rc) return rc;
  /* The checkpoint of a frozen container: what it holds is what was saved. */
  rc = sm_engine_checkpoint_create(op->e, id, CHECKPOINT, dir, 1, err);
  if (rc) return checkpoint_failed(op->insp, gvisor, err);
  sm_error ignore = SM_ERROR_INIT;
  /* The engine still calls it paused: the unpause lets it see the end. */
  sm_engine_container_unpause(op->e, id, &ignore);
  sm_error_clear(&ignore);
  if (sm_engine_container_wait(op->e, id, "not-running", DOWN_WAIT_MS, NULL, &ignore) != 0)
    sm_log(SM_LOG_WARN, "sandbox %s: its checkpointed container: %s", op->name, ignore.message);
  return 0;
}

int sandbox_rest_hibernate(sandbox_rest_op *op, sm_error *err) {
  int gvisor = 0;
  int rc = sandbox_rest_can_checkpoint(op->e, op->insp, &gvisor, err);
  if (rc) return rc;
  char was[SM_REST_STATE_MAX];
  snprintf(was, sizeof was, "%s", op->state);
  snprintf(op->rec.prior, sizeof op->rec.prior, "%s", was);
  snprintf(op->rec.pending, sizeof op->rec.pending, "hibernated");
  snprintf(op->rec.id, sizeof op->rec.id, "%s", id_of(op));
  op->rec.next_id[0] = '\0';
  op->rec.ws_saved = 0;
  rc = put(op, err);
  if (rc) return rc;
  rc = hibernate_steps(op, was, gvisor, err);
  if (rc) {
    hibernate_undo(op, was);
    return sm_error_wrap(err, "hibernating sandbox %s", op->name);
  }
  char old_id[SM_ENGINE_ID_MAX];
  snprintf(old_id, sizeof old_id, "%s", op->rec.id);
  sm_error hook = SM_ERROR_INIT;
  int hook_rc = op->on_checkpoint ? op->on_checkpoint(op, old_id, op->on_checkpoint_ud, &hook) : 0;
  rc = swap_in(op, old_id, err);
  if (rc == 0 && hook_rc) {
    *err = hook;
    rc = hook_rc;
  }
  return rc;
}

/* Does the successor hold the checkpoint? */
static int has_checkpoint(sm_engine *e, const char *id) {
  char path[SM_ENGINE_ID_MAX + 32];
  snprintf(path, sizeof path, "/containers/%s/checkpoints", id);
  json_object *list = NULL;
  sm_error ignore = SM_ERROR_INIT;
  int found = 0;
  if (sm_engine_request_json(e, "GET", path, NULL, NULL, &list, &ignore) == 0 &&
      json_object_is_type(list, json_type_array))
    for (size_t i = 0; i < json_object_array_length(list) && !found; i++)
      found = is(sandbox_json_str(json_object_array_get_idx(list, i), "Name", NULL), CHECKPOINT);
  json_object_put(list);
  return found;
}

static int running_or_paused(sm_engine *e, const char *id) {
  json_object *insp = NULL;
  sm_error ignore = SM_ERROR_INIT;
  int up = 0;
  if (sm_engine_container_inspect(e, id, &insp, &ignore) == 0) {
    const char *st = sandbox_json_str(insp, "State", "Status");
    up = is(st, "running") || is(st, "paused");
  }
  json_object_put(insp);
  return up;
}

/* Once the checkpoint is in the successor the old container has ended,
 * but the engine may still call it paused (the hibernation was cut short
 * before its unpause): the unpause lets it see the end, as
 * hibernate_steps does. A checkpoint the engine was still writing ends it
 * too, when done; one that failed was removed by the engine. */
static void old_settle(sandbox_rest_op *op) {
  sm_error ignore = SM_ERROR_INIT;
  if (!op->rec.next_id[0] || !op->rec.ws_saved || !has_checkpoint(op->e, op->rec.next_id) ||
      !running_or_paused(op->e, op->rec.id))
    return;
  sm_engine_container_unpause(op->e, op->rec.id, &ignore);
  sm_error_clear(&ignore);
  if (sm_engine_container_wait(op->e, op->rec.id, "not-running", DOWN_WAIT_MS, NULL, &ignore) != 0)
    sm_log(SM_LOG_WARN, "sandbox %s: its checkpointed container: %s", op->name, ignore.message);
}

int sandbox_rest_hibernate_recover(sandbox_rest_op *op, sm_error *err) {
  char prior[SM_REST_STATE_MAX];
  snprintf(prior, sizeof prior, "%s", op->rec.prior);
  old_settle(op);
  int old_up = running_or_paused(op->e, op->rec.id);
  int written = op->rec.next_id[0] && op->rec.ws_saved && !old_up &&
                has_checkpoint(op->e, op->rec.next_id);
  if (written) {
    char old_id[SM_ENGINE_ID_MAX];
    snprintf(old_id, sizeof old_id, "%s", op->rec.id);
    return swap_in(op, old_id, err);
  }
  if (old_up) {
    hibernate_undo(op, prior);
    return 0;
  }
  /* The old container stopped without a checkpoint: its processes are
   * gone; with /workspace saved it is a stopped sandbox. */
  if (op->rec.next_id[0]) remove_quietly(op->e, op->rec.next_id);
  if (!op->rec.ws_saved) {
    sandbox_rest_drop(op->ctx->state_dir, op->name);
    return 0;
  }
  snprintf(op->rec.state, sizeof op->rec.state, "stopped");
  op->rec.pending[0] = op->rec.prior[0] = op->rec.next_id[0] = '\0';
  return put(op, err);
}

/* ---- back ---- */

/* The keeper: the volume mounted, nothing else of the sandbox's. */
static json_object *keeper_config(json_object *insp, const char *sandbox, const char *volume) {
  json_object *c = json_object_new_object(), *hc = json_object_new_object();
  const char *image = sandbox_json_str(insp, "Image", NULL);
  json_object_object_add(c, "Image", json_object_new_string(image ? image : ""));
  json_object_object_add(c, "User", json_object_new_string("0:0"));
  json_object *ep = json_object_new_array();
  json_object_array_add(ep, json_object_new_string("/bin/sh"));
  json_object_array_add(ep, json_object_new_string("-c"));
  json_object_array_add(ep, json_object_new_string(KEEPER_SCRIPT));
  json_object_object_add(c, "Entrypoint", ep);
  json_object_object_add(c, "Cmd", json_object_new_array());
  char owner[300], created[40];
  sm_sandbox_owner_label(owner, sizeof owner);
  sm_format_time(sm_now(), created, sizeof created);
  json_object *labels = json_object_new_object();
  const char *inst = sandbox_label_of(insp, "instance");
  json_object_object_add(labels, "io.sandman.managed", json_object_new_string("true"));
  json_object_object_add(labels, "io.sandman.instance", json_object_new_string(inst ? inst : ""));
  json_object_object_add(labels, "io.sandman.mode", json_object_new_string("per_tool"));
  json_object_object_add(labels, "io.sandman.owner", json_object_new_string(owner));
  json_object_object_add(labels, "io.sandman.created", json_object_new_string(created));
  json_object_object_add(labels, "io.sandman.keeper", json_object_new_string(sandbox));
  json_object_object_add(c, "Labels", labels);
  json_object *mounts = json_object_new_array(), *m = json_object_new_object();
  json_object_object_add(m, "Type", json_object_new_string("volume"));
  json_object_object_add(m, "Source", json_object_new_string(volume));
  json_object_object_add(m, "Target", json_object_new_string("/workspace"));
  json_object_array_add(mounts, m);
  json_object_object_add(hc, "Mounts", mounts);
  json_object_object_add(hc, "NetworkMode", json_object_new_string("none"));
  json_object_object_add(hc, "ReadonlyRootfs", json_object_new_boolean(1));
  json_object *caps = json_object_new_array();
  json_object_array_add(caps, json_object_new_string("ALL"));
  json_object_object_add(hc, "CapDrop", caps);
  json_object *so = json_object_new_array();
  json_object_array_add(so, json_object_new_string("no-new-privileges"));
  json_object_object_add(hc, "SecurityOpt", so);
  json_object_object_add(hc, "Memory", json_object_new_int64(64LL << 20));
  json_object_object_add(hc, "PidsLimit", json_object_new_int64(16));
  json_object_object_add(c, "HostConfig", hc);
  return c;
}

int sandbox_rest_keeper_up(sm_engine *e, json_object *insp, const char *sandbox, char *id,
                           sm_error *err) {
  char name[SM_NAME_MAX + 16];
  side_name(sandbox, "keep", name, sizeof name);
  remove_quietly(e, name);
  const char *volume = sandbox_label_of(insp, "volume");
  char vol[SM_NAME_MAX + 8];
  snprintf(vol, sizeof vol, "%s", volume && *volume ? volume : "");
  if (!vol[0]) snprintf(vol, sizeof vol, "%s-ws", sandbox);
  json_object *cfg = keeper_config(insp, sandbox, vol);
  int rc = sm_engine_container_create(e, name, cfg, id, NULL, err);
  json_object_put(cfg);
  if (rc == 0) rc = sm_engine_container_start(e, id, err);
  if (rc) {
    remove_quietly(e, name);
    return sm_error_wrap(err, "holding the /workspace of sandbox %s", sandbox);
  }
  return 0;
}

void sandbox_rest_keeper_down(sm_engine *e, const char *sandbox) {
  char name[SM_NAME_MAX + 16];
  side_name(sandbox, "keep", name, sizeof name);
  remove_quietly(e, name);
}

static int keeper_up(sandbox_rest_op *op, char *id, sm_error *err) {
  return sandbox_rest_keeper_up(op->e, op->insp, op->name, id, err);
}

static int restore_finish(sandbox_rest_op *op, sm_error *err) {
  char keep[SM_NAME_MAX + 16], path[4096];
  side_name(op->name, "keep", keep, sizeof keep);
  remove_quietly(op->e, keep);
  const char *id = id_of(op);
  sm_error ignore = SM_ERROR_INIT;
  sm_engine_checkpoint_remove(op->e, id, CHECKPOINT, &ignore);
  sm_error_clear(&ignore);
  if (sandbox_agent_install(op->ctx->agents, op->e, id, &ignore) != 0)
    sm_log(SM_LOG_WARN, "sandbox %s: the agent: %s (calls use engine execs)", op->name, ignore.message);
  snprintf(op->rec.id, sizeof op->rec.id, "%s", id);
  snprintf(op->rec.state, sizeof op->rec.state, "running");
  op->rec.pending[0] = op->rec.prior[0] = '\0';
  op->rec.since = sm_now();
  op->rec.generation++;
  op->rec.ws_saved = 0;
  op->rec.workspace_bytes = 0;
  int rc = put(op, err);
  if (rc == 0 && sandbox_rest_ws_path(op->ctx->state_dir, op->name, path, sizeof path, &ignore) == 0)
    unlink(path);
  return rc;
}

int sandbox_rest_restore(sandbox_rest_op *op, sm_error *err) {
  const char *st = sandbox_json_str(op->insp, "State", "Status");
  if (is(st, "running")) return restore_finish(op, err); /* restored before a crash */
  snprintf(op->rec.prior, sizeof op->rec.prior, "hibernated");
  snprintf(op->rec.pending, sizeof op->rec.pending, "running");
  char path[4096], keeper[SM_ENGINE_ID_MAX] = "";
  int rc = sandbox_rest_ws_path(op->ctx->state_dir, op->name, path, sizeof path, err);
  if (rc == 0) rc = put(op, err);
  if (rc == 0) rc = keeper_up(op, keeper, err);
  if (rc == 0 && op->rec.ws_saved) rc = sandbox_ws_restore(op->e, keeper, path, err);
  if (rc == 0) {
    rc = sm_engine_container_restore(op->e, id_of(op), CHECKPOINT, err);
    if (rc) sm_error_wrap(err, "restoring sandbox %s from its checkpoint", op->name);
  }
  if (rc) {
    char keep[SM_NAME_MAX + 16];
    side_name(op->name, "keep", keep, sizeof keep);
    remove_quietly(op->e, keep);
    /* Still hibernated, whole: another resume may try again. */
    sm_error ignore = SM_ERROR_INIT;
    snprintf(op->rec.state, sizeof op->rec.state, "hibernated");
    op->rec.pending[0] = op->rec.prior[0] = '\0';
    put(op, &ignore);
    return rc;
  }
  return restore_finish(op, err);
}
