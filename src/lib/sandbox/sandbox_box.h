/* Internal to src/lib/sandbox: the sandbox a call holds, from acquisition
 * (acquire.c; backend_swarm.c for a swarm) through creation (lifecycle.c)
 * to release. */
#ifndef SANDMAN_SANDBOX_BOX_H
#define SANDMAN_SANDBOX_BOX_H

#include <sandman/engine.h>
#include <sandman/mode.h>
#include <sandman/scope.h>
#include <sandman/sandbox.h>
#include <sandman/state.h>

#include "sandbox/backend_swarm_box.h"

typedef struct sandbox_box {
  sm_mode mode;
  char name[SM_NAME_MAX];
  char volume[SM_NAME_MAX + 16];
  char id[SM_ENGINE_ID_MAX];
  char scope_key[SM_KEY_MAX];
  char hash[65];
  char user[128];      /* numeric "uid:gid" given to the container */
  char user_name[128]; /* for USER */
  int uid, gid;
  int reused;
  int pooled;          /* per_tool: from (or made for) the warm pool */
  char pool_key[65];   /* pooled: the configuration's pool */
  int cached;          /* keyed: found in the runner's lookup cache, not inspected */
  char replaced[SM_ENGINE_ID_MAX]; /* keyed: the sandbox this call replaced, or "" */
  char because[256];   /* why */
  char lease_of[SM_NAME_MAX]; /* a leased call's own container (lease_box.h): the
                               * keyed sandbox whose volume it shares; "" otherwise */
  double lease_deadline_s;    /* with lease_of: when its keeper ends at the latest */
  const char *carried; /* what became of its /workspace (sm_run_result.replaced_workspace) */
  char resumed[16];    /* keyed: the state of rest it was brought back from, or "" */
  int thaw_later;      /* keyed: still frozen, thawed under the call's exec (after
                        * its frame went to the parked agent): sandbox_acquire_thaw */
  int made;            /* keyed: made by this call (a replacement, or new) */
  int uncached;        /* keyed: used though made with other settings: not remembered */
  sm_state_lock *busy;
  sandbox_swarm_box swarm;  /* the swarm backend's hold on it */
} sandbox_box;

#endif
