/* Network mode allowlist, the sandbox's side (docs/network.md): before a
 * sandbox is created (with no network: SM_EGRESS_SANDBOX_NETWORK), the
 * proxy and the proxy variables; once it runs, and on every later call, its
 * relay and its policy in it. The work itself is in src/lib/egress. */
#include <stdio.h>
#include <string.h>

#include <sandman/egress.h>
#include <sandman/log.h>

#include "sandbox/network.h"

int sandbox_allowlist(const sm_sandbox_settings *s) { return strcmp(s->network, "allowlist") == 0; }

int sandbox_egress_prepare(sm_egress_settings *st, sm_engine *e, const sm_run_request *req,
                           sm_egress_net *net, common_strv *env, sm_error *err) {
  int rc = sm_egress_runtime_check(e, req->settings.runtime, err);
  if (rc != 0) {
    sm_egress_settings_unref(st);
    return rc;
  }
  rc = sm_egress_prepare(e, sm_egress_settings_options(st), net, err);
  sm_egress_settings_unref(st);
  if (rc != 0) return sm_error_wrap(err, "network allowlist");
  char vars[SM_EGRESS_ENV_COUNT][128];
  size_t n = sm_egress_env(net, vars, SM_EGRESS_ENV_COUNT);
  for (size_t i = 0; i < n; i++)
    if (common_strv_add(env, vars[i]) != 0)
      return sm_error_set(err, SM_ENOMEM, "network allowlist: out of memory");
  return 0;
}

int sandbox_egress_apply(sm_egress_settings *st, sm_engine *e, const sm_run_request *req, const sm_egress_net *known,
                         const char *cid, const char *name, sm_error *err) {
  sm_egress_net net;
  const sm_egress_proxy_options *po = sm_egress_settings_options(st);
  int rc = 0;
  /* A sandbox found again: the proxy may have changed meanwhile (replaced,
   * or removed). Making sure is idempotent. */
  if (known) net = *known;
  else rc = sm_egress_prepare(e, po, &net, err);
  sm_egress_policy p = {name, req->agent, req->project, req->run_id, req->worker_id, req->egress, req->n_egress};
  if (rc == 0) rc = sm_egress_set_policy(e, po, &net, cid, &p, err);
  sm_egress_settings_unref(st);
  if (rc != 0) return sm_error_wrap(err, "network allowlist: the policy of %s", name);
  return 0;
}
