/* Calls that wait for an operator (`approval: required`). */
#ifndef SANDMAN_BROKER_APPROVALS_H
#define SANDMAN_BROKER_APPROVALS_H

#include <json-c/json.h>

#include <sandman/error.h>

typedef struct bk_approvals bk_approvals;

typedef enum { BK_APPROVED, BK_DENIED, BK_EXPIRED, BK_ABANDONED } bk_verdict;

int broker_approvals_new(bk_approvals **out);
/* Wakes every waiter (BK_ABANDONED) and refuses new ones. */
void broker_approvals_close(bk_approvals *a);
/* Closes, then frees the table once the waiters left. */
void broker_approvals_free(bk_approvals *a);

typedef struct bk_approval_req {
  const char *tool, *agent, *sandbox, *call_id;
  json_object *arguments; /* masked; taken (put when the approval ends) */
  double timeout_s;
  volatile int *cancel;
} bk_approval_req;

/* Publishes an approval (its id into id[33]) through on_open, then waits
 * until it is answered, expires or the caller goes away. who: the operator
 * who answered ("" otherwise). */
bk_verdict broker_approvals_wait(bk_approvals *a, const bk_approval_req *req,
                                 void (*on_open)(void *ud, const char *id), void *ud, char id[33],
                                 char who[128]);
/* The pending ones (see sm_broker_approvals). */
json_object *broker_approvals_list(bk_approvals *a);
/* SM_ENOTFOUND when no such approval is pending. */
int broker_approvals_answer(bk_approvals *a, const char *id, int approve, const char *who,
                            sm_error *err);

#endif
