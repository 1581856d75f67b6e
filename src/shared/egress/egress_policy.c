/* Egress policy: patterns, destinations, address classes, the policy file
 * and the decision (egress_policy.h). libc only: also built into the static proxy. */
#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egress/egress_policy.h"

int egress_fail(char *why, size_t len, const char *fmt, ...) {
  if (why && len) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, len, fmt, ap);
    va_end(ap);
  }
  return -1;
}

static char lower(char c) { return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c; }
static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_alnum(char c) { return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

/* ---- addresses ---- */

int egress_addr_parse(const char *s, eg_addr *out) {
  memset(out, 0, sizeof *out);
  if (strchr(s, ':')) {
    if (inet_pton(AF_INET6, s, out->b) != 1) return -1;
    out->family = 6;
    return 0;
  }
  /* inet_pton takes dotted decimal only (no octal or short forms). */
  if (inet_pton(AF_INET, s, out->b) != 1) return -1;
  out->family = 4;
  return 0;
}

void egress_addr_format(const eg_addr *a, char *buf, size_t len) {
  if (inet_ntop(a->family == 6 ? AF_INET6 : AF_INET, a->b, buf, (socklen_t)len) == NULL && len)
    buf[0] = '\0';
}

int egress_addr_in(const eg_addr *a, const eg_addr *net, int prefix) {
  if (a->family != net->family) return 0;
  int bits = a->family == 6 ? 128 : 32;
  if (prefix < 0 || prefix > bits) return 0;
  int full = prefix / 8, rest = prefix % 8;
  if (memcmp(a->b, net->b, (size_t)full) != 0) return 0;
  if (rest == 0) return 1;
  unsigned char mask = (unsigned char)(0xff << (8 - rest));
  return (a->b[full] & mask) == (net->b[full] & mask);
}

typedef struct special_range {
  int family;
  const char *net;
  int prefix;
  const char *what;
} special_range;

/* IANA special-purpose registries: everything not global unicast. */
static const special_range specials[] = {
    {4, "0.0.0.0", 8, "unspecified (\"this network\")"},
    {4, "10.0.0.0", 8, "private"},
    {4, "100.64.0.0", 10, "shared (CGNAT)"},
    {4, "127.0.0.0", 8, "loopback"},
    {4, "169.254.0.0", 16, "link-local (cloud metadata)"},
    {4, "172.16.0.0", 12, "private"},
    {4, "192.0.0.0", 24, "IETF protocol assignments"},
    {4, "192.0.2.0", 24, "documentation"},
    {4, "192.88.99.0", 24, "6to4 relay"},
    {4, "192.168.0.0", 16, "private"},
    {4, "198.18.0.0", 15, "benchmarking"},
    {4, "198.51.100.0", 24, "documentation"},
    {4, "203.0.113.0", 24, "documentation"},
    {4, "224.0.0.0", 4, "multicast"},
    {4, "240.0.0.0", 4, "reserved"},
    {6, "::", 128, "unspecified"},
    {6, "::1", 128, "loopback"},
    {6, "::ffff:0:0", 96, "IPv4-mapped"},
    {6, "64:ff9b::", 96, "NAT64"},
    {6, "64:ff9b:1::", 48, "NAT64 (local)"},
    {6, "100::", 64, "discard"},
    {6, "2001::", 23, "IETF protocol assignments"},
    {6, "2001:db8::", 32, "documentation"},
    {6, "2002::", 16, "6to4"},
    {6, "fc00::", 7, "private (unique local)"},
    {6, "fe80::", 10, "link-local"},
    {6, "fec0::", 10, "site-local (deprecated)"},
    {6, "ff00::", 8, "multicast"},
};

const char *egress_addr_special(const eg_addr *a) {
  for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++) {
    if (specials[i].family != a->family) continue;
    eg_addr net;
    if (egress_addr_parse(specials[i].net, &net) != 0) continue;
    if (egress_addr_in(a, &net, specials[i].prefix)) return specials[i].what;
  }
  /* Global unicast (2000::/3) is the only IPv6 space in use; the rest is
   * unassigned. */
  if (a->family == 6 && (a->b[0] & 0xe0) != 0x20) return "reserved";
  return NULL;
}

/* ---- hosts and authorities ---- */

