/* Egress policy tables: patterns, hosts and authorities, address classes,
 * the policy file, and decisions (deny wins, levels narrow, addresses). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "support/check.h"

#include "egress/egress_policy.h"

static void test_patterns(void **state) {
  (void)state;
  static const struct {
    const char *text;
    int ok, kind, port;
    const char *name;
  } cases[] = {
      {"pypi.org", 1, EG_PAT_NAME, EG_PORT_WEB, "pypi.org"},
      {"PyPI.Org.", 1, EG_PAT_NAME, EG_PORT_WEB, "pypi.org"},
      {"api.github.com:443", 1, EG_PAT_NAME, 443, "api.github.com"},
      {"git.example:*", 1, EG_PAT_NAME, EG_PORT_ANY, "git.example"},
      {"*.pythonhosted.org", 1, EG_PAT_WILDCARD, EG_PORT_WEB, "pythonhosted.org"},
      {"*", 1, EG_PAT_ANY, EG_PORT_WEB, ""},
      {"*:8080", 1, EG_PAT_ANY, 8080, ""},
      {"10.0.0.0/8", 1, EG_PAT_ADDR, EG_PORT_WEB, ""},
      {"203.0.113.7:8443", 1, EG_PAT_ADDR, 8443, ""},
      {"[2001:db8::1]:443", 1, EG_PAT_ADDR, 443, ""},
      {"[fd00::/8]", 1, EG_PAT_ADDR, EG_PORT_WEB, ""},
      {"", 0, 0, 0, NULL},
      {"a.*.b", 0, 0, 0, NULL},
      {"*example.com", 0, 0, 0, NULL},
      {"**.example.com", 0, 0, 0, NULL},
      {"pypi.org:0", 0, 0, 0, NULL},
      {"pypi.org:65536", 0, 0, 0, NULL},
      {"pypi.org:http", 0, 0, 0, NULL},
      {"2001:db8::1", 0, 0, 0, NULL},
      {"10.1.2.3/8", 0, 0, 0, NULL},
      {"10.0.0.0/33", 0, 0, 0, NULL},
      {"300.1.1.1", 0, 0, 0, NULL},
      {"1.2.3", 0, 0, 0, NULL},
      {"ex ample.com", 0, 0, 0, NULL},
      {"-bad.example", 0, 0, 0, NULL},
      {"user@host.example", 0, 0, 0, NULL},
      {"host%2eexample", 0, 0, 0, NULL},
      {"[::1", 0, 0, 0, NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    eg_pattern p;
    char why[EG_WHY_MAX] = "";
    int rc = egress_pattern_parse(cases[i].text, &p, why, sizeof why);
    if ((rc == 0) != cases[i].ok) fail_msg("pattern '%s': rc %d (%s)", cases[i].text, rc, why);
    if (!cases[i].ok) {
      assert_true(why[0] != '\0');
      continue;
    }
    assert_int_equal(p.kind, cases[i].kind);
    assert_int_equal(p.port, cases[i].port);
    assert_string_equal(p.name, cases[i].name);
  }
}

static void test_authorities(void **state) {
  (void)state;
  static const struct {
    const char *text;
    int default_port, ok, is_addr, port;
    const char *host;
  } cases[] = {
      {"allowed.test:443", -1, 1, 0, 443, "allowed.test"},
      {"Allowed.TEST.:8443", -1, 1, 0, 8443, "allowed.test"},
      {"allowed.test", 80, 1, 0, 80, "allowed.test"},
      {"allowed.test", -1, 0, 0, 0, NULL},
      {"169.254.169.254:80", -1, 1, 1, 80, "169.254.169.254"},
      {"[::1]:443", -1, 1, 1, 443, "::1"},
      {"[::ffff:127.0.0.1]:443", -1, 1, 1, 443, "::ffff:127.0.0.1"},
      {"[fe80::1%eth0]:443", -1, 0, 0, 0, NULL},
      {"0177.0.0.1:80", -1, 0, 0, 0, NULL},
      {"2130706433:80", -1, 0, 0, 0, NULL},
      {"0x7f000001:80", -1, 0, 0, 0, NULL},
      {"127.1:80", -1, 0, 0, 0, NULL},
      {"user:pw@allowed.test:443", -1, 0, 0, 0, NULL},
      {"allowed.test:443:1", -1, 0, 0, 0, NULL},
      {"allowed.test:", -1, 0, 0, 0, NULL},
      {"allowed..test:443", -1, 0, 0, 0, NULL},
      {":443", -1, 0, 0, 0, NULL},
      {"[::1]x", -1, 0, 0, 0, NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    eg_dest d;
    char why[EG_WHY_MAX] = "";
    int rc = egress_authority_parse(cases[i].text, strlen(cases[i].text), cases[i].default_port, &d,
                                    why, sizeof why);
    if ((rc == 0) != cases[i].ok) fail_msg("authority '%s': rc %d (%s)", cases[i].text, rc, why);
    if (!cases[i].ok) continue;
    assert_int_equal(d.is_addr, cases[i].is_addr);
    assert_int_equal(d.port, cases[i].port);
    assert_string_equal(d.host, cases[i].host);
  }
}

static void test_address_classes(void **state) {
  (void)state;
  static const struct {
    const char *addr;
    const char *want; /* NULL: global */
  } cases[] = {
      {"8.8.8.8", NULL},
      {"151.101.0.223", NULL},
      {"127.0.0.1", "loopback"},
      {"127.255.1.2", "loopback"},
      {"169.254.169.254", "link-local (cloud metadata)"},
      {"10.1.2.3", "private"},
      {"172.16.0.1", "private"},
      {"172.31.255.255", "private"},
      {"172.32.0.1", NULL},
      {"192.168.1.1", "private"},
      {"100.64.0.1", "shared (CGNAT)"},
      {"0.0.0.0", "unspecified (\"this network\")"},
      {"224.0.0.1", "multicast"},
      {"255.255.255.255", "reserved"},
      {"::1", "loopback"},
      {"::", "unspecified"},
      {"::ffff:127.0.0.1", "IPv4-mapped"},
      {"fe80::1", "link-local"},
      {"fd12:3456::1", "private (unique local)"},
      {"ff02::1", "multicast"},
      {"2606:4700::1111", NULL},
      {"2001:db8::1", "documentation"},
      {"4000::1", "reserved"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    eg_addr a;
    assert_int_equal(egress_addr_parse(cases[i].addr, &a), 0);
    const char *got = egress_addr_special(&a);
    if (cases[i].want == NULL) {
      if (got != NULL) fail_msg("%s: got %s, want global", cases[i].addr, got);
    } else if (got == NULL || strcmp(got, cases[i].want) != 0) {
      fail_msg("%s: got %s, want %s", cases[i].addr, got ? got : "global", cases[i].want);
    }
  }
}

