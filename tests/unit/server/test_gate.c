/* What the gate reads of a request head before libmicrohttpd gets the
 * connection: where the head ends, and which share of the connections it
 * may use (health check, control token, anything else). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "server/server_internal.h"

#define CONTROL "unit-control-token-0123456789abcdef"

static void head_length(void **state) {
  (void)state;
  static const struct {
    const char *buf;
    size_t want;
  } cases[] = {
      {"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 34},
      {"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n{\"body\":1}", 34},
      {"GET /healthz HTTP/1.1\nHost: x\n\nrest", 31},
      {"GET /healthz HTTP/1.1\r\nHost: x\r\n", 0},
      {"GET /healthz HTTP/1.1\r\nHost: x\r\n\r", 0},
      {"", 0},
      {"\r\n\r\n", 4},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    size_t got = server_gate_head_length(cases[i].buf, strlen(cases[i].buf));
    if (got != cases[i].want) fail_msg("case %zu: %zu, want %zu", i, got, cases[i].want);
  }
}

static void head_class(void **state) {
  (void)state;
  static const struct {
    const char *head;
    server_gate_class want;
  } cases[] = {
      {"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", SM_GATE_HEALTH},
      {"HEAD /healthz HTTP/1.1\r\n\r\n", SM_GATE_HEALTH},
      {"GET /healthz?x=1 HTTP/1.1\r\n\r\n", SM_GATE_HEALTH},
      {"POST /healthz HTTP/1.1\r\n\r\n", SM_GATE_OTHER},
      {"GET /healthzz HTTP/1.1\r\n\r\n", SM_GATE_OTHER},
      {"GET /v1/sandboxes HTTP/1.1\r\nAuthorization: Bearer " CONTROL "\r\n\r\n",
       SM_GATE_CONTROL},
      {"POST /v1/execute HTTP/1.1\r\nHost: x\r\nauthorization:   bearer  " CONTROL
       "  \r\nContent-Length: 2\r\n\r\n",
       SM_GATE_CONTROL},
      {"POST /v1/execute HTTP/1.1\nAuthorization: Bearer " CONTROL "\n\n", SM_GATE_CONTROL},
      {"POST /v1/execute HTTP/1.1\r\nAuthorization: Bearer " CONTROL "x\r\n\r\n", SM_GATE_OTHER},
      {"POST /v1/execute HTTP/1.1\r\nAuthorization: Bearer unit-control\r\n\r\n", SM_GATE_OTHER},
      {"POST /v1/execute HTTP/1.1\r\nAuthorization: Basic " CONTROL "\r\n\r\n", SM_GATE_OTHER},
      {"POST /v1/execute HTTP/1.1\r\nX-Authorization: Bearer " CONTROL "\r\n\r\n", SM_GATE_OTHER},
      {"POST /v1/execute HTTP/1.1\r\nAuthorization: Bearer\r\n\r\n", SM_GATE_OTHER},
      {"POST /v1/execute HTTP/1.1\r\n\r\nAuthorization: Bearer " CONTROL "\r\n\r\n", SM_GATE_OTHER},
      {"garbage", SM_GATE_OTHER},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    server_gate_class got = server_gate_head_class(cases[i].head, strlen(cases[i].head), CONTROL);
    if (got != cases[i].want) fail_msg("case %zu (%s): %d, want %d", i, cases[i].head, got, cases[i].want);
  }
  /* A head is not NUL-terminated where the gate reads it; a NUL inside
   * only narrows the class. */
  const char with_nul[] = "POST /x HTTP/1.1\r\nAuthorization: Bearer " CONTROL "\0\r\n\r\n";
  assert_int_equal(server_gate_head_class(with_nul, sizeof with_nul - 1, CONTROL), SM_GATE_CONTROL);
  const char nul_first[] = "POST /x HTTP/1.1\r\n\0Authorization: Bearer " CONTROL "\r\n\r\n";
  assert_int_equal(server_gate_head_class(nul_first, sizeof nul_first - 1, CONTROL), SM_GATE_OTHER);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(head_length),
      cmocka_unit_test(head_class),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
