/* The agent protocol's framing (see frame.h). Shared by the library and by
 * sandman-agent, so it uses nothing but libc. */
#include "agent/frame.h"

#include <stdlib.h>
#include <string.h>

void agent_frame_put_u32(unsigned char *p, uint32_t v) {
  p[0] = (unsigned char)(v >> 24);
  p[1] = (unsigned char)(v >> 16);
  p[2] = (unsigned char)(v >> 8);
  p[3] = (unsigned char)v;
}

uint32_t agent_frame_get_u32(const unsigned char *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

void agent_frame_put_u64(unsigned char *p, uint64_t v) {
  agent_frame_put_u32(p, (uint32_t)(v >> 32));
  agent_frame_put_u32(p + 4, (uint32_t)v);
}

uint64_t agent_frame_get_u64(const unsigned char *p) {
  return (uint64_t)agent_frame_get_u32(p) << 32 | agent_frame_get_u32(p + 4);
}

void agent_frame_header(unsigned char out[SM_FRAME_HEADER], int type, uint32_t call_id,
                        uint32_t len) {
  out[0] = (unsigned char)type;
  agent_frame_put_u32(out + 1, call_id);
  agent_frame_put_u32(out + 5, len);
}

uint32_t agent_frame_type_max(int type) {
  switch (type) {
  case SM_FRAME_CALL:
    return SM_FRAME_CALL_MAX;
  case SM_FRAME_TTY:
    return SM_FRAME_CALL_MAX + 4;
  case SM_FRAME_STDIN:
  case SM_FRAME_STDOUT:
  case SM_FRAME_STDERR:
    return SM_FRAME_DATA_MAX;
  case SM_FRAME_EOF:
    return 0;
  case SM_FRAME_HELLO:
  case SM_FRAME_FAIL:
    return 4096;
  case SM_FRAME_EXIT:
  case SM_FRAME_RESIZE:
    return 4;
  case SM_FRAME_NOT_AFTER:
    return 8;
  case SM_FRAME_ROUTE_REQUEST:
    return SM_FRAME_ROUTE_REQUEST_MAX;
  case SM_FRAME_ROUTE_RESPONSE:
    return SM_FRAME_ROUTE_RESPONSE_MAX;
  case SM_FRAME_PORT_OPEN:
    return 2;
  case SM_FRAME_PORT_OPENED:
  case SM_FRAME_PORT_ACK:
    return 4;
  case SM_FRAME_PORT_DATA:
    return SM_FRAME_DATA_MAX;
  case SM_FRAME_PORT_EOF:
  case SM_FRAME_PORT_CLOSE:
    return 0;
  default:
    return 0;
  }
}

static int known_type(int type) {
  return type == SM_FRAME_CALL || type == SM_FRAME_STDIN || type == SM_FRAME_EOF ||
         type == SM_FRAME_HELLO || type == SM_FRAME_STDOUT || type == SM_FRAME_STDERR ||
         type == SM_FRAME_EXIT || type == SM_FRAME_FAIL || type == SM_FRAME_ROUTE_REQUEST ||
         type == SM_FRAME_ROUTE_RESPONSE || type == SM_FRAME_TTY || type == SM_FRAME_RESIZE ||
         type == SM_FRAME_PORT_OPEN || type == SM_FRAME_PORT_OPENED || type == SM_FRAME_PORT_DATA ||
         type == SM_FRAME_PORT_ACK || type == SM_FRAME_PORT_EOF || type == SM_FRAME_PORT_CLOSE ||
         type == SM_FRAME_NOT_AFTER;
}

void agent_frame_reader_init(agent_frame_reader *r, uint32_t max_len, agent_frame_fn on_frame,
                             void *ud) {
  memset(r, 0, sizeof *r);
  r->max_len = max_len;
  r->on_frame = on_frame;
  r->ud = ud;
}

void agent_frame_reader_dispose(agent_frame_reader *r) {
  free(r->payload);
  r->payload = NULL;
  r->head_have = 0;
  r->need = r->have = 0;
}

int agent_frame_reader_idle(const agent_frame_reader *r) { return r->head_have == 0; }

static int deliver(agent_frame_reader *r) {
  unsigned char empty = 0;
  int rc = r->on_frame(r->ud, r->type, r->call_id, r->payload ? r->payload : &empty, r->need);
  free(r->payload);
  r->payload = NULL;
  r->head_have = 0;
  r->need = r->have = 0;
  return rc;
}

int agent_frame_reader_feed(agent_frame_reader *r, const unsigned char *data, size_t len) {
  while (len > 0) {
    if (r->head_have < SM_FRAME_HEADER) {
      size_t take = SM_FRAME_HEADER - r->head_have;
      if (take > len) take = len;
      memcpy(r->head + r->head_have, data, take);
      r->head_have += take;
      data += take;
      len -= take;
      if (r->head_have < SM_FRAME_HEADER) return 0;
      r->type = r->head[0];
      r->call_id = agent_frame_get_u32(r->head + 1);
      r->need = agent_frame_get_u32(r->head + 5);
      r->have = 0;
      if (!known_type(r->type) || r->need > agent_frame_type_max(r->type) || r->need > r->max_len)
        return -1;
      if (r->need == 0) {
        int rc = deliver(r);
        if (rc) return rc;
        continue;
      }
      /* One spare byte so a payload can be used as a C string. */
      r->payload = malloc((size_t)r->need + 1);
      if (r->payload == NULL) return -1;
      r->payload[r->need] = 0;
    }
    size_t take = r->need - r->have;
    if (take > len) take = len;
    memcpy(r->payload + r->have, data, take);
    r->have += (uint32_t)take;
    data += take;
    len -= take;
    if (r->have == r->need) {
      int rc = deliver(r);
      if (rc) return rc;
    }
  }
  return 0;
}

void agent_frame_size_put(unsigned char p[4], unsigned rows, unsigned cols) {
  p[0] = (unsigned char)(rows >> 8);
  p[1] = (unsigned char)rows;
  p[2] = (unsigned char)(cols >> 8);
  p[3] = (unsigned char)cols;
}

int agent_frame_size_get(const unsigned char *p, uint32_t len, unsigned *rows, unsigned *cols) {
  if (len < 4) return -1;
  unsigned r = (unsigned)p[0] << 8 | p[1], c = (unsigned)p[2] << 8 | p[3];
  if (r == 0 || c == 0 || r > SM_FRAME_TTY_DIM_MAX || c > SM_FRAME_TTY_DIM_MAX) return -1;
  *rows = r;
  *cols = c;
  return 0;
}

int agent_frame_parse_call(unsigned char *payload, uint32_t len, const char **cwd, char **argv,
                           size_t max_argv, size_t *argc, char **env, size_t max_env,
                           size_t *envc) {
  if (len == 0 || payload[len - 1] != 0) return -1;
  char *p = (char *)payload, *end = (char *)payload + len;
  *cwd = p;
  p += strlen(p) + 1;
  if (p >= end) return -1;
  char *num = p;
  p += strlen(p) + 1;
  size_t n = 0;
  if (*num == 0) return -1;
  for (const char *d = num; *d; d++) {
    if (*d < '0' || *d > '9' || n > max_argv) return -1;
    n = n * 10 + (size_t)(*d - '0');
  }
  if (n == 0 || n > max_argv) return -1;
  for (size_t i = 0; i < n; i++) {
    if (p >= end) return -1;
    argv[i] = p;
    p += strlen(p) + 1;
  }
  argv[n] = NULL;
  *argc = n;
  size_t e = 0;
  while (p < end) {
    if (e >= max_env) return -1;
    env[e++] = p;
    p += strlen(p) + 1;
  }
  env[e] = NULL;
  *envc = e;
  return 0;
}
