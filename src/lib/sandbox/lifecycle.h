/* Internal to src/lib/sandbox: a sandbox's life on the docker backend: the
 * checks before creating, its hardened config, creation and start, its
 * removal, and its entries in the audit trail. */
#ifndef SANDMAN_SANDBOX_LIFECYCLE_H
#define SANDMAN_SANDBOX_LIFECYCLE_H

#include <stddef.h>

#include <json-c/json.h>

#include <sandman/engine.h>
#include <sandman/error.h>
#include <sandman/sandbox.h>
#include <sandman/run.h>

#include "sandbox/backend.h"
#include "sandbox/sandbox_box.h"
#include "sandbox/context.h"

/* 0 if runtime is empty or registered with the engine (/info Runtimes);
 * SM_ESANDBOX naming it and how to register it otherwise. *gvisor (may be
 * NULL): the runtime's program is runsc. */
int sandbox_runtime_present(sm_engine *e, const char *runtime, int *gvisor, sm_error *err);
/* 0 if the image is on the engine (out, may be NULL: its inspect object);
 * SM_ESANDBOX saying how to get it otherwise (sandman never pulls). */
int sandbox_image_present(sm_engine *e, const char *image, json_object **out, sm_error *err);

/* The user (sb->user, uid, gid) a sandbox of settings s gets from its
 * image, as creating it would choose it. */
int sandbox_plan_user(const sandbox_ctx *ctx, sm_engine *e, const sm_sandbox_settings *s,
                      sandbox_box *sb, sm_error *err);

/* o[a] (b NULL) or o[a][b] when it is a string; NULL otherwise. */
const char *sandbox_json_str(json_object *o, const char *a, const char *b);
/* The io.sandman.<key> label of a container's inspect object, or NULL. */
const char *sandbox_label_of(json_object *inspect, const char *key);

/* A per_tool sandbox's random name sandman-<instance>-<kind>-<hex>, its
 * volume and key (kind: "tool" for a call's, "pool" for the warm pool's). */
int sandbox_fresh_names(const sandbox_ctx *ctx, const char *kind, sandbox_box *sb,
                        sm_error *err);

/* The hardened container config of sandbox sb (labels, user, environment)
 * against engine e: its image there, its user resolved in the image. The
 * docker backend creates it; the swarm backend translates it. image_id (may
 * be NULL; SM_ENGINE_ID_MAX bytes) gets the image's id. */
int sandbox_config(const sandbox_ctx *ctx, sm_engine *e, const sm_run_request *req,
                   sandbox_box *sb, int check_runtime, json_object **out, char *image_id,
                   sm_error *err);
/* Creates and starts the sandbox named sb->name. SM_ECONFLICT (untouched
 * volume) when the name is taken; any other failure removes what was made. */
int sandbox_create(const sandbox_ctx *ctx, sm_engine *e, const sm_run_request *req,
                   sandbox_box *sb, sm_error *err);
/* A sandbox started again (resumed from stop): its /tmp, a new tmpfs,
 * made 1777 when its image's /tmp is not (as at creation). */
int sandbox_fix_tmp(sm_engine *e, const char *id, const char *name, const char *image_id,
                    sm_error *err);
/* Removes a container and its volume (NULL: none; what is gone already is
 * fine) and drops its state files. relay: the sandbox may have an egress
 * relay (network allowlist, or not known): it is looked for and removed
 * too; 0 only when its settings say it has none (one engine request less). */
int sandbox_remove(sm_engine *e, const char *state_dir, const char *name, const char *volume,
                   int relay, sm_error *err);
/* The same without dropping its state files (its workspace manifest,
 * last use): a sandbox replaced by one of the same name keeps them.
 * volume NULL: the container alone goes. */
int sandbox_remove_keep_state(sm_engine *e, const char *name, const char *volume, int relay,
                              sm_error *err);
/* A sandbox's life in the audit trail (sandbox.created, .replaced, .removed). */
void sandbox_audit(const sandbox_ctx *ctx, const char *event, const sm_run_request *req,
                   const sandbox_box *sb, const char *message);

/* A ready per_tool sandbox for the warm pool: sb named
 * sandman-<instance>-pool-<random> and marked pooled, made by the backend's
 * make, then described in *out (out->swarm is make's to fill). */
typedef int (*sandbox_make_fn)(const sandbox_ctx *ctx, sm_engine *e, const sm_run_request *req,
                               sandbox_box *sb, sandbox_pool_item *out, sm_error *err);
int sandbox_prewarm(const sandbox_ctx *ctx, sm_engine *e, const sm_run_request *req,
                    sandbox_make_fn make, sandbox_pool_item *out, sm_error *err);

/* The swarm backend's config callback (sandbox_swarm_want.config): the same
 * hardened config, the runtime left to the node. */
typedef struct sandbox_swarm_config_ud {
  const sandbox_ctx *ctx;
  const sm_run_request *req;
  sandbox_box *sb;
} sandbox_swarm_config_ud;
int sandbox_swarm_config(void *ud, sm_engine *manager, json_object **config, int *uid, int *gid,
                         sm_error *err);

#endif