int egress_host_parse(const char *host, size_t len, int brackets, eg_dest *out, char *why,
                      size_t why_len) {
  memset(out, 0, sizeof *out);
  char buf[EG_HOST_MAX + 2];
  if (len == 0) return egress_fail(why, why_len, "empty host");
  if (brackets) {
    if (len > 47) return egress_fail(why, why_len, "IPv6 address too long");
    memcpy(buf, host, len);
    buf[len] = '\0';
    if (strchr(buf, '%'))
      return egress_fail(why, why_len, "zone ids are not allowed in an address");
    if (egress_addr_parse(buf, &out->addr) != 0 || out->addr.family != 6)
      return egress_fail(why, why_len, "'[%s]' is not an IPv6 address", buf);
    out->is_addr = 1;
    egress_addr_format(&out->addr, out->host, sizeof out->host);
    return 0;
  }
  if (len > EG_HOST_MAX + 1)
    return egress_fail(why, why_len, "host name longer than %d", EG_HOST_MAX);
  for (size_t i = 0; i < len; i++) {
    char c = host[i];
    if (!(is_alnum(c) || c == '-' || c == '.' || c == '_'))
      return egress_fail(why, why_len,
                         "host name holds '%s%c' (letters, digits, '-', '_' and '.' only)",
                         (unsigned char)c < 0x20 || (unsigned char)c > 0x7e ? "\\x" : "",
                         (unsigned char)c < 0x20 || (unsigned char)c > 0x7e ? '?' : c);
    buf[i] = lower(c);
  }
  if (buf[len - 1] == '.') len--; /* one trailing dot: the same name */
  buf[len] = '\0';
  if (len == 0 || len > EG_HOST_MAX) return egress_fail(why, why_len, "bad host name length");
  /* All digits and dots: an IPv4 literal, in dotted decimal only (no
   * 0x7f.1, 2130706433 or 0177.0.0.1 that resolvers would read as loopback). */
  int numeric = 1;
  for (size_t i = 0; i < len; i++)
    if (!is_digit(buf[i]) && buf[i] != '.') numeric = 0;
  if (numeric) {
    if (egress_addr_parse(buf, &out->addr) != 0)
      return egress_fail(why, why_len, "'%s' is not an IPv4 address in dotted decimal", buf);
    for (const char *p = buf; *p; p++) /* leading zeros read as octal elsewhere */
      if (*p == '0' && (p == buf || p[-1] == '.') && is_digit(p[1]))
        return egress_fail(why, why_len, "'%s' has a leading zero (octal?)", buf);
    out->is_addr = 1;
    snprintf(out->host, sizeof out->host, "%s", buf);
    return 0;
  }
  size_t label = 0;
  for (size_t i = 0; i <= len; i++) {
    if (i == len || buf[i] == '.') {
      if (label == 0) return egress_fail(why, why_len, "empty label in host name '%s'", buf);
      if (label > 63) return egress_fail(why, why_len, "label longer than 63 in '%s'", buf);
      if (buf[i - 1] == '-' || buf[i - label] == '-')
        return egress_fail(why, why_len, "a label of '%s' starts or ends with '-'", buf);
      label = 0;
    } else {
      label++;
    }
  }
  /* The last label all digits and hex: a resolver may read 0x7f.1 as an
   * address; names end with a label that has a letter. */
  const char *last = strrchr(buf, '.');
  last = last ? last + 1 : buf;
  int last_digits = 1;
  for (const char *q = last; *q; q++)
    if (!is_digit(*q)) last_digits = 0;
  if (strncmp(last, "0x", 2) == 0 || last_digits)
    return egress_fail(why, why_len, "'%s' looks like a hex or short-form address", buf);
  snprintf(out->host, sizeof out->host, "%s", buf);
  return 0;
}

static int parse_port(const char *s, size_t len, int *out) {
  if (len == 0 || len > 5) return -1;
  int v = 0;
  for (size_t i = 0; i < len; i++) {
    if (!is_digit(s[i])) return -1;
    v = v * 10 + (s[i] - '0');
  }
  if (v < 1 || v > 65535) return -1;
  *out = v;
  return 0;
}

