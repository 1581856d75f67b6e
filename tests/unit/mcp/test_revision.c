/* MCP revisions: which versions sandman speaks in which era, a request's
 * per-request metadata of 2026-07-28 (_meta: version, capabilities, the
 * tasks extension; every cap), and the streamable HTTP headers that must
 * mirror the body (MCP-Protocol-Version, Mcp-Method, Mcp-Name with its
 * base64 form). Pure functions, no engine. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "support/check.h"

#include <sandman/mcp.h>

#include "mcp/headers.h"
#include "mcp/revision.h"

static json_object *parse(const char *text) {
  json_object *o = json_tokener_parse(text);
  assert_non_null(o);
  return o;
}

static void test_versions(void **state) {
  (void)state;
  assert_true(mcp_revision_modern("2026-07-28"));
  assert_false(mcp_revision_modern("2025-11-25"));
  assert_true(mcp_revision_legacy("2025-11-25"));
  assert_true(mcp_revision_legacy("2024-11-05"));
  assert_false(mcp_revision_legacy("2026-07-28"));
  assert_false(mcp_revision_legacy(NULL));
  assert_false(mcp_revision_modern("2026-07-2"));
  assert_true(sm_mcp_protocol_supported("2026-07-28"));
  assert_true(sm_mcp_protocol_supported("2025-06-18"));
  assert_false(sm_mcp_protocol_supported("1900-01-01"));
  /* The list a client picks from: the stateless revision first. */
  json_object *all = mcp_revision_all();
  assert_int_equal(json_object_array_length(all), 5);
  assert_string_equal(json_object_get_string(json_object_array_get_idx(all, 0)), "2026-07-28");
  assert_string_equal(json_object_get_string(json_object_array_get_idx(all, 1)), "2025-11-25");
  json_object_put(all);
  json_object *d = mcp_revision_unsupported("1900-01-01"), *v = NULL;
  assert_true(json_object_object_get_ex(d, "requested", &v));
  assert_string_equal(json_object_get_string(v), "1900-01-01");
  assert_true(json_object_object_get_ex(d, "supported", &v));
  assert_int_equal(json_object_array_length(v), 5);
  json_object_put(d);
}

static int meta_of(const char *params, mcp_meta *m) {
  char why[256];
  json_object *p = params ? parse(params) : NULL;
  int rc = mcp_meta_read(p, m, why, sizeof why);
  if (rc == MCP_META_MALFORMED || rc == MCP_META_UNSUPPORTED) assert_true(why[0] != '\0');
  json_object_put(p);
  return rc;
}

#define CAPS "\"io.modelcontextprotocol/clientCapabilities\""
#define VER "\"io.modelcontextprotocol/protocolVersion\""

static void test_meta(void **state) {
  (void)state;
  mcp_meta m;
  /* Not a stateless request: no params, no _meta, no version in it. */
  assert_int_equal(meta_of(NULL, &m), MCP_META_NONE);
  assert_int_equal(meta_of("{}", &m), MCP_META_NONE);
  assert_int_equal(meta_of("{\"_meta\":{\"progressToken\":1}}", &m), MCP_META_NONE);
  assert_false(m.modern);
  /* The version and the capabilities are both required. */
  assert_int_equal(meta_of("{\"_meta\":{" VER ":\"2026-07-28\"}}", &m), MCP_META_MALFORMED);
  assert_true(m.modern);
  assert_int_equal(meta_of("{\"_meta\":{" VER ":\"2026-07-28\"," CAPS ":[]}}", &m), MCP_META_MALFORMED);
  assert_int_equal(meta_of("{\"_meta\":{" VER ":7," CAPS ":{}}}", &m), MCP_META_MALFORMED);
  assert_int_equal(meta_of("{\"_meta\":{" VER ":\"\"," CAPS ":{}}}", &m), MCP_META_MALFORMED);
  assert_int_equal(meta_of("{\"_meta\":{" VER ":\"2026-07-28\"," CAPS ":{},"
                           "\"io.modelcontextprotocol/clientInfo\":\"me\"}}", &m),
                   MCP_META_MALFORMED);
  /* A good one, without and with the tasks extension. */
  assert_int_equal(meta_of("{\"_meta\":{" VER ":\"2026-07-28\"," CAPS ":{}}}", &m), MCP_META_OK);
  assert_string_equal(m.version, "2026-07-28");
  assert_false(m.tasks);
  assert_int_equal(meta_of("{\"_meta\":{" VER ":\"2026-07-28\"," CAPS ":{\"extensions\":{"
                           "\"io.modelcontextprotocol/tasks\":{}}},"
                           "\"io.modelcontextprotocol/clientInfo\":{\"name\":\"c\",\"version\":\"1\"}}}", &m),
                   MCP_META_OK);
  assert_true(m.tasks);
  assert_int_equal(meta_of("{\"_meta\":{" VER ":\"2026-07-28\"," CAPS ":{\"extensions\":{"
                           "\"io.modelcontextprotocol/tasks\":true}}}}", &m),
                   MCP_META_MALFORMED);
  assert_int_equal(meta_of("{\"_meta\":{" VER ":\"2026-07-28\"," CAPS ":{\"extensions\":[]}}}", &m),
                   MCP_META_MALFORMED);
  /* Versions sandman does not speak per request: unknown ones, and those
   * of the initialize era. */
  assert_int_equal(meta_of("{\"_meta\":{" VER ":\"1900-01-01\"," CAPS ":{}}}", &m), MCP_META_UNSUPPORTED);
  assert_string_equal(m.version, "1900-01-01");
  assert_int_equal(meta_of("{\"_meta\":{" VER ":\"2025-11-25\"," CAPS ":{}}}", &m), MCP_META_UNSUPPORTED);
}

