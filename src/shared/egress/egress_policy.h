/* Egress policy, pure and dependency-free (libc only): host patterns, the
 * destinations a client asks for, address classes, the per-sandbox policy
 * file, and the decision. Compiled into the library (configuration checks,
 * writing policy files, tests, fuzzing) and into the static sandman-egress
 * proxy (src/egress_proxy), which reads a policy file per connection.
 *
 * Nothing here allocates except egress_policy_parse (egress_policy_dispose frees). */
#ifndef SANDMAN_EGRESS_POLICY_H
#define SANDMAN_EGRESS_POLICY_H

#include <stddef.h>

#define EG_HOST_MAX 253        /* a DNS name, without the trailing dot */
#define EG_PATTERN_TEXT_MAX 300
#define EG_ID_MAX 200          /* sandbox, agent, project, run, worker, level names */
#define EG_POLICY_MAX_BYTES (64 * 1024)
#define EG_POLICY_MAX_RULES 512
#define EG_POLICY_MAX_LEVELS 4
#define EG_POLICY_MAX_BLOCKS 256
#define EG_WHY_MAX 600

/* Fills why (if any) and returns -1: how every parser here says no. */
int egress_fail(char *why, size_t why_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A port of 0 in a pattern means "80 and 443"; EG_PORT_ANY means any. */
#define EG_PORT_WEB 0
#define EG_PORT_ANY (-1)

typedef enum {
  EG_PAT_NAME = 1,     /* pypi.org */
  EG_PAT_WILDCARD = 2, /* *.pythonhosted.org: names strictly below the suffix */
  EG_PAT_ANY = 3,      /* *: any name (never an address) */
  EG_PAT_ADDR = 4,     /* 203.0.113.7, 10.0.0.0/8, [2001:db8::/32] */
} eg_pattern_kind;

typedef struct eg_addr {
  int family; /* 4 or 6 */
  unsigned char b[16];
} eg_addr;

typedef struct eg_pattern {
  eg_pattern_kind kind;
  char name[EG_HOST_MAX + 1]; /* lower case; the suffix for a wildcard */
  eg_addr addr;               /* EG_PAT_ADDR */
  int prefix;                 /* EG_PAT_ADDR: bits */
  int port;                   /* a port, EG_PORT_WEB or EG_PORT_ANY */
  char text[EG_PATTERN_TEXT_MAX]; /* as written, for rules in messages */
} eg_pattern;

/* "pypi.org", "pypi.org:443", "pypi.org:*", "*.pythonhosted.org", "*",
 * "10.0.0.0/8", "203.0.113.7:8443", "[2001:db8::1]:443", "[fd00::/8]".
 * Returns 0, or -1 with why filled. */
int egress_pattern_parse(const char *text, eg_pattern *out, char *why, size_t why_len);

/* What a client asked for: a name or an IP literal, and a port. */
typedef struct eg_dest {
  int is_addr;
  char host[EG_HOST_MAX + 1]; /* lower case name, or the address as text */
  eg_addr addr;
  int port;
} eg_dest;

/* Checks a host as it appears in a request (name, IPv4 literal, or
 * bracketed IPv6 literal when brackets is set) and fills out (port left 0).
 * Names: letters, digits, '-', '_' and dots, labels of 1-63, at most 253 in
 * all, one trailing dot dropped; no user info, no percent-encoding. Returns
 * 0 or -1 with why. */
int egress_host_parse(const char *host, size_t len, int brackets, eg_dest *out, char *why,
                      size_t why_len);
/* "host:port", "[v6]:port", and with default_port >= 0 also "host" alone.
 * Returns 0 or -1 with why. */
int egress_authority_parse(const char *s, size_t len, int default_port, eg_dest *out, char *why,
                           size_t why_len);

/* 1 if the pattern covers the destination (names by name patterns, IP
 * literals by address patterns) and its port. */
int egress_pattern_match_dest(const eg_pattern *p, const eg_dest *d);
/* 1 if an address pattern covers addr on port. */
int egress_pattern_match_addr(const eg_pattern *p, const eg_addr *addr, int port);

/* NULL for a global unicast address, else what it is: "loopback",
 * "link-local", "private", "shared (CGNAT)", "unspecified", "multicast",
 * "reserved", "broadcast", "documentation", "IPv4-mapped"... */
const char *egress_addr_special(const eg_addr *a);
int egress_addr_parse(const char *s, eg_addr *out); /* 0 or -1 */
void egress_addr_format(const eg_addr *a, char *buf, size_t len);
/* 1 if a is inside net/prefix (same family). */
int egress_addr_in(const eg_addr *a, const eg_addr *net, int prefix);

/* ---- the policy file (see docs/network.md) ---- */

typedef struct eg_rule {
  eg_pattern pat;
  int level; /* index into levels */
} eg_rule;

typedef struct eg_block {
  eg_addr net;
  int prefix;
  char why[48]; /* "engine host", "engine network" */
} eg_block;

typedef struct eg_policy {
  char sandbox[EG_ID_MAX], agent[EG_ID_MAX], project[EG_ID_MAX], run[EG_ID_MAX],
      worker[EG_ID_MAX];
  size_t n_levels;
  char levels[EG_POLICY_MAX_LEVELS][EG_ID_MAX]; /* "defaults", "agents.coder" */
  eg_rule *allow, *deny;
  size_t n_allow, n_deny;
  eg_block blocks[EG_POLICY_MAX_BLOCKS];
  size_t n_blocks;
} eg_policy;

/* Parses a whole policy file. A file without its final "end" line (cut
 * short) is refused. Returns 0, or -1 with why (out left empty). */
int egress_policy_parse(const char *text, size_t len, eg_policy *out, char *why, size_t why_len);
void egress_policy_dispose(eg_policy *p);

/* The name check: 1 allowed (rule: the allow rule that admitted it), 0
 * refused (rule: the deny rule, or the level whose allow list lacks it). */
int egress_policy_decide(const eg_policy *p, const eg_dest *d, char *rule, size_t rule_len);
/* The address check for an allowed destination's resolved (or literal)
 * address: 1 usable, 0 refused with why (a deny address pattern; a
 * special, engine or network address that no allow address pattern
 * names). */
int egress_policy_addr_ok(const eg_policy *p, const eg_addr *a, int port, char *why,
                          size_t why_len);

#endif
