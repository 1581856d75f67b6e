/* The policy file sandman writes into a sandbox's relay, which hands it to
 * the proxy with each connection (the format is parsed by egress_policy_parse
 * in policy.c, in the proxy). */
#include <stdio.h>
#include <string.h>

#include "egress/egress_internal.h"
#include "egress/egress_policy.h"

int sm_egress_pattern_check(const char *pattern, sm_error *err) {
  if (pattern == NULL) return sm_error_set(err, SM_EINVAL, "no pattern");
  eg_pattern p;
  char why[EG_WHY_MAX];
  if (egress_pattern_parse(pattern, &p, why, sizeof why) != 0)
    return sm_error_set(err, SM_EINVAL, "'%s' is not a host pattern: %s", pattern, why);
  return 0;
}

int sm_egress_address_check(const char *addr) {
  eg_addr a;
  return addr && egress_addr_parse(addr, &a) == 0 ? 0 : -1;
}

/* Names go on one line after a space: nothing that could end or split it. */
static int id_line(common_buf *out, const char *key, const char *v, sm_error *err) {
  if (v == NULL || *v == '\0') v = "-";
  size_t n = strlen(v);
  if (n >= EG_ID_MAX) return sm_error_set(err, SM_EINVAL, "egress policy: %s too long", key);
  for (const char *c = v; *c; c++)
    if ((unsigned char)*c <= 0x20 || (unsigned char)*c >= 0x7f || *c == '"' || *c == '\\')
      return sm_error_set(err, SM_EINVAL, "egress policy: %s '%s' holds a space, quote or control byte", key, v);
  if (common_buf_printf(out, "%s %s\n", key, v) != 0)
    return sm_error_set(err, SM_ETOOBIG, "egress policy over %d bytes", EG_POLICY_MAX_BYTES);
  return 0;
}

int egress_policy_text(common_buf *out, const sm_egress_policy *p, const eg_block_in *blocks,
                       size_t n_blocks, sm_error *err) {
  int rc = 0;
  if (common_buf_printf(out, "sandman-egress-policy 2\n") != 0)
    return sm_error_set(err, SM_ENOMEM, "egress policy");
  if ((rc = id_line(out, "sandbox", p->sandbox, err)) || (rc = id_line(out, "agent", p->agent, err)) ||
      (rc = id_line(out, "project", p->project, err)) || (rc = id_line(out, "run", p->run_id, err)) ||
      (rc = id_line(out, "worker", p->worker, err)))
    return rc;
  if (n_blocks > EG_POLICY_MAX_BLOCKS) n_blocks = EG_POLICY_MAX_BLOCKS;
  for (size_t i = 0; i < n_blocks; i++)
    if (common_buf_printf(out, "block %s %s\n", blocks[i].cidr, blocks[i].why) != 0)
      return sm_error_set(err, SM_ETOOBIG, "egress policy too large");
  if (p->n_levels > EG_POLICY_MAX_LEVELS)
    return sm_error_set(err, SM_EINVAL, "egress policy: more than %d levels", EG_POLICY_MAX_LEVELS);
  size_t rules = 0;
  for (size_t l = 0; l < p->n_levels; l++) {
    const sm_egress_level *lv = &p->levels[l];
    if ((rc = id_line(out, "level", lv->name, err))) return rc;
    for (int pass = 0; pass < 2; pass++) {
      const char *const *list = pass ? lv->deny : lv->allow;
      size_t n = pass ? lv->n_deny : lv->n_allow;
      for (size_t i = 0; i < n; i++) {
        if ((rc = sm_egress_pattern_check(list[i], err))) {
          sm_error_wrap(err, "%s.egress.%s", lv->name, pass ? "deny" : "allow");
          return rc;
        }
        if (++rules > EG_POLICY_MAX_RULES)
          return sm_error_set(err, SM_EINVAL, "egress policy: more than %d patterns", EG_POLICY_MAX_RULES);
        if (common_buf_printf(out, "%s %s\n", pass ? "deny" : "allow", list[i]) != 0)
          return sm_error_set(err, SM_ETOOBIG, "egress policy over %d bytes", EG_POLICY_MAX_BYTES);
      }
    }
  }
  if (common_buf_printf(out, "end\n") != 0)
    return sm_error_set(err, SM_ETOOBIG, "egress policy too large");
  return 0;
}

size_t sm_egress_env(const sm_egress_net *net, char out[][128], size_t n) {
  static const char *const names[SM_EGRESS_ENV_COUNT] = {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy",
                                                         "https_proxy", "NO_PROXY",   "no_proxy"};
  size_t k = 0;
  for (size_t i = 0; i < SM_EGRESS_ENV_COUNT && k < n; i++, k++)
    snprintf(out[k], 128, "%s=%s", names[i], i < 4 ? net->proxy_url : "localhost,127.0.0.1,::1");
  return k;
}
