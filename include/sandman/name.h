/* sandman: the names that come from outside (projects, runs, agents, ...). */
#ifndef SANDMAN_NAME_H
#define SANDMAN_NAME_H

#include <sandman/export.h>

#include <sandman/error.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Names that come from outside (project, run id, worker id, agent, user,
 * tool): one character set for the command line, the runner's API and the
 * library alike, because they end up in keys, labels and log lines.
 * 1..SM_NAME_LEN_MAX bytes of letters, digits and _ . : @ + = -, not
 * starting with '-' or '.'. */
#define SM_NAME_LEN_MAX 128
SM_API int sm_name_valid(const char *s);
/* 0, or SM_EINVAL "<what> ... must be ..." (the value shown with anything
 * unprintable replaced, so a message cannot carry a forged line). */
SM_API int sm_name_check(const char *what, const char *s, sm_error *err);

#ifdef __cplusplus
}
#endif
#endif
