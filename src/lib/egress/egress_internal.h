/* Internal to src/lib/egress: what the topology (the proxy), the relays, the
 * policy writer and the collector share (the pure policy and request code
 * is in policy.h and http.h, also built into sandman-egress). */
#ifndef SANDMAN_EGRESS_INTERNAL_H
#define SANDMAN_EGRESS_INTERNAL_H

#include <stddef.h>
#include <sys/types.h>

#include <json-c/json.h>

#include <sandman/egress.h>

#include "common/buf.h"

/* io.sandman.egress=<role> on everything below (proxy, relay, socket,
 * image; network and policy on what older sandmans made), with
 * io.sandman.egress-config (a hash of what a container is made from) and,
 * on a relay, io.sandman.egress-sandbox (its sandbox's id). */
#define EG_LABEL "io.sandman.egress"
#define EG_SOCKET_DIR "/run/sandman-egress"  /* the socket volume, in the proxy and in every relay */
#define EG_SOCKET_PATH EG_SOCKET_DIR "/proxy.sock"
#define EG_RELAY_POLICY "sandman-egress-policy" /* the policy file, at the root of a relay */
#define EG_RELAY_SUFFIX "-egress"            /* a relay is named <sandbox name>-egress */

/* ---- a one-file tar stream in memory (tarball.c) ---- */
typedef struct eg_tar {
  char *data;
  size_t len, off;
} eg_tar;

/* 0, or -1 (name over 99 bytes, out of memory). */
int egress_tar_one(eg_tar *t, const char *name, unsigned mode, const void *data, size_t len);
ssize_t egress_tar_read(void *ud, char *buf, size_t len); /* an sm_read_fn */
void egress_tar_dispose(eg_tar *t);

/* ---- names, labels and waiting (objects.c) ---- */
/* The instance (opts, else $SANDMAN_INSTANCE, else "default"), checked. */
int egress_instance(const sm_egress_proxy_options *opts, char *out, size_t len, sm_error *err);
void egress_proxy_name(const char *instance, char *out, size_t len);
void egress_image_ref(char *out, size_t len); /* sandman/egress:<hash of the binary> */
/* managed, instance and EG_LABEL=role. */
json_object *egress_labels_new(const char *instance, const char *role);
/* The socket volume's mount (a tmpfs of the proxy's user, 0700), read-only
 * for a relay. Whoever mounts it first makes it. */
json_object *egress_socket_mount(const char *instance, int read_only);
void egress_socket_volume(const char *instance, char *out, size_t len);
/* A string at a path of at most three keys, or NULL. */
const char *egress_jstr(json_object *o, const char *a, const char *b, const char *c);
/* The engine's times, "2026-11-23T20:29:01.123456789Z" (log lines,
 * StartedAt) -> seconds and nanoseconds; -1 on garbage. */
int egress_parse_log_time(const char *s, size_t len, long long *sec, long *nsec);
/* A container's State.StartedAt: 0, or -1 (none). */
int egress_started_at(json_object *info, long long *sec, long *nsec);
/* Waits until container id logs the line of event ("proxy.ready",
 * "relay.ready"), for at most 10 s; fails at once when it stops. */
int egress_wait_ready(sm_engine *e, const char *id, const char *event, sm_error *err);
void egress_settings_hash(const char *text, char out[17]);

/* ---- the policy file's text (policy_file.c) ---- */
typedef struct eg_block_in {
  char cidr[64];
  char why[32];
} eg_block_in;

/* The policy file for a sandbox (format in policy.c). Patterns are checked;
 * a name with a space or a control byte is SM_EINVAL. */
int egress_policy_text(common_buf *out, const sm_egress_policy *p, const eg_block_in *blocks,
                       size_t n_blocks, sm_error *err);

/* The engine host's addresses and the engine's networks' ranges, for the
 * policy's block lines (blocks.c). Returns how many (at most cap). */
size_t egress_engine_blocks(sm_engine *e, eg_block_in *out, size_t cap);

/* ---- the proxy's log lines (collect.c) ---- */
/* One log line of the proxy ("TIMESTAMP JSON") as an audit event. Returns
 * 1 recorded, 0 not an event (proxy.ready...), <0 error. */
int egress_collect_line(sm_audit *audit, const char *line, size_t len, sm_error *err);

#endif
