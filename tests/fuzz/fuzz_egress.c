/* Fuzz target: everything the egress proxy parses from outside: the client's
 * request head (and the head it would send upstream), authorities, patterns
 * and policy files, then a decision with what parsed. The first byte picks
 * the parser so that one corpus covers them all. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "egress/egress_http.h"
#include "egress/egress_policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_dest(const eg_dest *d) {
  if (strlen(d->host) > EG_HOST_MAX) abort();
  if (d->port < 0 || d->port > 65535) abort();
  if (d->is_addr && d->addr.family != 4 && d->addr.family != 6) abort();
  for (const char *p = d->host; *p; p++)
    if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  int which = data[0] % 4;
  const char *text = (const char *)data + 1;
  size_t len = size - 1;
  char why[EG_WHY_MAX];
  if (which == 0) {
    eg_request r;
    int rc = egress_request_parse(text, len, &r, why, sizeof why);
    if (rc == 1) {
      if (r.head_len > len || r.head_len > EG_HEAD_MAX) abort();
      check_dest(&r.target);
      if (r.target.port == 0) abort();
      if (!r.is_connect && r.path_off + r.path_len > r.head_len) abort();
      static char out[EG_HEAD_MAX + 512];
      long n = egress_request_upstream_head(text, &r, out, sizeof out);
      if (n > (long)sizeof out) abort();
      /* What goes upstream never carries proxy credentials. */
      if (n > 0 && memmem(out, (size_t)n, "\r\nProxy-Authorization:", 22)) abort();
    }
    if (rc < -2 || rc > 1) abort();
  } else if (which == 1) {
    eg_dest d;
    if (egress_authority_parse(text, len, (int)(len % 3) - 1, &d, why, sizeof why) == 0)
      check_dest(&d);
  } else {
    char *s = malloc(len + 1);
    if (s == NULL) return 0;
    memcpy(s, text, len);
    s[len] = '\0';
    if (which == 2) {
      eg_pattern p;
      if (egress_pattern_parse(s, &p, why, sizeof why) == 0) {
        if (p.kind < EG_PAT_NAME || p.kind > EG_PAT_ADDR) abort();
        eg_dest d;
        if (egress_authority_parse("pypi.org:443", 12, -1, &d, why, sizeof why) == 0)
          (void)egress_pattern_match_dest(&p, &d);
      }
    } else {
      eg_policy pol;
      if (egress_policy_parse(s, len, &pol, why, sizeof why) == 0) {
        if (pol.n_allow > EG_POLICY_MAX_RULES || pol.n_levels > EG_POLICY_MAX_LEVELS) abort();
        eg_dest d;
        char rule[EG_WHY_MAX];
        if (egress_authority_parse("files.pythonhosted.org:443", 26, -1, &d, why, sizeof why) == 0)
          (void)egress_policy_decide(&pol, &d, rule, sizeof rule);
        eg_addr a;
        if (egress_addr_parse("169.254.169.254", &a) == 0 &&
            egress_policy_addr_ok(&pol, &a, 80, rule, sizeof rule)) {
          /* The metadata address is usable only when an allow address pattern lists it. */
          int listed = 0;
          for (size_t i = 0; i < pol.n_allow; i++)
            listed |= egress_pattern_match_addr(&pol.allow[i].pat, &a, 80);
          if (!listed) abort();
        }
        egress_policy_dispose(&pol);
      }
    }
    free(s);
  }
  return 0;
}