int egress_authority_parse(const char *s, size_t len, int default_port, eg_dest *out, char *why,
                           size_t why_len) {
  memset(out, 0, sizeof *out);
  if (len == 0) return egress_fail(why, why_len, "empty authority");
  if (memchr(s, '@', len))
    return egress_fail(why, why_len, "user info is not allowed in the authority");
  const char *host = s, *port = NULL;
  size_t host_len = len, port_len = 0;
  int brackets = 0;
  if (s[0] == '[') {
    const char *close = memchr(s, ']', len);
    if (close == NULL) return egress_fail(why, why_len, "unclosed '[' in the authority");
    host = s + 1;
    host_len = (size_t)(close - s) - 1;
    brackets = 1;
    size_t after = len - (size_t)(close - s) - 1;
    if (after > 0) {
      if (close[1] != ':') return egress_fail(why, why_len, "garbage after ']' in the authority");
      port = close + 2;
      port_len = after - 1;
    }
  } else {
    const char *colon = memchr(s, ':', len);
    if (colon) {
      if (memchr(colon + 1, ':', len - (size_t)(colon - s) - 1))
        return egress_fail(why, why_len, "an IPv6 address must be in brackets");
      host_len = (size_t)(colon - s);
      port = colon + 1;
      port_len = len - host_len - 1;
    }
  }
  if (egress_host_parse(host, host_len, brackets, out, why, why_len) != 0) return -1;
  if (port) {
    if (parse_port(port, port_len, &out->port) != 0)
      return egress_fail(why, why_len, "bad port '%.*s'", (int)(port_len > 8 ? 8 : port_len), port);
  } else if (default_port > 0) {
    out->port = default_port;
  } else {
    return egress_fail(why, why_len, "the port is required (host:port)");
  }
  return 0;
}

/* ---- patterns ---- */

int egress_pattern_parse(const char *text, eg_pattern *out, char *why, size_t why_len) {
  memset(out, 0, sizeof *out);
  size_t len = strlen(text);
  if (len == 0) return egress_fail(why, why_len, "empty pattern");
  if (len >= sizeof out->text)
    return egress_fail(why, why_len, "pattern longer than %zu", sizeof out->text - 1);
  memcpy(out->text, text, len + 1);
  /* Split off the port: host:port, [v6]:port, [v6/64]:port. */
  const char *host = text, *port = NULL;
  size_t host_len = len;
  int brackets = 0;
  if (text[0] == '[') {
    const char *close = strchr(text, ']');
    if (close == NULL) return egress_fail(why, why_len, "unclosed '['");
    host = text + 1;
    host_len = (size_t)(close - text) - 1;
    brackets = 1;
    if (close[1] == ':') port = close + 2;
    else if (close[1] != '\0') return egress_fail(why, why_len, "garbage after ']'");
  } else {
    const char *colon = strchr(text, ':');
    if (colon) {
      if (strchr(colon + 1, ':'))
        return egress_fail(why, why_len, "an IPv6 address must be in brackets: [%s]", text);
      host_len = (size_t)(colon - text);
      port = colon + 1;
    }
  }
  out->port = EG_PORT_WEB;
  if (port) {
    if (strcmp(port, "*") == 0) out->port = EG_PORT_ANY;
    else if (parse_port(port, strlen(port), &out->port) != 0)
      return egress_fail(why, why_len, "bad port '%s' (1-65535 or *)", port);
  }
  if (host_len == 0) return egress_fail(why, why_len, "no host in '%s'", text);
  char h[EG_HOST_MAX + 2];
  if (host_len > EG_HOST_MAX + 1)
    return egress_fail(why, why_len, "host longer than %d", EG_HOST_MAX);
  memcpy(h, host, host_len);
  h[host_len] = '\0';

  /* An address or a range? */
  char *slash = strchr(h, '/');
  int looks_addr = brackets || slash != NULL;
  if (!looks_addr) {
    int numeric = 1;
    for (const char *p = h; *p; p++)
      if (!is_digit(*p) && *p != '.') numeric = 0;
    looks_addr = numeric;
  }
  if (looks_addr) {
    int bits = -1;
    if (slash) {
      *slash = '\0';
      if (parse_port(slash + 1, strlen(slash + 1), &bits) != 0 && strcmp(slash + 1, "0") != 0)
        return egress_fail(why, why_len, "bad prefix length in '%s'", text);
      if (strcmp(slash + 1, "0") == 0) bits = 0;
    }
    if (egress_addr_parse(h, &out->addr) != 0)
      return egress_fail(why, why_len, "'%s' is not an IP address", h);
    if (out->addr.family == 6 && !brackets)
      return egress_fail(why, why_len, "an IPv6 address must be in brackets: [%s]", text);
    int max = out->addr.family == 6 ? 128 : 32;
    if (bits < 0) bits = max;
    if (bits > max) return egress_fail(why, why_len, "prefix /%d is longer than %d", bits, max);
    /* The range must start at its network address: 10.1.2.3/8 is a typo. */
    eg_addr masked = out->addr;
    for (int i = bits; i < max; i++) masked.b[i / 8] &= (unsigned char)~(0x80 >> (i % 8));
    if (memcmp(masked.b, out->addr.b, 16) != 0)
      return egress_fail(why, why_len, "'%s' has host bits set beyond /%d", h, bits);
    out->kind = EG_PAT_ADDR;
    out->prefix = bits;
    return 0;
  }
  if (strcmp(h, "*") == 0) {
    out->kind = EG_PAT_ANY;
    return 0;
  }
  const char *name = h;
  out->kind = EG_PAT_NAME;
  if (strncmp(h, "*.", 2) == 0) {
    out->kind = EG_PAT_WILDCARD;
    name = h + 2;
  }
  if (strchr(name, '*'))
    return egress_fail(why, why_len,
                       "'*' may only be a whole first label ('*.example.com') or the whole host");
  eg_dest d;
  char sub[EG_WHY_MAX];
  if (egress_host_parse(name, strlen(name), 0, &d, sub, sizeof sub) != 0)
    return egress_fail(why, why_len, "%s", sub);
  if (d.is_addr) return egress_fail(why, why_len, "'%s' is an address, not a name", name);
  snprintf(out->name, sizeof out->name, "%s", d.host);
  return 0;
}

