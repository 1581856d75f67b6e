/* Fuzzes what the host-tool route's relay reads from a sandbox process
 * (agent_route_http_head) and sandman-tools' JSON reader. For the head: an
 * exact-size copy (ASan catches a read past it), the verdict is one of the
 * documented ones, a complete head ends with the blank line inside the
 * input and within its caps, and every prefix of a complete head reads as
 * "more" (the relay reads in pieces). For the JSON: a tree that parsed
 * reads back the same from each node's own text. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/json_mini.h"
#include "agent/route_http.h"

static void check_head(const uint8_t *data, size_t size, size_t max) {
  char *copy = malloc(size ? size : 1);
  if (copy == NULL) return;
  if (size) memcpy(copy, data, size);
  route_head h;
  int st = agent_route_http_head(copy, size, max, &h);
  if (st != 0 && st != 1 && st != 400 && st != 411 && st != 413 && st != 431) abort();
  if (st == 1) {
    if (h.head_len < 4 || h.head_len > size || h.head_len > ROUTE_HEAD_MAX) abort();
    if (memcmp(copy + h.head_len - 4, "\r\n\r\n", 4) != 0) abort();
    if (h.body_len > max || h.head_len + h.body_len > max) abort();
    /* Cut before its blank line the same head wants more. */
    route_head p;
    if (agent_route_http_head(copy, h.head_len - 1, max, &p) != 0) abort();
  }
  free(copy);
}

static void check_json(const jm_node *n, int depth) {
  if (depth > JM_MAX_DEPTH) abort();
  for (; n; n = n->next) {
    jm_node *again = agent_json_parse(n->raw, n->raw_len);
    if (again == NULL || again->type != n->type) abort();
    if (n->type == JM_STR && (again->str_len != n->str_len ||
                              memcmp(again->str, n->str, n->str_len) != 0))
      abort();
    agent_json_free(again);
    check_json(n->child, depth + 1);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  size_t max = (data[0] & 1) ? (4u << 20) : 64 + (size_t)data[0] * 4;
  check_head(data + 1, size - 1, max);
  jm_node *doc = agent_json_parse((const char *)data + 1, size - 1);
  if (doc) check_json(doc, 0);
  agent_json_free(doc);
  return 0;
}
