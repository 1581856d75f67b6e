/* sandman: egress by allowlist (docs/network.md).
 *
 * A sandbox in network mode allowlist has no network of its own (network
 * mode none: nothing but its loopback). Its one way out is its relay: a
 * container of sandman's own that shares the sandbox's network namespace
 * and nothing else, listens on the sandbox's loopback and carries each
 * connection over a unix socket to the instance's egress proxy
 * (sandman-egress, one container per instance, on its outbound network).
 * The proxy decides per connection by the sandbox's policy, which sandman
 * writes into the sandbox's relay and the relay hands over with each
 * connection; its decisions come back through its container log into the
 * audit trail. No address the engine host holds is on the sandbox's side.
 *
 * Everything goes through the Engine API, so it works the same with a
 * local engine, a remote one over TLS, docker-in-docker, or a runner.
 * Functions take an engine client of the calling thread. */
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

#define SM_EGRESS_PROXY_PORT 3128 /* the relay's, on the sandbox's loopback */
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

/* What a sandbox in allowlist mode is given: the network mode to create it
 * with (SM_EGRESS_SANDBOX_NETWORK) and the proxy variables' URL. */
#define SM_EGRESS_SANDBOX_NETWORK "none"
typedef struct sm_egress_net {
  char proxy_url[64];              /* "http://127.0.0.1:3128": the relay, on the sandbox's loopback */
  char proxy_id[SM_ENGINE_ID_MAX]; /* the proxy container */
} sm_egress_net;

/* Makes sure the instance's proxy runs (making its image from the binary in
 * the library, the volume of its socket and its container, or replacing a
 * proxy whose settings differ). Idempotent; safe from several processes at
 * once. */
SM_API int sm_egress_prepare(sm_engine *engine, const sm_egress_proxy_options *opts, sm_egress_net *out,
                             sm_error *err);

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

/* Gives a running container (created with SM_EGRESS_SANDBOX_NETWORK) its
 * relay, made if missing, or made again when the container was restarted
 * since (a new network namespace) or the proxy's settings changed, and
 * writes the container's policy into it, with the engine's own addresses
 * and networks to refuse. Replaces what was there: connections opened from
 * then on are judged by it. */
SM_API int sm_egress_set_policy(sm_engine *engine, const sm_egress_proxy_options *opts,
                                const sm_egress_net *net, const char *container,
                                const sm_egress_policy *policy, sm_error *err);
/* Removes the relay of the sandbox named sandbox: from then on the sandbox
 * reaches nothing, and its open connections end. No relay: 0. Called when a
 * sandbox is removed. */
SM_API int sm_egress_revoke(sm_engine *engine, const char *sandbox, sm_error *err);
/* Removes the instance's relays whose sandbox is gone (removed by hand, or
 * by a process that died on the way); *out_n (may be NULL) gets how many. */
SM_API int sm_egress_sweep(sm_engine *engine, const sm_egress_proxy_options *opts, size_t *out_n,
                           sm_error *err);

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

/* Removes the instance's proxy, its relays, the volume of its socket, and
 * what an older sandman made for it (internal networks, a policy volume). */
SM_API int sm_egress_teardown(sm_engine *engine, const sm_egress_proxy_options *opts,
                              sm_error *err);

#ifdef __cplusplus
}
#endif
#endif
