/* Random ids of the broker (approvals, host tool calls). */
#ifndef SANDMAN_BROKER_IDS_H
#define SANDMAN_BROKER_IDS_H

#include <stddef.h>

/* prefix then 2*bytes hex digits from getrandom into out (len must fit). */
void broker_random_id(char *out, size_t len, const char *prefix, size_t bytes);

#endif
