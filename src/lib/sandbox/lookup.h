/* Internal to src/lib/sandbox: the runner's lookup cache of keyed sandboxes
 * (per_run, per_worker), so that a call in a sandbox this runner already
 * found does not inspect it again. An exec on a container that is gone or
 * stopped fails, and the caller then drops the entry and looks again. */
#ifndef SANDMAN_SANDBOX_LOOKUP_H
#define SANDMAN_SANDBOX_LOOKUP_H

#include <sandman/engine.h>
#include <sandman/principal.h>
#include <sandman/sandbox.h>

typedef struct sandbox_lookup sandbox_lookup;

typedef struct sandbox_lookup_entry {
  char id[SM_ENGINE_ID_MAX];
  char hash[65];
  char project[SM_NAME_MAX];
  char principal[SM_PRINCIPAL_MAX]; /* the call's that found it ("" for none) */
  char volume[SM_NAME_MAX + 16]; /* its /workspace volume */
  int uid, gid;
  unsigned generation; /* its rest record's (rest.h) when found */
} sandbox_lookup_entry;

/* NULL when out of memory. */
sandbox_lookup *sandbox_lookup_new(void);
void sandbox_lookup_free(sandbox_lookup *l);
/* 1 and *out when this runner found sandbox `name` running with `hash`
 * before; 0 otherwise. */
int sandbox_lookup_get(sandbox_lookup *l, const char *name, const char *hash,
                       sandbox_lookup_entry *out);
void sandbox_lookup_put(sandbox_lookup *l, const char *name, const sandbox_lookup_entry *entry);
void sandbox_lookup_drop(sandbox_lookup *l, const char *name);
/* The entry no longer answers a get (the next call looks at the engine),
 * but its last-used write time stays: a sandbox thawed or started again
 * is not touched on disk again within the same second. */
void sandbox_lookup_invalidate(sandbox_lookup *l, const char *name);
/* 1 when the last-used time of `name` should be written now: not written
 * by this runner within the last second (idle timeouts are minutes; one
 * fsync per call is not worth it). */
int sandbox_lookup_touch_due(sandbox_lookup *l, const char *name, double now);

#endif
