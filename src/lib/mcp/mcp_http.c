/* The MCP streamable HTTP transport, as functions a route calls: a table of
 * sessions (id, owner, idle life) and the answer to one request to the MCP
 * endpoint. The route authenticates the caller and passes who it is as the
 * owner: a session is visible only to the owner that made it (any other
 * gets 404, as for an unknown id).
 *
 * POST carries one JSON-RPC message. Of the initialize era: an
 * `initialize` makes a session (its id in Mcp-Session-Id), every other
 * message names its session. Of the 2026-07-28 revision (params._meta
 * names a protocol version, or MCP-Protocol-Version does): no session id
 * is made or read; the headers MCP-Protocol-Version, Mcp-Method and
 * Mcp-Name must say what the body says (else 400, HeaderMismatch), and
 * the request is served by the owner's one stateless context, a session
 * made for it on its first such request and ended like any (idle, or the
 * table's end): what its tools did (a sandbox's files) and its tasks are
 * the owner's, and nobody else's. Requests are answered 200 with
 * application/json, or with a one-event SSE stream when the client
 * accepts only text/event-stream; a 2026-07-28 refusal goes with 400 (a
 * malformed request, an unsupported version, a missing capability) or 404
 * (an unknown method); notifications and responses 202. GET (a
 * server-initiated stream) is not offered: 405. DELETE ends a session. A
 * request with an Origin header that is not allowed is 403 (DNS
 * rebinding: a browser page must not reach a local runner). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/rand.h>

#include <sandman/mcp.h>
#include <sandman/util.h>

#include "mcp/headers.h"
#include "mcp/mcp_internal.h"
#include "mcp/revision.h"
#include "mcp/session.h"

typedef struct entry {
  char id[65];
  char *owner;
  sm_mcp_session *s;
  double last_used; /* monotonic ms */
  unsigned refs;    /* requests using it now */
  int ended;        /* removed from the table: freed by the last user */
  int stateless;    /* the owner's context for 2026-07-28 requests (no id) */
  struct entry *next;
} entry;

struct sm_mcp_http {
  pthread_mutex_t mu;
  entry *list;
  unsigned count;
  sm_mcp_session_factory factory;
  void *factory_ud;
  unsigned max_sessions, max_per_owner;
  double idle_ms;
  size_t max_message;
  char **origins;
  size_t n_origins;
};

int sm_mcp_http_new(sm_mcp_http **out, const sm_mcp_http_options *opts, sm_error *err) {
  *out = NULL;
  if (opts == NULL || opts->factory == NULL)
    return sm_error_set(err, SM_EINVAL, "the MCP endpoint needs a session factory");
  sm_mcp_http *h = calloc(1, sizeof *h);
  if (h == NULL) return sm_error_set(err, SM_ENOMEM, NULL);
  pthread_mutex_init(&h->mu, NULL);
  h->factory = opts->factory;
  h->factory_ud = opts->factory_ud;
  h->max_sessions = opts->max_sessions ? opts->max_sessions : 64;
  h->max_per_owner = opts->max_sessions_per_owner;
  h->idle_ms = (opts->idle_timeout_s > 0 ? opts->idle_timeout_s : 3600) * 1000.0;
  h->max_message = opts->max_message ? opts->max_message : SM_MCP_DEFAULT_MAX_MESSAGE;
  if (opts->n_origins) {
    h->origins = calloc(opts->n_origins, sizeof *h->origins);
    if (h->origins == NULL) {
      sm_mcp_http_free(h);
      return sm_error_set(err, SM_ENOMEM, NULL);
    }
    for (size_t i = 0; i < opts->n_origins; i++) {
      if ((h->origins[i] = strdup(opts->origins[i])) == NULL) {
        sm_mcp_http_free(h);
        return sm_error_set(err, SM_ENOMEM, NULL);
      }
      h->n_origins++;
    }
  }
  *out = h;
  return 0;
}

static void entry_free(entry *e) {
  if (e == NULL) return;
  sm_mcp_session_cancel_all(e->s);
  sm_mcp_session_free(e->s);
  free(e->owner);
  free(e);
}

void sm_mcp_http_free(sm_mcp_http *h) {
  if (h == NULL) return;
  entry *e = h->list;
  while (e) {
    entry *next = e->next;
    entry_free(e); /* the routes are stopped: nobody holds a reference */
    e = next;
  }
  for (size_t i = 0; i < h->n_origins; i++) free(h->origins[i]);
  free(h->origins);
  pthread_mutex_destroy(&h->mu);
  free(h);
}

