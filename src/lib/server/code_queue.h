/* The turns of code runs on the runner (code_queue.c): runs of one context
 * go one at a time in the order they came, and a sandbox holds at most a
 * limit of runs waiting or running (its contexts together), so a client
 * cannot pile up call threads or agent sessions on one sandbox. */
#ifndef SANDMAN_SERVER_CODE_QUEUE_H
#define SANDMAN_SERVER_CODE_QUEUE_H

#include <stddef.h>

#include <sandman/error.h>

typedef struct code_queue code_queue;
typedef struct code_ticket code_ticket;

code_queue *server_code_queue_new(void);
void server_code_queue_free(code_queue *q);

/* Takes a place for a run of context `context` in sandbox `sandbox` (any
 * string naming it) and waits for its turn. SM_EBUSY (nothing taken) when
 * the sandbox already holds max runs; SM_ECANCELLED when *cancel became
 * set while it waited (err says which). *waited_ms: how long it waited. */
int server_code_queue_enter(code_queue *q, const char *sandbox, const char *context, size_t max,
                            volatile int *cancel, code_ticket **out, double *waited_ms,
                            sm_error *err);
/* How many runs of context `context` in sandbox `sandbox` wait for their
 * turn (the one running, if any, not counted). */
size_t server_code_queue_waiting(code_queue *q, const char *sandbox, const char *context);
/* The run is over: the next one of its context goes. */
void server_code_queue_leave(code_queue *q, code_ticket *t);

#endif