static int port_ok(int pattern_port, int port) {
  if (pattern_port == EG_PORT_ANY) return 1;
  if (pattern_port == EG_PORT_WEB) return port == 80 || port == 443;
  return pattern_port == port;
}

int egress_pattern_match_addr(const eg_pattern *p, const eg_addr *addr, int port) {
  return p->kind == EG_PAT_ADDR && port_ok(p->port, port) &&
         egress_addr_in(addr, &p->addr, p->prefix);
}

int egress_pattern_match_dest(const eg_pattern *p, const eg_dest *d) {
  if (!port_ok(p->port, d->port)) return 0;
  if (d->is_addr) return egress_pattern_match_addr(p, &d->addr, d->port);
  switch (p->kind) {
    case EG_PAT_NAME: return strcmp(p->name, d->host) == 0;
    case EG_PAT_ANY: return 1;
    case EG_PAT_WILDCARD: {
      size_t n = strlen(d->host), s = strlen(p->name);
      return n > s + 1 && d->host[n - s - 1] == '.' && strcmp(d->host + n - s, p->name) == 0;
    }
    default: return 0;
  }
}

/* ---- the policy file ----
 *
 *   sandman-egress-policy 2
 *   sandbox NAME | agent NAME | project NAME | run ID | worker ID   (- for none)
 *   block 172.17.0.1/32 engine host     addresses refused unless allowed by address
 *   level defaults                 the rules below belong to this level
 *   allow PATTERN | deny PATTERN
 *   end */

static int parse_cidr(const char *s, eg_addr *net, int *prefix) {
  char buf[64];
  const char *slash = strchr(s, '/');
  size_t n = slash ? (size_t)(slash - s) : strlen(s);
  if (n == 0 || n >= sizeof buf) return -1;
  memcpy(buf, s, n);
  buf[n] = '\0';
  if (egress_addr_parse(buf, net) != 0) return -1;
  int max = net->family == 6 ? 128 : 32;
  *prefix = max;
  if (slash) {
    const char *p = slash + 1;
    if (*p == '\0' || strlen(p) > 3) return -1;
    int v = 0;
    for (; *p; p++) {
      if (!is_digit(*p)) return -1;
      v = v * 10 + (*p - '0');
    }
    if (v > max) return -1;
    *prefix = v;
  }
  return 0;
}