unsigned sm_mcp_http_count(sm_mcp_http *h) {
  pthread_mutex_lock(&h->mu);
  unsigned n = h->count;
  pthread_mutex_unlock(&h->mu);
  return n;
}

/* Unlinks e (under the lock); returns it when nobody uses it any more, so
 * that the caller frees it after unlocking. */
static entry *unlink_entry(sm_mcp_http *h, entry *e) {
  for (entry **pp = &h->list; *pp; pp = &(*pp)->next)
    if (*pp == e) {
      *pp = e->next;
      h->count--;
      break;
    }
  e->ended = 1;
  e->next = NULL;
  if (e->refs == 0) return e;
  sm_mcp_session_cancel_all(e->s); /* its last user frees it */
  return NULL;
}

/* Takes the expired sessions out of the table (under the lock) as a list
 * to free after unlocking: ending one may remove a sandbox. */
static entry *take_expired(sm_mcp_http *h) {
  double now = sm_monotonic_ms();
  entry *dead = NULL;
  entry **pp = &h->list;
  while (*pp) {
    entry *e = *pp;
    if (e->refs == 0 && now - e->last_used > h->idle_ms && !mcp_session_busy(e->s)) {
      *pp = e->next;
      h->count--;
      e->ended = 1;
      e->next = dead;
      dead = e;
      continue;
    }
    pp = &e->next;
  }
  return dead;
}

static void free_list(entry *e) {
  while (e) {
    entry *next = e->next;
    entry_free(e);
    e = next;
  }
}

void sm_mcp_http_expire(sm_mcp_http *h) {
  pthread_mutex_lock(&h->mu);
  entry *dead = take_expired(h);
  pthread_mutex_unlock(&h->mu);
  free_list(dead);
}

void sm_mcp_http_answer_dispose(sm_mcp_http_answer *a) {
  if (a == NULL) return;
  free(a->body);
  a->body = NULL;
  a->body_len = 0;
}

/* An error answer: status and the JSON-RPC error a (taken). */
static int http_answer(sm_mcp_http_answer *out, int status, json_object *a, sm_error *err) {
  out->status = status;
  int rc = mcp_answer_text(a, &out->body, &out->body_len, err);
  json_object_put(a);
  out->content_type = rc == 0 ? "application/json" : NULL;
  return rc;
}

/* An error answer: status and a JSON-RPC error with a null id. */
static int http_error(sm_mcp_http_answer *out, int status, int code, const char *msg, sm_error *err) {
  return http_answer(out, status, mcp_error(NULL, code, "%s", msg), err);
}

static int header_has(const char *value, const char *token) {
  if (value == NULL) return 0;
  size_t n = strlen(token);
  for (const char *p = value; (p = strstr(p, token)) != NULL; p += n) {
    int start = p == value || p[-1] == ' ' || p[-1] == ',' || p[-1] == '\t';
    char end = p[n];
    if (start && (end == '\0' || end == ',' || end == ';' || end == ' ')) return 1;
  }
  return 0;
}

static int origin_allowed(sm_mcp_http *h, const char *origin) {
  if (origin == NULL) return 1; /* not a browser */
  for (size_t i = 0; i < h->n_origins; i++)
    if (strcmp(h->origins[i], origin) == 0) return 1;
  return 0;
}

/* Puts the answer text in out: JSON, or one SSE event when the client
 * takes only text/event-stream. */
static int set_answer(sm_mcp_http_answer *out, const char *accept, char *answer, size_t len,
                      sm_error *err) {
  out->status = 200;
  int sse = header_has(accept, "text/event-stream") && !header_has(accept, "application/json") &&
            !header_has(accept, "*/*") && !header_has(accept, "application/*");
  if (!sse) {
    out->content_type = "application/json";
    out->body = answer;
    out->body_len = len;
    return 0;
  }
  static const char head[] = "event: message\ndata: ", tail[] = "\n\n";
  char *b = malloc(sizeof head - 1 + len + sizeof tail);
  if (b == NULL) {
    free(answer);
    return sm_error_set(err, SM_ENOMEM, NULL);
  }
  memcpy(b, head, sizeof head - 1);
  memcpy(b + sizeof head - 1, answer, len);
  memcpy(b + sizeof head - 1 + len, tail, sizeof tail);
  free(answer);
  out->content_type = "text/event-stream";
  out->body = b;
  out->body_len = sizeof head - 1 + len + sizeof tail - 1;
  return 0;
}

