/* WebSocket framing (RFC 6455): see websocket.h. */
#include "server/websocket.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

static int b64_char(int c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
         c == '/';
}

int server_ws_accept(const char *key, char out[SERVER_WS_ACCEPT_LEN + 1]) {
  out[0] = '\0';
  if (key == NULL || strlen(key) != SERVER_WS_KEY_LEN) return -1;
  /* 16 bytes are 22 characters of base64 and "==". */
  for (int i = 0; i < 22; i++)
    if (!b64_char((unsigned char)key[i])) return -1;
  if (key[22] != '=' || key[23] != '=') return -1;
  /* The last character carries 2 bits: the rest must be zero. */
  if (strchr("AQgw", key[21]) == NULL) return -1;
  char buf[SERVER_WS_KEY_LEN + sizeof WS_GUID];
  memcpy(buf, key, SERVER_WS_KEY_LEN);
  memcpy(buf + SERVER_WS_KEY_LEN, WS_GUID, sizeof WS_GUID);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int dlen = 0;
  if (EVP_Digest(buf, SERVER_WS_KEY_LEN + sizeof WS_GUID - 1, digest, &dlen, EVP_sha1(), NULL) !=
          1 ||
      dlen != 20)
    return -1;
  unsigned char enc[SERVER_WS_ACCEPT_LEN + 4];
  if (EVP_EncodeBlock(enc, digest, 20) != SERVER_WS_ACCEPT_LEN) return -1;
  memcpy(out, enc, SERVER_WS_ACCEPT_LEN);
  out[SERVER_WS_ACCEPT_LEN] = '\0';
  return 0;
}

size_t server_ws_header(unsigned char out[SERVER_WS_HEADER_MAX], int fin, int opcode, uint64_t len,
                        const unsigned char *mask) {
  size_t n = 0;
  out[n++] = (unsigned char)((fin ? 0x80 : 0) | (opcode & 0x0f));
  unsigned char m = mask ? 0x80 : 0;
  if (len < 126) {
    out[n++] = (unsigned char)(m | len);
  } else if (len <= 0xffff) {
    out[n++] = m | 126;
    out[n++] = (unsigned char)(len >> 8);
    out[n++] = (unsigned char)len;
  } else {
    out[n++] = m | 127;
    for (int i = 7; i >= 0; i--) out[n++] = (unsigned char)(len >> (8 * i));
  }
  if (mask) {
    memcpy(out + n, mask, 4);
    n += 4;
  }
  return n;
}

void server_ws_mask(unsigned char *data, size_t len, const unsigned char mask[4], uint64_t offset) {
  for (size_t i = 0; i < len; i++) data[i] ^= mask[(offset + i) & 3];
}

/* The length of the longest prefix of s[0..len) that ends on a UTF-8
 * character boundary (s itself is assumed valid). */
static size_t utf8_cut(const char *s, size_t len) {
  while (len > 0 && ((unsigned char)s[len] & 0xc0) == 0x80) len--;
  return len;
}

size_t server_ws_close_payload(unsigned char out[SERVER_WS_CONTROL_MAX], int code,
                               const char *reason) {
  out[0] = (unsigned char)(code >> 8);
  out[1] = (unsigned char)code;
  size_t n = reason ? strlen(reason) : 0;
  if (n > SERVER_WS_CONTROL_MAX - 2) n = utf8_cut(reason, SERVER_WS_CONTROL_MAX - 2);
  if (n && !server_ws_utf8_valid((const unsigned char *)reason, n)) n = 0;
  if (n) memcpy(out + 2, reason, n);
  return 2 + n;
}