static int push_rule(eg_rule **list, size_t *n, const eg_pattern *pat, int level) {
  if (*n >= EG_POLICY_MAX_RULES) return -1;
  eg_rule *grown = realloc(*list, (*n + 1) * sizeof **list);
  if (grown == NULL) return -1;
  *list = grown;
  grown[*n].pat = *pat;
  grown[*n].level = level;
  (*n)++;
  return 0;
}

void egress_policy_dispose(eg_policy *p) {
  free(p->allow);
  free(p->deny);
  memset(p, 0, sizeof *p);
}

static void set_id(char *dst, const char *v) {
  if (strcmp(v, "-") == 0) dst[0] = '\0';
  else snprintf(dst, EG_ID_MAX, "%s", v);
}

static int id_ok(const char *v) {
  size_t n = strlen(v);
  if (n == 0 || n >= EG_ID_MAX) return 0;
  for (const char *c = v; *c; c++)
    if ((unsigned char)*c <= 0x20 || (unsigned char)*c >= 0x7f || *c == '"' || *c == '\\') return 0;
  return 1;
}

int egress_policy_parse(const char *text, size_t len, eg_policy *out, char *why, size_t why_len) {
  memset(out, 0, sizeof *out);
  if (len > EG_POLICY_MAX_BYTES)
    return egress_fail(why, why_len, "policy file over %d bytes", EG_POLICY_MAX_BYTES);
  if (memchr(text, '\0', len)) return egress_fail(why, why_len, "policy file holds a NUL byte");
  size_t pos = 0, lineno = 0;
  int seen_header = 0, seen_end = 0, level = -1;
  char line[EG_PATTERN_TEXT_MAX + 64];
  while (pos < len) {
    const char *nl = memchr(text + pos, '\n', len - pos);
    if (nl == NULL) break; /* a last line without newline: cut short */
    size_t n = (size_t)(nl - (text + pos));
    lineno++;
    if (seen_end) {
      egress_policy_dispose(out);
      return egress_fail(why, why_len, "line %zu: text after 'end'", lineno);
    }
    if (n >= sizeof line) {
      egress_policy_dispose(out);
      return egress_fail(why, why_len, "line %zu too long", lineno);
    }
    memcpy(line, text + pos, n);
    line[n] = '\0';
    pos += n + 1;
    char *sp = strchr(line, ' ');
    char *key = line, *val = sp ? sp + 1 : NULL;
    if (sp) *sp = '\0';
    int bad = 0;
    if (!seen_header) {
      if (strcmp(key, "sandman-egress-policy") != 0 || val == NULL || strcmp(val, "2") != 0) bad = 1;
      seen_header = 1;
    } else if (strcmp(key, "end") == 0 && val == NULL) {
      seen_end = 1;
    } else if (val == NULL) {
      bad = 1;
    } else if (!strcmp(key, "sandbox") || !strcmp(key, "agent") || !strcmp(key, "project") ||
               !strcmp(key, "run") || !strcmp(key, "worker")) {
      if (!id_ok(val)) bad = 1;
      else if (!strcmp(key, "sandbox")) set_id(out->sandbox, val);
      else if (!strcmp(key, "agent")) set_id(out->agent, val);
      else if (!strcmp(key, "project")) set_id(out->project, val);
      else if (!strcmp(key, "run")) set_id(out->run, val);
      else set_id(out->worker, val);
    } else if (!strcmp(key, "block")) {
      char *sp2 = strchr(val, ' ');
      if (sp2) *sp2 = '\0';
      eg_block *b = &out->blocks[out->n_blocks];
      if (out->n_blocks >= EG_POLICY_MAX_BLOCKS || parse_cidr(val, &b->net, &b->prefix) != 0) {
        bad = 1;
      } else {
        snprintf(b->why, sizeof b->why, "%s", sp2 && sp2[1] ? sp2 + 1 : "engine address");
        out->n_blocks++;
      }
    } else if (!strcmp(key, "level")) {
      if (out->n_levels >= EG_POLICY_MAX_LEVELS || !id_ok(val)) bad = 1;
      else {
        level = (int)out->n_levels++;
        snprintf(out->levels[level], EG_ID_MAX, "%s", val);
      }
    } else if (!strcmp(key, "allow") || !strcmp(key, "deny")) {
      eg_pattern pat;
      char sub[EG_WHY_MAX];
      if (level < 0) {
        egress_policy_dispose(out);
        return egress_fail(why, why_len, "line %zu: %s before any level", lineno, key);
      }
      if (egress_pattern_parse(val, &pat, sub, sizeof sub) != 0) {
        egress_policy_dispose(out);
        return egress_fail(why, why_len, "line %zu: %s", lineno, sub);
      }
      int rc = key[0] == 'a' ? push_rule(&out->allow, &out->n_allow, &pat, level)
                             : push_rule(&out->deny, &out->n_deny, &pat, level);
      if (rc != 0) bad = 1;
    } else {
      bad = 1;
    }
    if (bad) {
      egress_policy_dispose(out);
      return egress_fail(why, why_len, "line %zu: bad line '%.40s%s%.80s'", lineno, key,
                         val ? " " : "", val ? val : "");
    }
  }
  if (!seen_end) {
    egress_policy_dispose(out);
    return egress_fail(why, why_len, "the policy file is cut short (no 'end' line)");
  }
  return 0;
}