static int new_session_id(char out[65]) {
  unsigned char raw[32];
  if (RAND_bytes(raw, sizeof raw) != 1) return -1;
  static const char hex[] = "0123456789abcdef";
  for (size_t i = 0; i < sizeof raw; i++) {
    out[2 * i] = hex[raw[i] >> 4];
    out[2 * i + 1] = hex[raw[i] & 15];
  }
  out[64] = '\0';
  return 0;
}

/* Sessions of owner in the table (h->mu held). */
static unsigned owned_by(sm_mcp_http *h, const char *owner) {
  unsigned n = 0;
  for (entry *e = h->list; e; e = e->next)
    if (strcmp(e->owner, owner ? owner : "") == 0) n++;
  return n;
}

static int post_initialize(sm_mcp_http *h, const sm_mcp_http_request *req, sm_mcp_http_answer *out,
                           sm_error *err) {
  pthread_mutex_lock(&h->mu);
  entry *dead = take_expired(h);
  int full = h->count >= h->max_sessions ||
             (h->max_per_owner && owned_by(h, req->owner) >= h->max_per_owner);
  pthread_mutex_unlock(&h->mu);
  free_list(dead);
  if (full)
    return http_error(out, 503, MCP_SERVER_BUSY, "too many MCP sessions; end one (DELETE) or wait", err);
  entry *e = calloc(1, sizeof *e);
  if (e == NULL || (e->owner = strdup(req->owner ? req->owner : "")) == NULL || new_session_id(e->id) != 0) {
    if (e) free(e->owner);
    free(e);
    return sm_error_set(err, SM_ENOMEM, "making an MCP session");
  }
  sm_error ferr = SM_ERROR_INIT;
  if (h->factory(h->factory_ud, e->owner, &e->s, &ferr) != 0) {
    free(e->owner);
    free(e);
    char msg[SM_ERROR_MESSAGE_MAX + 64];
    snprintf(msg, sizeof msg, "the session could not be made: %s", ferr.message);
    int status = ferr.code == SM_EPOLICY ? 403 : 503;
    return http_error(out, status, MCP_INTERNAL_ERROR, msg, err);
  }
  char *answer = NULL;
  size_t alen = 0;
  int rc = sm_mcp_session_handle_for(e->s, req->context, req->body, req->body_len, req->cancel,
                                     &answer, &alen, err);
  if (rc || answer == NULL || sm_mcp_session_protocol(e->s) == NULL) {
    /* initialize failed: nothing to keep, the error goes back as is. */
    entry_free(e);
    if (rc) return rc;
    out->status = 400;
    out->content_type = answer ? "application/json" : NULL;
    out->body = answer;
    out->body_len = alen;
    return 0;
  }
  e->last_used = sm_monotonic_ms();
  pthread_mutex_lock(&h->mu);
  e->next = h->list;
  h->list = e;
  h->count++;
  pthread_mutex_unlock(&h->mu);
  snprintf(out->session_id, sizeof out->session_id, "%s", e->id);
  return set_answer(out, req->accept, answer, alen, err);
}

/* The live session id for owner, with a reference taken; NULL if none. */
static entry *find(sm_mcp_http *h, const char *id, const char *owner) {
  pthread_mutex_lock(&h->mu);
  entry *e = h->list;
  for (; e; e = e->next)
    if (!e->ended && !e->stateless && strcmp(e->id, id) == 0 &&
        strcmp(e->owner, owner ? owner : "") == 0)
      break;
  if (e) e->refs++;
  pthread_mutex_unlock(&h->mu);
  return e;
}

static void release(sm_mcp_http *h, entry *e) {
  pthread_mutex_lock(&h->mu);
  e->refs--;
  e->last_used = sm_monotonic_ms();
  int gone = e->ended && e->refs == 0;
  pthread_mutex_unlock(&h->mu);
  if (gone) entry_free(e);
}

/* ---- the 2026-07-28 revision: no session ---- */

/* The owner's stateless context with a reference taken (h->mu held), or
 * NULL. */
static entry *stateless_of(sm_mcp_http *h, const char *owner) {
  for (entry *e = h->list; e; e = e->next)
    if (e->stateless && !e->ended && strcmp(e->owner, owner ? owner : "") == 0) {
      e->refs++;
      return e;
    }
  return NULL;
}

/* The owner's stateless context, made on its first use; NULL with out
 * filled (503 when the table or the owner's share is full, 403 or 503
 * when the factory refuses). */
