/* Per-sandbox limits of host tools: calls in flight and calls per minute,
 * keyed by the sandbox's container id and the tool. */
#ifndef SANDMAN_BROKER_LIMITS_H
#define SANDMAN_BROKER_LIMITS_H

#include <stddef.h>

typedef struct bk_limits bk_limits;

int broker_limits_new(bk_limits **out);
void broker_limits_free(bk_limits *l);
/* Takes a slot for one call: 0, or -1 with why ("rate" or "concurrency")
 * when the sandbox is at the tool's limit. now: seconds. */
int broker_limits_enter(bk_limits *l, const char *sandbox, const char *tool, int concurrency,
                        int rate, double now, const char **why);
void broker_limits_leave(bk_limits *l, const char *sandbox, const char *tool);

#endif