int server_ws_utf8_valid(const unsigned char *s, size_t len) {
  size_t i = 0;
  while (i < len) {
    unsigned c = s[i];
    if (c < 0x80) {
      i++;
      continue;
    }
    size_t need;
    unsigned min;
    if ((c & 0xe0) == 0xc0) need = 1, min = 0x80, c &= 0x1f;
    else if ((c & 0xf0) == 0xe0) need = 2, min = 0x800, c &= 0x0f;
    else if ((c & 0xf8) == 0xf0) need = 3, min = 0x10000, c &= 0x07;
    else return 0;
    if (len - i <= need) return 0;
    for (size_t k = 1; k <= need; k++) {
      if ((s[i + k] & 0xc0) != 0x80) return 0;
      c = (c << 6) | (s[i + k] & 0x3f);
    }
    if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) return 0;
    i += need + 1;
  }
  return 1;
}

/* Codes a peer may send (RFC 6455 7.4.1 and 7.4.2): 1000-1003, 1007-1011
 * (1012-1014 are registered since), 3000-4999. */
static int code_allowed(int code) {
  return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) ||
         (code >= 3000 && code <= 4999);
}

int server_ws_close_code(const unsigned char *p, size_t len) {
  if (len == 0) return SERVER_WS_NO_STATUS;
  if (len == 1) return -1;
  int code = (p[0] << 8) | p[1];
  if (!code_allowed(code)) return -1;
  if (!server_ws_utf8_valid(p + 2, len - 2)) return -1;
  return code;
}

void server_ws_reader_init(server_ws_reader *r, int masked, size_t max_frame, size_t max_message,
                           server_ws_message_fn on_message, void *ud) {
  memset(r, 0, sizeof *r);
  r->masked = masked;
  r->max_frame = max_frame;
  r->max_message = max_message;
  r->on_message = on_message;
  r->ud = ud;
  r->head_need = 2;
}

void server_ws_reader_dispose(server_ws_reader *r) {
  free(r->msg);
  r->msg = NULL;
  r->msg_len = r->msg_cap = 0;
}

static int fail(server_ws_reader *r, int code) {
  if (!r->failed) r->failed = code;
  return r->failed;
}

static int is_control(int op) { return op >= 0x8; }

/* The first two bytes are in: how long the header is, and what it says
 * that can be checked before the length. */
static int head_start(server_ws_reader *r) {
  unsigned char b0 = r->head[0], b1 = r->head[1];
  if (b0 & 0x70) return fail(r, SERVER_WS_PROTOCOL_ERROR); /* RSV1-3: no extension */
  r->fin = (b0 & 0x80) != 0;
  r->opcode = b0 & 0x0f;
  int op = r->opcode;
  if (op != SERVER_WS_CONT && op != SERVER_WS_TEXT && op != SERVER_WS_BINARY &&
      op != SERVER_WS_CLOSE && op != SERVER_WS_PING && op != SERVER_WS_PONG)
    return fail(r, SERVER_WS_PROTOCOL_ERROR);
  if (((b1 & 0x80) != 0) != (r->masked != 0)) return fail(r, SERVER_WS_PROTOCOL_ERROR);
  unsigned len7 = b1 & 0x7f;
  if (is_control(op) && (!r->fin || len7 > SERVER_WS_CONTROL_MAX))
    return fail(r, SERVER_WS_PROTOCOL_ERROR);
  if (op == SERVER_WS_CONT && r->msg_opcode == 0) return fail(r, SERVER_WS_PROTOCOL_ERROR);
  if ((op == SERVER_WS_TEXT || op == SERVER_WS_BINARY) && r->msg_opcode != 0)
    return fail(r, SERVER_WS_PROTOCOL_ERROR);
  r->head_need = 2 + (len7 == 126 ? 2 : len7 == 127 ? 8 : 0) + (r->masked ? 4 : 0);
  return 0;
}