static entry *context_for(sm_mcp_http *h, const sm_mcp_http_request *req, sm_mcp_http_answer *out,
                          int *rc, sm_error *err) {
  pthread_mutex_lock(&h->mu);
  entry *dead = take_expired(h);
  entry *e = stateless_of(h, req->owner);
  int full = e == NULL && (h->count >= h->max_sessions ||
                           (h->max_per_owner && owned_by(h, req->owner) >= h->max_per_owner));
  pthread_mutex_unlock(&h->mu);
  free_list(dead);
  if (e) return e;
  if (full) {
    *rc = http_error(out, 503, MCP_BUSY, "too many MCP sessions; end one (DELETE) or wait", err);
    return NULL;
  }
  entry *n = calloc(1, sizeof *n);
  if (n == NULL || (n->owner = strdup(req->owner ? req->owner : "")) == NULL) {
    free(n);
    *rc = sm_error_set(err, SM_ENOMEM, "making an MCP context");
    return NULL;
  }
  sm_error ferr = SM_ERROR_INIT;
  if (h->factory(h->factory_ud, n->owner, &n->s, &ferr) != 0) {
    free(n->owner);
    free(n);
    char msg[SM_ERROR_MESSAGE_MAX + 64];
    snprintf(msg, sizeof msg, "the session could not be made: %s", ferr.message);
    *rc = http_error(out, ferr.code == SM_EPOLICY ? 403 : 503, MCP_INTERNAL_ERROR, msg, err);
    return NULL;
  }
  n->stateless = 1;
  n->refs = 1;
  n->last_used = sm_monotonic_ms();
  pthread_mutex_lock(&h->mu);
  e = stateless_of(h, req->owner); /* made meanwhile by another request */
  if (e == NULL) {
    n->next = h->list;
    h->list = n;
    h->count++;
    e = n;
    n = NULL;
  }
  pthread_mutex_unlock(&h->mu);
  entry_free(n);
  return e;
}

/* A request of the 2026-07-28 revision (msg: its parsed body). */
static int post_stateless(sm_mcp_http *h, const sm_mcp_http_request *req, json_object *msg,
                          sm_mcp_http_answer *out, sm_error *err) {
  json_object *id = NULL, *method = NULL;
  int has_id = json_object_object_get_ex(msg, "id", &id);
  if (!json_object_object_get_ex(msg, "method", &method) || !has_id) {
    out->status = 202; /* a notification (cancelling is closing the stream here) or a response */
    return 0;
  }
  char why[256];
  if (mcp_headers_check(msg, req->protocol_version, req->mcp_method, req->mcp_name, why, sizeof why) != 0)
    return http_answer(out, 400, mcp_error(mcp_id_ok(id) ? id : NULL, MCP_HEADER_MISMATCH, "%s", why), err);
  int rc = 0;
  entry *e = context_for(h, req, out, &rc, err);
  if (e == NULL) return rc;
  char *answer = NULL;
  size_t alen = 0;
  int status = 0;
  rc = mcp_session_answer(e->s, req->context, req->body, req->body_len, req->cancel, &answer, &alen,
                          &status, err);
  release(h, e);
  if (rc) return rc;
  if (answer == NULL) {
    out->status = 202;
    return 0;
  }
  rc = set_answer(out, req->accept, answer, alen, err);
  if (rc == 0 && status) out->status = status;
  return rc;
}

/* 1 when the request is of the 2026-07-28 revision: its body names a
 * protocol version in params._meta, or its header a stateless revision
 * (an `initialize` always opens a session of the earlier ones). */
static int stateless_request(json_object *msg, const char *header_version) {
  json_object *params = NULL, *meta = NULL, *m = NULL;
  if (json_object_object_get_ex(msg, "method", &m) && json_object_is_type(m, json_type_string) &&
      strcmp(json_object_get_string(m), "initialize") == 0)
    return 0;
  if (header_version && mcp_revision_modern(header_version)) return 1;
  return json_object_object_get_ex(msg, "params", &params) &&
         json_object_object_get_ex(params, "_meta", &meta) &&
         json_object_is_type(meta, json_type_object) &&
         json_object_object_get_ex(meta, MCP_META_VERSION, NULL);
}

/* ---- the initialize era: sessions ---- */

static int delete_session(sm_mcp_http *h, const sm_mcp_http_request *req, sm_mcp_http_answer *out,
                          sm_error *err) {
  if (req->session_id == NULL)
    return http_error(out, 400, MCP_INVALID_REQUEST, "DELETE needs the Mcp-Session-Id header", err);
  entry *e = find(h, req->session_id, req->owner);
  if (e == NULL) return http_error(out, 404, MCP_INVALID_REQUEST, "no such MCP session", err);
  pthread_mutex_lock(&h->mu);
  e->refs--;
  entry *gone = e->ended ? NULL : unlink_entry(h, e);
  pthread_mutex_unlock(&h->mu);
  entry_free(gone);
  out->status = 204;
  return 0;
}