static const char policy_text[] =
    "sandman-egress-policy 2\n"
    "sandbox sandman-t-per_run-0123\n"
    "agent coder\n"
    "project demo\n"
    "run r1\n"
    "worker -\n"
    "block 172.17.0.1/32 engine host\n"
    "block 8.8.4.0/24 engine network\n"
    "level defaults\n"
    "allow pypi.org\n"
    "allow *.pythonhosted.org\n"
    "allow api.github.com:443\n"
    "allow mirror.corp\n"
    "allow 10.20.0.0/16\n"
    "allow 8.8.8.8:53\n"
    "deny *.evil.pythonhosted.org\n"
    "level agents.coder\n"
    "allow pypi.org:443\n"
    "allow *.pythonhosted.org\n"
    "allow mirror.corp\n"
    "allow 8.8.8.8:53\n"
    "deny 10.20.9.0/24\n"
    "end\n";

static void dest(const char *authority, eg_dest *d) {
  char why[EG_WHY_MAX];
  if (egress_authority_parse(authority, strlen(authority), -1, d, why, sizeof why) != 0)
    fail_msg("bad test authority %s: %s", authority, why);
}

static void test_policy_decisions(void **state) {
  (void)state;
  eg_policy p;
  char why[EG_WHY_MAX];
  assert_int_equal(egress_policy_parse(policy_text, strlen(policy_text), &p, why, sizeof why), 0);
  assert_string_equal(p.sandbox, "sandman-t-per_run-0123");
  assert_string_equal(p.agent, "coder");
  assert_string_equal(p.worker, "");
  assert_int_equal(p.n_levels, 2);
  assert_int_equal(p.n_blocks, 2);
  static const struct {
    const char *dest;
    int allowed;
    const char *rule;
  } cases[] = {
      {"pypi.org:443", 1, "agents.coder.egress.allow: pypi.org:443 matches pypi.org:443"},
      {"pypi.org:80", 0, "agents.coder.egress.allow does not include pypi.org:80"},
      {"files.pythonhosted.org:443", 1,
       "agents.coder.egress.allow: *.pythonhosted.org matches files.pythonhosted.org:443"},
      {"pythonhosted.org:443", 0, "defaults.egress.allow does not include pythonhosted.org:443"},
      {"x.evil.pythonhosted.org:443", 0,
       "defaults.egress.deny: *.evil.pythonhosted.org matches x.evil.pythonhosted.org:443"},
      {"api.github.com:443", 0, "agents.coder.egress.allow does not include api.github.com:443"},
      {"pypi.org:22", 0, "defaults.egress.allow does not include pypi.org:22"},
      {"mirror.corp:443", 1, "agents.coder.egress.allow: mirror.corp matches mirror.corp:443"},
      {"10.20.1.1:443", 0, "agents.coder.egress.allow does not include 10.20.1.1:443"},
      {"8.8.8.8:53", 1, "agents.coder.egress.allow: 8.8.8.8:53 matches 8.8.8.8:53"},
      {"169.254.169.254:80", 0, "defaults.egress.allow does not include 169.254.169.254:80"},
      {"evilpypi.org:443", 0, "defaults.egress.allow does not include evilpypi.org:443"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    eg_dest d;
    dest(cases[i].dest, &d);
    char rule[EG_WHY_MAX] = "";
    int got = egress_policy_decide(&p, &d, rule, sizeof rule);
    if (got != cases[i].allowed || strcmp(rule, cases[i].rule) != 0)
      fail_msg("%s: got %d '%s', want %d '%s'", cases[i].dest, got, rule, cases[i].allowed, cases[i].rule);
  }
  /* Addresses: special ones only when an allow address pattern names them. */
  static const struct {
    const char *addr;
    int port, ok;
    const char *why_has;
  } addrs[] = {
      {"151.101.0.223", 443, 1, NULL},
      {"127.0.0.1", 443, 0, "loopback"},
      {"169.254.169.254", 80, 0, "link-local"},
      {"10.20.1.1", 443, 1, NULL},            /* listed by defaults' 10.20.0.0/16 */
      {"10.20.9.9", 443, 0, "egress.deny: 10.20.9.0/24"}, /* deny wins */
      {"10.21.0.1", 443, 0, "private"},
      {"172.17.0.1", 443, 0, "engine host"},
      {"8.8.4.4", 443, 0, "engine network"},
      {"8.8.8.8", 53, 1, NULL},
      {"::1", 443, 0, "loopback"},
  };
  for (size_t i = 0; i < sizeof addrs / sizeof addrs[0]; i++) {
    eg_addr a;
    assert_int_equal(egress_addr_parse(addrs[i].addr, &a), 0);
    char w[EG_WHY_MAX] = "";
    int ok = egress_policy_addr_ok(&p, &a, addrs[i].port, w, sizeof w);
    if (ok != addrs[i].ok || (addrs[i].why_has && strstr(w, addrs[i].why_has) == NULL))
      fail_msg("%s:%d: got %d '%s'", addrs[i].addr, addrs[i].port, ok, w);
  }
  egress_policy_dispose(&p);
}

static void test_policy_file_errors(void **state) {
  (void)state;
  static const char *bad[] = {
      "",
      "sandman-egress-policy 3\nend\n",
      "sandman-egress-policy 2\nlevel defaults\nallow pypi.org\n",      /* cut: no end */
      "sandman-egress-policy 2\nlevel defaults\nallow pypi.org\nend",   /* cut: no newline */
      "sandman-egress-policy 2\nallow pypi.org\nend\n",                 /* rule before level */
      "sandman-egress-policy 2\nlevel d\nallow a..b\nend\n",
      "sandman-egress-policy 2\nsubnet 10.0.0.0/16\nend\n", /* an internal network: no more */
      "sandman-egress-policy 1\nend\n",
      "sandman-egress-policy 2\nagent a b\nend\n",
      "sandman-egress-policy 2\nwhat x\nend\n",
      "sandman-egress-policy 2\nend\nallow x\n",
      "sandman-egress-policy 2\nlevel a\nlevel b\nlevel c\nlevel d\nlevel e\nend\n",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    eg_policy p;
    char why[EG_WHY_MAX] = "";
    if (egress_policy_parse(bad[i], strlen(bad[i]), &p, why, sizeof why) == 0)
      fail_msg("case %zu accepted", i);
    assert_true(why[0] != '\0');
    assert_int_equal(p.n_allow, 0);
  }
  /* No allow list at all: nothing is reachable. */
  const char *empty = "sandman-egress-policy 2\nlevel defaults\nend\n";
  eg_policy p;
  char why[EG_WHY_MAX];
  assert_int_equal(egress_policy_parse(empty, strlen(empty), &p, why, sizeof why), 0);
  eg_dest d;
  dest("pypi.org:443", &d);
  assert_int_equal(egress_policy_decide(&p, &d, why, sizeof why), 0);
  assert_string_equal(why, "no egress.allow list: nothing is reachable");
  egress_policy_dispose(&p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_patterns),
      cmocka_unit_test(test_authorities),
      cmocka_unit_test(test_address_classes),
      cmocka_unit_test(test_policy_decisions),
      cmocka_unit_test(test_policy_file_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