/* The whole header is in: the length and the mask. */
static int head_done(server_ws_reader *r) {
  unsigned len7 = r->head[1] & 0x7f;
  size_t at = 2;
  uint64_t len = len7;
  if (len7 == 126) {
    len = (uint64_t)r->head[2] << 8 | r->head[3];
    at = 4;
  } else if (len7 == 127) {
    len = 0;
    for (int i = 0; i < 8; i++) len = len << 8 | r->head[2 + i];
    if (len >> 63) return fail(r, SERVER_WS_PROTOCOL_ERROR);
    at = 10;
  }
  if (r->masked) memcpy(r->mask, r->head + at, 4);
  if (len > r->max_frame) return fail(r, SERVER_WS_TOO_BIG);
  if (!is_control(r->opcode) && len > r->max_message - r->msg_len)
    return fail(r, SERVER_WS_TOO_BIG);
  r->len = len;
  r->got = 0;
  if (r->opcode == SERVER_WS_TEXT || r->opcode == SERVER_WS_BINARY) {
    r->msg_opcode = r->opcode;
    r->msg_len = 0;
  }
  return 0;
}

static int grow_message(server_ws_reader *r, size_t need) {
  if (need <= r->msg_cap) return 0;
  size_t cap = r->msg_cap ? r->msg_cap : 4096;
  while (cap < need) cap = cap > (SIZE_MAX / 2) ? need : cap * 2;
  if (cap > r->max_message) cap = r->max_message;
  unsigned char *m = realloc(r->msg, cap ? cap : 1);
  if (m == NULL) return -1;
  r->msg = m;
  r->msg_cap = cap;
  return 0;
}

/* The frame's payload is in (control frames in r->control, data in the
 * message): hands on what is complete. */
static int frame_done(server_ws_reader *r) {
  int op = r->opcode;
  int rc = 0;
  if (is_control(op)) {
    if (op == SERVER_WS_CLOSE && server_ws_close_code(r->control, (size_t)r->len) < 0)
      return fail(r, SERVER_WS_PROTOCOL_ERROR);
    rc = r->on_message(r->ud, op, r->control, (size_t)r->len);
  } else if (r->fin) {
    int text = r->msg_opcode == SERVER_WS_TEXT;
    if (text && !server_ws_utf8_valid(r->msg, r->msg_len)) return fail(r, SERVER_WS_BAD_DATA);
    int mop = r->msg_opcode;
    r->msg_opcode = 0;
    rc = r->on_message(r->ud, mop, r->msg ? r->msg : (const unsigned char *)"", r->msg_len);
    r->msg_len = 0;
  }
  r->head_have = 0;
  r->head_need = 2;
  return rc;
}

/* Payload bytes of the current frame, unmasked into place. */
static size_t take_payload(server_ws_reader *r, const unsigned char *data, size_t len) {
  uint64_t left = r->len - r->got;
  size_t n = left < len ? (size_t)left : len;
  unsigned char *dst = is_control(r->opcode) ? r->control + r->got : r->msg + r->msg_len;
  memcpy(dst, data, n);
  if (r->masked) server_ws_mask(dst, n, r->mask, r->got);
  if (!is_control(r->opcode)) r->msg_len += n;
  r->got += n;
  return n;
}

int server_ws_reader_feed(server_ws_reader *r, const unsigned char *data, size_t len) {
  if (r->failed) return r->failed;
  size_t i = 0;
  while (i < len) {
    if (r->head_have < r->head_need) {
      size_t want = r->head_need - r->head_have;
      size_t n = len - i < want ? len - i : want;
      memcpy(r->head + r->head_have, data + i, n);
      r->head_have += n;
      i += n;
      if (r->head_have < r->head_need) break;
      if (r->head_have == 2) {
        int rc = head_start(r);
        if (rc) return rc;
        if (r->head_have < r->head_need) continue;
      }
      int rc = head_done(r);
      if (rc) return rc;
      if (!is_control(r->opcode) && grow_message(r, r->msg_len + (size_t)r->len) != 0)
        return fail(r, SERVER_WS_INTERNAL);
    }
    if (r->got < r->len) i += take_payload(r, data + i, len - i);
    if (r->got == r->len) {
      int rc = frame_done(r);
      if (rc) return r->failed ? r->failed : rc;
    }
  }
  return 0;
}