static int post_session(sm_mcp_http *h, const sm_mcp_http_request *req, sm_mcp_http_answer *out,
                        sm_error *err) {
  if (sm_mcp_message_is_initialize(req->body, req->body_len)) {
    if (req->session_id)
      return http_error(out, 400, MCP_INVALID_REQUEST,
                        "initialize starts a new session: send it without Mcp-Session-Id", err);
    return post_initialize(h, req, out, err);
  }
  if (req->session_id == NULL)
    return http_error(out, 400, MCP_INVALID_REQUEST,
                      "Mcp-Session-Id is required (initialize first), or name the protocol "
                      "version 2026-07-28 in params._meta",
                      err);
  entry *e = find(h, req->session_id, req->owner);
  if (e == NULL) return http_error(out, 404, MCP_INVALID_REQUEST, "no such MCP session", err);
  char *answer = NULL;
  size_t alen = 0;
  int rc = sm_mcp_session_handle_for(e->s, req->context, req->body, req->body_len, req->cancel,
                                     &answer, &alen, err);
  release(h, e);
  if (rc) return rc;
  if (answer == NULL) {
    out->status = 202;
    return 0;
  }
  return set_answer(out, req->accept, answer, alen, err);
}

/* An MCP-Protocol-Version this implementation does not speak: 400 with
 * the versions it does. */
static int unsupported_version(sm_mcp_http_answer *out, const char *v, sm_error *err) {
  char head[MCP_VERSION_MAX + 1];
  snprintf(head, sizeof head, "%s", v);
  return http_answer(out, 400,
                     mcp_error_data(NULL, MCP_UNSUPPORTED_VERSION, mcp_revision_unsupported(head),
                                    "unsupported MCP-Protocol-Version"),
                     err);
}

/* POST: the checks every message passes, then its era. */
static int post(sm_mcp_http *h, const sm_mcp_http_request *req, sm_mcp_http_answer *out,
                sm_error *err) {
  if (req->content_type == NULL || strncmp(req->content_type, "application/json", 16) != 0 ||
      (req->content_type[16] != '\0' && req->content_type[16] != ';' && req->content_type[16] != ' '))
    return http_error(out, 415, MCP_INVALID_REQUEST, "messages are Content-Type: application/json", err);
  if (req->accept && !header_has(req->accept, "application/json") &&
      !header_has(req->accept, "text/event-stream") && !header_has(req->accept, "*/*") &&
      !header_has(req->accept, "application/*"))
    return http_error(out, 406, MCP_INVALID_REQUEST,
                      "accept application/json or text/event-stream", err);
  if (req->body_len > h->max_message)
    return http_error(out, 413, MCP_INVALID_REQUEST, "the message is too large", err);
  json_object *msg = NULL;
  const char *why = NULL;
  int parsed = mcp_parse(req->body, req->body_len, h->max_message, &msg, &why) == 0;
  if (stateless_request(parsed ? msg : NULL, req->protocol_version)) {
    int rc = parsed && json_object_is_type(msg, json_type_object)
                 ? post_stateless(h, req, msg, out, err)
                 : http_error(out, 400, parsed ? MCP_INVALID_REQUEST : MCP_PARSE_ERROR,
                              parsed ? "one JSON-RPC message (an object) per request" : why, err);
    json_object_put(msg);
    return rc;
  }
  json_object_put(msg);
  if (req->protocol_version && !sm_mcp_protocol_supported(req->protocol_version))
    return unsupported_version(out, req->protocol_version, err);
  return post_session(h, req, out, err);
}

int sm_mcp_http_handle(sm_mcp_http *h, const sm_mcp_http_request *req, sm_mcp_http_answer *out,
                       sm_error *err) {
  memset(out, 0, sizeof *out);
  if (!origin_allowed(h, req->origin))
    return http_error(out, 403, MCP_INVALID_REQUEST, "this Origin may not use the MCP endpoint", err);
  const char *method = req->method ? req->method : "";
  if (strcmp(method, "POST") == 0) return post(h, req, out, err);
  if (strcmp(method, "DELETE") != 0) {
    out->allow = "POST, DELETE";
    return http_error(out, 405, MCP_INVALID_REQUEST,
                      "the MCP endpoint takes POST (messages) and DELETE (end a session); it "
                      "offers no server-initiated stream",
                      err);
  }
  if (req->protocol_version && !sm_mcp_protocol_supported(req->protocol_version))
    return unsupported_version(out, req->protocol_version, err);
  return delete_session(h, req, out, err);
}
