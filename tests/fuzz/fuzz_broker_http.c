/* Fuzzes the broker's HTTP request parser (broker_http_parse, src/lib/broker/
 * http_msg.c), which reads the whole request the host-tool route's relay
 * forwarded, on an exact-size copy (ASan catches a read past it). The
 * verdict is one of the documented ones with a reason; an accepted
 * request has a method of capitals, a path starting with '/', values cut to
 * their caps, and a body inside the input that ends with it. And the two
 * readers of one request agree: when the relay's head reader
 * (agent_route_http_head, src/shared/agent/route_http.c) found a whole request in the
 * input and the broker accepts it, both see the same head and body. */
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/hostroute.h>

#include "agent/route_http.h"
#include "broker/http_msg.h"

static void check_accepted(const char *copy, size_t size, const bk_http_msg *m) {
  if (m->method[0] == '\0' || m->path[0] != '/') abort();
  for (const char *c = m->method; *c; c++)
    if (!isupper((unsigned char)*c)) abort();
  const char *values[] = {m->accept, m->content_type, m->session_id, m->protocol_version,
                          m->origin};
  for (size_t i = 0; i < sizeof values / sizeof values[0]; i++)
    if (strnlen(values[i], BK_HTTP_VALUE_MAX) >= BK_HTTP_VALUE_MAX) abort();
  if (m->body < copy || m->body > copy + size || m->body_len != (size_t)(copy + size - m->body))
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *copy = malloc(size ? size : 1);
  if (copy == NULL) return 0;
  if (size) memcpy(copy, data, size);
  bk_http_msg m;
  const char *why = NULL;
  int st = broker_http_parse(copy, size, &m, &why);
  if (st != 0 && st != 400 && st != 411 && st != 413 && st != 501) abort();
  if (st != 0 && (why == NULL || why[0] == '\0')) abort();
  if (st == 0) {
    check_accepted(copy, size, &m);
    route_head h;
    if (agent_route_http_head(copy, size, SM_ROUTE_REQUEST_MAX, &h) == 1 &&
        h.head_len + h.body_len == size &&
        (m.body != copy + h.head_len || m.body_len != h.body_len))
      abort();
  }
  free(copy);
  return 0;
}
