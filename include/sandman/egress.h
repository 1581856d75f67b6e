/* sandman: egress by allowlist (docs/network.md).
 *
 * A sandbox in network mode allowlist joins an internal network of its
 * project (no route out, no outside DNS) on which sandman's egress proxy
 * (sandman-egress, one container per instance) is the only way out. The
 * proxy decides per connection from the sandbox's policy, which sandman
 * writes into it keyed by the sandbox's address on that network; its
 * decisions come back through its container log into the audit trail.
 *
 * Everything goes through the Engine API, so it works the same with a
 * local engine, a remote one over TLS, or a runner. Functions take an
 * engine client of the calling thread. */
#ifndef SANDMAN_EGRESS_H
#define SANDMAN_EGRESS_H

#include <stddef.h>

#include <sandman/audit.h>
#include <sandman/engine.h>
#include <sandman/error.h>
#include <sandman/export.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SM_EGRESS_PROXY_ALIAS "sandman-egress"
#define SM_EGRESS_PROXY_PORT 3128
#define SM_EGRESS_NAME_MAX 160

/* The proxy of an instance (the configuration's egress_proxy section). */
typedef struct sm_egress_proxy_options {
  const char *instance;       /* NULL: $SANDMAN_INSTANCE, else "default" */
  const char *state_dir;      /* NULL: sm_state_default_dir */
  const char *network;        /* its outbound network; NULL: "bridge" */
  const char *const *hosts;   /* "name=address" pinned for its resolver; may be NULL */
  size_t n_hosts;
  int max_connections;        /* 0: 512 */
  int max_per_sandbox;        /* 0: 64 */
  int idle_timeout_s;         /* 0: 300 */
  int connect_timeout_s;      /* 0: 10 */
} sm_egress_proxy_options;

#define SM_EGRESS_PROXY_OPTIONS_INIT {NULL, NULL, NULL, NULL, 0, 0, 0, 0, 0}

/* An owned, reference-counted copy of proxy options (a runner's, swapped
 * on a configuration reload while calls in flight keep theirs). */
typedef struct sm_egress_settings sm_egress_settings;
SM_API int sm_egress_settings_new(sm_egress_settings **out, const sm_egress_proxy_options *opts,
                                  sm_error *err);
SM_API sm_egress_settings *sm_egress_settings_ref(sm_egress_settings *settings);
SM_API void sm_egress_settings_unref(sm_egress_settings *settings);
/* Borrowed for as long as the reference is held. */
SM_API const sm_egress_proxy_options *sm_egress_settings_options(const sm_egress_settings *settings);

/* A runtime that can carry network mode allowlist: SM_EUNSUPPORTED when the
 * engine registers it with --network=none (gVisor as `runsc`; use
 * `runsc-net`, docs/network.md#gvisor). "" is the engine's default. */
SM_API int sm_egress_runtime_check(sm_engine *engine, const char *runtime, sm_error *err);

/* Where a sandbox of a project goes: its internal network and the proxy. */
typedef struct sm_egress_net {
  char network[SM_EGRESS_NAME_MAX]; /* join this network (and no other) */
  char subnet[64];                  /* its IPv4 range, "172.30.0.0/16" */
  char proxy_url[64];               /* "http://sandman-egress:3128" */
  char proxy_id[SM_ENGINE_ID_MAX];  /* the proxy container */
} sm_egress_net;

/* Makes sure the instance's proxy runs (making its image from the binary in
 * the library, its policy volume and its container, or replacing a proxy
 * whose settings differ) and that the project's internal network exists
 * with the proxy on it. Idempotent; safe from several processes at once. */
SM_API int sm_egress_prepare(sm_engine *engine, const sm_egress_proxy_options *opts,
                             const char *project, sm_egress_net *out, sm_error *err);

/* One level of rules, in the order they narrow ("defaults", then
 * "agents.<name>"): a destination must match an allow pattern of every
 * level that has one, and no deny pattern of any level. */
typedef struct sm_egress_level {
  const char *name;
  const char *const *allow;
  size_t n_allow;
  const char *const *deny;
  size_t n_deny;
} sm_egress_level;

/* A sandbox's egress policy. Names are written as they are (no spaces or
 * control bytes; "" or NULL for none). */
typedef struct sm_egress_policy {
  const char *sandbox, *agent, *project, *run_id, *worker;
  const sm_egress_level *levels;
  size_t n_levels;
} sm_egress_policy;

/* Checks one pattern ("pypi.org", "*.pythonhosted.org:443", "10.0.0.0/8").
 * SM_EINVAL with the reason. */
SM_API int sm_egress_pattern_check(const char *pattern, sm_error *err);

/* 0 if addr is an IPv4 or IPv6 address (no brackets), else -1. */
SM_API int sm_egress_address_check(const char *addr);

/* Writes the policy of a container attached to net into the proxy, keyed by
 * the container's address on that network (read from the engine), with the
 * engine's own addresses and networks to refuse. Replaces what was there:
 * connections opened from then on are judged by it. */
SM_API int sm_egress_set_policy(sm_engine *engine, const sm_egress_proxy_options *opts,
                                const sm_egress_net *net, const char *container,
                                const sm_egress_policy *policy, sm_error *err);
/* Revokes what the container's address may reach (before it is removed, so
 * that a later sandbox given the same address starts with nothing). */
SM_API int sm_egress_revoke(sm_engine *engine, const sm_egress_proxy_options *opts,
                            const sm_egress_net *net, const char *container, sm_error *err);

/* The variables a tool in the sandbox needs: HTTP_PROXY, HTTPS_PROXY,
 * NO_PROXY and their lower-case forms, "NAME=value" into out (n entries,
 * each at most 128 bytes). Returns how many. */
#define SM_EGRESS_ENV_COUNT 6
SM_API size_t sm_egress_env(const sm_egress_net *net, char out[][128], size_t n);

/* Moves the proxy's decisions logged since the last collection into the
 * audit trail (egress.allowed, egress.denied, egress.failed), under a lock
 * so that several processes never record one twice. No proxy: nothing.
 * *out_n (may be NULL) gets the number recorded. */
SM_API int sm_egress_collect(sm_engine *engine, const sm_egress_proxy_options *opts,
                             sm_audit *audit, size_t *out_n, sm_error *err);

/* Removes the instance's proxy, its internal networks (those no other
 * container uses) and its policy volume. */
SM_API int sm_egress_teardown(sm_engine *engine, const sm_egress_proxy_options *opts,
                              sm_error *err);

#ifdef __cplusplus
}
#endif
#endif