/* Caps: a version longer than one, too many keys in _meta, in the
 * capabilities, in their extensions. */
static void test_meta_caps(void **state) {
  (void)state;
  mcp_meta m;
  char big[4096];
  snprintf(big, sizeof big, "{\"_meta\":{" VER ":\"%0*d\"," CAPS ":{}}}", MCP_VERSION_MAX + 1, 7);
  assert_int_equal(meta_of(big, &m), MCP_META_MALFORMED);
  snprintf(big, sizeof big, "{\"_meta\":{" VER ":\"%0*d\"," CAPS ":{}}}", MCP_VERSION_MAX, 7);
  assert_int_equal(meta_of(big, &m), MCP_META_UNSUPPORTED); /* at the cap: read, and unknown */
  const char *where[] = {"{\"_meta\":{" VER ":\"2026-07-28\"," CAPS ":{}%s}}",
                         "{\"_meta\":{" VER ":\"2026-07-28\"," CAPS ":{\"a\":{}%s}}}",
                         "{\"_meta\":{" VER ":\"2026-07-28\"," CAPS ":{\"extensions\":{\"a.b/c\":{}%s}}}}"};
  for (size_t w = 0; w < 3; w++) {
    for (int n = MCP_META_KEYS_MAX - 2; n <= MCP_META_KEYS_MAX + 1; n++) {
      char keys[3000] = "";
      size_t used = 0;
      for (int i = 0; i < n; i++)
        used += (size_t)snprintf(keys + used, sizeof keys - used, ",\"k%d\":{}", i);
      snprintf(big, sizeof big, where[w], keys);
      /* n extra keys beside the one or two there: over the cap refused. */
      int total = n + (w == 0 ? 2 : 1);
      assert_int_equal(meta_of(big, &m), total > MCP_META_KEYS_MAX ? MCP_META_MALFORMED : MCP_META_OK);
    }
  }
}

static int check(const char *body, const char *version, const char *method, const char *name) {
  json_object *msg = parse(body);
  char why[256] = "";
  int rc = mcp_headers_check(msg, version, method, name, why, sizeof why);
  if (rc) assert_true(strncmp(why, "Header mismatch: ", 17) == 0);
  json_object_put(msg);
  return rc;
}

#define META "\"_meta\":{" VER ":\"2026-07-28\"," CAPS ":{}}"

static void test_headers(void **state) {
  (void)state;
  const char *call = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"execute\"," META "}}";
  assert_int_equal(check(call, "2026-07-28", "tools/call", "execute"), 0);
  assert_int_equal(check(call, NULL, "tools/call", "execute"), -1);       /* no version header */
  assert_int_equal(check(call, "2025-11-25", "tools/call", "execute"), -1); /* another version */
  assert_int_equal(check(call, "2026-07-28", NULL, "execute"), -1);      /* no method header */
  assert_int_equal(check(call, "2026-07-28", "tools/list", "execute"), -1);
  assert_int_equal(check(call, "2026-07-28", "tools/call", NULL), -1);   /* no name header */
  assert_int_equal(check(call, "2026-07-28", "tools/call", "read_file"), -1);
  assert_int_equal(check(call, "2026-07-28", "tools/call", "Execute"), -1); /* values are case-sensitive */
  /* The base64 form, decoded before the comparison; broken forms refused. */
  assert_int_equal(check(call, "2026-07-28", "tools/call", "=?base64?ZXhlY3V0ZQ==?="), 0);
  assert_int_equal(check(call, "2026-07-28", "tools/call", "=?base64?ZXhlY3V0ZQ?="), 0);
  assert_int_equal(check(call, "2026-07-28", "tools/call", "=?base64?ZXhlY3V0Z?="), -1);
  assert_int_equal(check(call, "2026-07-28", "tools/call", "=?base64?ZXhl*3V0ZQ==?="), -1);
  assert_int_equal(check(call, "2026-07-28", "tools/call", "exec\x01ute"), -1);
  /* A method without a name source needs no Mcp-Name. */
  const char *list = "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\",\"params\":{" META "}}";
  assert_int_equal(check(list, "2026-07-28", "tools/list", NULL), 0);
  /* Tasks are named by their id. */
  const char *get = "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tasks/get\",\"params\":{\"taskId\":\"abc\"," META "}}";
  assert_int_equal(check(get, "2026-07-28", "tasks/get", "abc"), 0);
  assert_int_equal(check(get, "2026-07-28", "tasks/get", "abd"), -1);
  assert_int_equal(check(get, "2026-07-28", "tasks/get", NULL), -1);

  char out[8];
  assert_int_equal(mcp_header_decode("=?base64?aGVsbG8gd29ybGQ=?=", out, sizeof out), -1); /* too long */
  assert_int_equal(mcp_header_decode("=?base64?AGE=?=", out, sizeof out), -1);            /* a NUL in it */
  assert_int_equal(mcp_header_decode("=?base64?aGk=?=", out, sizeof out), 0);
  assert_string_equal(out, "hi");
  assert_int_equal(mcp_header_decode("=?base64?" "?=", out, sizeof out), 0);
  assert_string_equal(out, "");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_versions),
      cmocka_unit_test(test_meta),
      cmocka_unit_test(test_meta_caps),
      cmocka_unit_test(test_headers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