/* ---- decisions ---- */

static void dest_text(const eg_dest *d, char *buf, size_t len) {
  if (d->is_addr && d->addr.family == 6) snprintf(buf, len, "[%s]:%d", d->host, d->port);
  else snprintf(buf, len, "%s:%d", d->host, d->port);
}

int egress_policy_decide(const eg_policy *p, const eg_dest *d, char *rule, size_t rule_len) {
  char dt[EG_HOST_MAX + 16];
  dest_text(d, dt, sizeof dt);
  for (size_t i = 0; i < p->n_deny; i++)
    if (egress_pattern_match_dest(&p->deny[i].pat, d)) {
      snprintf(rule, rule_len, "%s.egress.deny: %s matches %s", p->levels[p->deny[i].level],
               p->deny[i].pat.text, dt);
      return 0;
    }
  int any_level = 0;
  const eg_rule *last = NULL;
  for (size_t l = 0; l < p->n_levels; l++) {
    int has = 0;
    const eg_rule *hit = NULL;
    for (size_t i = 0; i < p->n_allow; i++) {
      if (p->allow[i].level != (int)l) continue;
      has = 1;
      if (hit == NULL && egress_pattern_match_dest(&p->allow[i].pat, d)) hit = &p->allow[i];
    }
    if (!has) continue;
    any_level = 1;
    if (hit == NULL) {
      snprintf(rule, rule_len, "%s.egress.allow does not include %s", p->levels[l], dt);
      return 0;
    }
    last = hit;
  }
  if (!any_level) {
    snprintf(rule, rule_len, "no egress.allow list: nothing is reachable");
    return 0;
  }
  snprintf(rule, rule_len, "%s.egress.allow: %s matches %s", p->levels[last->level], last->pat.text, dt);
  return 1;
}

int egress_policy_addr_ok(const eg_policy *p, const eg_addr *a, int port, char *why,
                          size_t why_len) {
  char at[64];
  egress_addr_format(a, at, sizeof at);
  for (size_t i = 0; i < p->n_deny; i++)
    if (egress_pattern_match_addr(&p->deny[i].pat, a, port)) {
      snprintf(why, why_len, "%s.egress.deny: %s matches %s", p->levels[p->deny[i].level],
               p->deny[i].pat.text, at);
      return 0;
    }
  /* What sandman said about the engine first: more telling than "private". */
  const char *what = NULL;
  for (size_t i = 0; what == NULL && i < p->n_blocks; i++)
    if (egress_addr_in(a, &p->blocks[i].net, p->blocks[i].prefix)) what = p->blocks[i].why;
  if (what == NULL) what = egress_addr_special(a);
  if (what == NULL) return 1;
  /* Explicitly listed by address: the operator means it. */
  for (size_t i = 0; i < p->n_allow; i++)
    if (egress_pattern_match_addr(&p->allow[i].pat, a, port)) return 1;
  snprintf(why, why_len, "%s is %s %s address that no egress.allow address pattern lists", at,
           strchr("aeiouAEIOU", what[0]) ? "an" : "a", what);
  return 0;
}
