/* Internal to src/egress: what the topology, the policy writer and the
 * collector share (the pure policy and request code is in policy.h and
 * http.h, also built into the proxy). */
#ifndef SANDMAN_EGRESS_INTERNAL_H
#define SANDMAN_EGRESS_INTERNAL_H

#include <stddef.h>
#include <sys/types.h>

#include <sandman/egress.h>

#include "common/buf.h"

#define EG_LABEL "io.sandman.egress"

/* ---- a one-file tar stream in memory (tarball.c) ---- */
typedef struct eg_tar {
  char *data;
  size_t len, off;
} eg_tar;

/* 0, or -1 (name over 99 bytes, out of memory). */
int eg_tar_one(eg_tar *t, const char *name, unsigned mode, const void *data, size_t len);
ssize_t eg_tar_read(void *ud, char *buf, size_t len); /* an sm_read_fn */
void eg_tar_dispose(eg_tar *t);

/* ---- names (topology.c) ---- */
/* The instance (opts, else $SANDMAN_INSTANCE, else "default"), checked. */
int eg_instance(const sm_egress_proxy_options *opts, char *out, size_t len, sm_error *err);
void eg_proxy_name(const char *instance, char *out, size_t len);

/* ---- the policy file's text (policy_file.c) ---- */
typedef struct eg_block_in {
  char cidr[64];
  char why[32];
} eg_block_in;

/* The policy file for a sandbox (format in policy.c). Patterns are checked;
 * a name with a space or a control byte is SM_EINVAL. */
int eg_policy_text(sm_buf *out, const sm_egress_policy *p, const char *subnet,
                   const eg_block_in *blocks, size_t n_blocks, sm_error *err);
/* The text that refuses everything: a revoked address. */
int eg_policy_revoked_text(sm_buf *out, const char *subnet, sm_error *err);

/* ---- the proxy's log lines (collect.c) ---- */
/* One log line of the proxy ("TIMESTAMP JSON") as an audit event. Returns
 * 1 recorded, 0 not an event (proxy.ready...), <0 error. */
int eg_collect_line(sm_audit *audit, const char *line, size_t len, sm_error *err);
/* "2026-11-23T20:29:01.123456789Z" -> seconds and nanoseconds; -1 on garbage. */
int eg_parse_log_time(const char *s, size_t len, long long *sec, long *nsec);

#endif
