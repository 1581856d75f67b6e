/* Internal to src/lib/sandbox: the record of a keyed sandbox at rest
 * (<state>/rest/<name>.json, rest_record.c) and where its saved
 * /workspace lives (<state>/rest/<name>.ws.tar).
 *
 * The engine says whether a container is paused, exited or created; the
 * record says why (sandman put it there) and what belongs to it: the
 * saved /workspace, the checkpoint, the container that holds it. A change
 * writes the record with `pending` (the state it goes to) before it starts
 * and without it once done, each write replacing the file whole, so a
 * process that finds a pending record knows a change was cut short and
 * finishes or undoes it (rest.c). */
#ifndef SANDMAN_SANDBOX_REST_RECORD_H
#define SANDMAN_SANDBOX_REST_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include <sandman/engine.h>
#include <sandman/error.h>
#include <sandman/keep.h>

typedef struct sandbox_rest_record {
  char state[SM_REST_STATE_MAX];   /* running, frozen, stopped, hibernated */
  char pending[SM_REST_STATE_MAX]; /* "" or the state a change was going to */
  char prior[SM_REST_STATE_MAX];   /* with pending: the state before it */
  double since;                    /* when state began (epoch) */
  char id[SM_ENGINE_ID_MAX];       /* the container that holds it */
  char next_id[SM_ENGINE_ID_MAX];  /* hibernating: the container it comes back in */
  char origin[SM_ENGINE_ID_MAX];   /* the sandbox's first container (its id for callers) */
  int64_t workspace_bytes;         /* the saved /workspace, when there is one */
  unsigned generation;             /* +1 each time its processes start again */
  int ws_saved;                    /* the saved /workspace is complete */
} sandbox_rest_record;

/* SM_ENOTFOUND (err untouched) when the sandbox has none. */
int sandbox_rest_read(const char *state_dir, const char *name, sandbox_rest_record *out,
                      sm_error *err);
int sandbox_rest_write(const char *state_dir, const char *name, const sandbox_rest_record *r,
                       sm_error *err);
/* The same, not flushed to disk (common_file_replace_quick): for a change
 * that a machine's crash undoes anyway (a thaw: the engine comes back with
 * its containers stopped). */
int sandbox_rest_write_quick(const char *state_dir, const char *name, const sandbox_rest_record *r,
                             sm_error *err);
/* The record and the saved /workspace go (its sandbox was removed). */
void sandbox_rest_drop(const char *state_dir, const char *name);
/* Removes what a save of its /workspace cut short left (<name>.ws.tar.tmp-*:
 * the key lock held, no save of it runs). */
void sandbox_rest_sweep(const char *state_dir, const char *name);
/* <state>/rest/<name>.ws.tar; the folder is made. */
int sandbox_rest_ws_path(const char *state_dir, const char *name, char *out, size_t len,
                         sm_error *err);

#endif
