/* Internal to src/lib/server: WebSocket framing (RFC 6455), pure: the
 * handshake's accept value, an incremental frame reader that reassembles
 * messages under hard caps, and frame headers and masking for writers.
 * No I/O here: websocket_conn.c runs a connection on a socket with it, for
 * any runner route (the terminals' attach is the first).
 *
 * The reader enforces what the RFC makes a protocol error, and fails
 * closed on anything else unexpected: reserved bits set (no extension is
 * ever negotiated), an unknown opcode, a control frame that is fragmented
 * or longer than 125 bytes, a continuation without a message or a new
 * message inside one, a frame masked when it must not be or not masked
 * when it must (client to server), a 64-bit length with its top bit set,
 * a close payload of one byte or with a code the RFC forbids on the wire,
 * text that is not UTF-8. A frame longer than max_frame or a message longer
 * than max_message is refused before its payload is read (1009). */
#ifndef SANDMAN_SERVER_WEBSOCKET_H
#define SANDMAN_SERVER_WEBSOCKET_H

#include <stddef.h>
#include <stdint.h>

enum {
  SERVER_WS_CONT = 0x0,
  SERVER_WS_TEXT = 0x1,
  SERVER_WS_BINARY = 0x2,
  SERVER_WS_CLOSE = 0x8,
  SERVER_WS_PING = 0x9,
  SERVER_WS_PONG = 0xA,
};

/* Close codes (RFC 6455 section 7.4.1) the runner sends. */
enum {
  SERVER_WS_NORMAL = 1000,
  SERVER_WS_GOING_AWAY = 1001,
  SERVER_WS_PROTOCOL_ERROR = 1002,
  SERVER_WS_UNSUPPORTED = 1003,
  SERVER_WS_NO_STATUS = 1005, /* reported, never sent: a close without a code */
  SERVER_WS_ABNORMAL = 1006,  /* reported, never sent: no close frame */
  SERVER_WS_BAD_DATA = 1007,
  SERVER_WS_POLICY = 1008,
  SERVER_WS_TOO_BIG = 1009,
  SERVER_WS_INTERNAL = 1011,
};

#define SERVER_WS_KEY_LEN 24    /* base64 of 16 random bytes */
#define SERVER_WS_ACCEPT_LEN 28 /* base64 of a SHA-1 */
#define SERVER_WS_HEADER_MAX 14 /* 2 + 8 (length) + 4 (mask) */
#define SERVER_WS_CONTROL_MAX 125

/* Sec-WebSocket-Accept for the client's Sec-WebSocket-Key into out (28
 * characters and a NUL): base64(SHA-1(key "258EAFA5-E914-47DA-95CA-
 * C5AB0DC85B11")). -1 when key is not 24 characters of base64 that decode
 * to 16 bytes (the RFC's only valid form). */
int server_ws_accept(const char *key, char out[SERVER_WS_ACCEPT_LEN + 1]);

/* The header of a frame into out; returns its length (2 to 14). mask NULL:
 * unmasked (server to client); else the 4 mask bytes are written after
 * the length, and the payload must be masked with them
 * (server_ws_mask). */
size_t server_ws_header(unsigned char out[SERVER_WS_HEADER_MAX], int fin, int opcode, uint64_t len,
                        const unsigned char *mask);
/* XORs data with the mask, as if data started at byte offset of the
 * payload (masking is its own inverse). */
void server_ws_mask(unsigned char *data, size_t len, const unsigned char mask[4], uint64_t offset);

/* A close frame's payload (code, then reason cut to fit 123 bytes at a
 * UTF-8 boundary) into out; returns its length. */
size_t server_ws_close_payload(unsigned char out[SERVER_WS_CONTROL_MAX], int code,
                               const char *reason);

/* 1 when data[0..len) is valid UTF-8 (no overlong forms, no surrogates,
 * nothing above U+10FFFF). */
int server_ws_utf8_valid(const unsigned char *data, size_t len);

/* A whole message (text or binary, reassembled) or a control frame
 * (close, ping, pong) as it arrives. For a close, data is its payload as
 * sent (already checked). A non-zero return stops the feed and is its
 * result. */
typedef int (*server_ws_message_fn)(void *ud, int opcode, const unsigned char *data, size_t len);

typedef struct server_ws_reader {
  int masked;         /* frames must be masked (1: the server side) or not (0) */
  size_t max_frame;   /* payload of one frame */
  size_t max_message; /* a reassembled message */
  server_ws_message_fn on_message;
  void *ud;
  /* the frame being read */
  unsigned char head[SERVER_WS_HEADER_MAX];
  size_t head_have, head_need;
  int fin, opcode;
  unsigned char mask[4];
  uint64_t len, got;
  unsigned char control[SERVER_WS_CONTROL_MAX];
  /* the message being reassembled (opcode 0: none) */
  int msg_opcode;
  unsigned char *msg;
  size_t msg_len, msg_cap;
  int failed; /* the close code of the first error; the reader stays failed */
} server_ws_reader;

void server_ws_reader_init(server_ws_reader *r, int masked, size_t max_frame, size_t max_message,
                           server_ws_message_fn on_message, void *ud);
/* 0, or the close code of a protocol error (1002, 1007, 1009; 1011 when out
 * of memory), or what on_message returned. */
int server_ws_reader_feed(server_ws_reader *r, const unsigned char *data, size_t len);
void server_ws_reader_dispose(server_ws_reader *r);

/* The code of a close payload (1005 when it has none); -1 when the payload
 * is malformed (one byte, a code not allowed on the wire, a reason that is
 * not UTF-8). */
int server_ws_close_code(const unsigned char *payload, size_t len);

#endif
