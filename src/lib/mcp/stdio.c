/* The MCP stdio transport: newline-delimited JSON-RPC on two descriptors.
 * Tool calls run on their own threads so that a long command does not hold
 * up pings, listings, task polls and cancellations; answers are written
 * whole, one per line, under a lock. One process serves both eras of the
 * protocol (the session tells them apart per message). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sandman/mcp.h>

#include "common/thread.h"
#include "mcp/mcp_internal.h"
#include "common/io.h"

#define READ_CHUNK (64u << 10)

typedef struct stdio_ctx {
  sm_mcp_session *s;
  int out_fd;
  pthread_mutex_t write_mu;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  unsigned running;
  int write_failed;
} stdio_ctx;

typedef struct job {
  stdio_ctx *ctx;
  char *msg;
  size_t len;
} job;

static void send_line(stdio_ctx *c, const char *text, size_t len) {
  pthread_mutex_lock(&c->write_mu);
  if (!c->write_failed &&
      (common_write_all(c->out_fd, text, len) != 0 || common_write_all(c->out_fd, "\n", 1) != 0))
    c->write_failed = 1;
  pthread_mutex_unlock(&c->write_mu);
}

static void handle(stdio_ctx *c, const char *msg, size_t len) {
  char *answer = NULL;
  size_t alen = 0;
  sm_error err = SM_ERROR_INIT;
  if (sm_mcp_session_handle(c->s, msg, len, NULL, &answer, &alen, &err) == 0 && answer)
    send_line(c, answer, alen);
  free(answer);
}

static void *run_job(void *arg) {
  job *j = arg;
  handle(j->ctx, j->msg, j->len);
  stdio_ctx *c = j->ctx;
  free(j->msg);
  free(j);
  pthread_mutex_lock(&c->mu);
  c->running--;
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
  return NULL;
}

/* A message that may take long: a tool call, or 2025-11-25's tasks/result
 * (which waits for its task). */
static int runs_long(const char *msg, size_t len, size_t max) {
  json_object *o = NULL, *m = NULL;
  const char *why;
  if (mcp_parse(msg, len, max, &o, &why) != 0) return 0;
  int yes = json_object_is_type(o, json_type_object) && json_object_object_get_ex(o, "method", &m) &&
            json_object_is_type(m, json_type_string) &&
            (strcmp(json_object_get_string(m), "tools/call") == 0 ||
             strcmp(json_object_get_string(m), "tasks/result") == 0);
  json_object_put(o);
  return yes;
}

/* One line from the client: tool calls (and tasks/result) on a thread
 * while there is room, everything else (and calls past the room, which the
 * session then refuses at once) here. */
static void dispatch_line(stdio_ctx *c, const char *line, size_t len, size_t max) {
  while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t')) len--;
  if (len == 0) return;
  if (runs_long(line, len, max)) {
    pthread_mutex_lock(&c->mu);
    int room = c->running < SM_MCP_MAX_CALLS_IN_FLIGHT;
    if (room) c->running++;
    pthread_mutex_unlock(&c->mu);
    if (room) {
      job *j = calloc(1, sizeof *j);
      char *copy = malloc(len);
      pthread_t t;
      if (j && copy) {
        memcpy(copy, line, len);
        *j = (job){c, copy, len};
        if (common_thread_start(&t, NULL, run_job, j) == 0) {
          pthread_detach(t);
          return;
        }
      }
      free(j);
      free(copy);
      pthread_mutex_lock(&c->mu);
      c->running--;
      pthread_mutex_unlock(&c->mu);
    }
  }
  handle(c, line, len);
}

int sm_mcp_serve_stdio(sm_mcp_session *s, int in_fd, int out_fd, volatile int *stop,
                       sm_error *err) {
  stdio_ctx c = {.s = s, .out_fd = out_fd};
  pthread_mutex_init(&c.write_mu, NULL);
  pthread_mutex_init(&c.mu, NULL);
  pthread_cond_init(&c.cv, NULL);
  /* The session's own cap plus a little: a longer line is refused whole. */
  size_t max = SM_MCP_DEFAULT_MAX_MESSAGE;
  char *buf = malloc(max + READ_CHUNK);
  int rc = 0;
  if (buf == NULL) rc = sm_error_set(err, SM_ENOMEM, NULL);
  size_t have = 0;
  int skipping = 0;
  while (rc == 0 && !(stop && *stop)) {
    ssize_t n = read(in_fd, buf + have, READ_CHUNK);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      rc = sm_error_set_errno(err, SM_EIO, errno, "reading MCP messages");
      break;
    }
    if (n == 0) {
      if (!skipping && have > 0) dispatch_line(&c, buf, have, max);
      break;
    }
    size_t start = 0, end = have + (size_t)n;
    for (size_t i = have; i < end; i++) {
      if (buf[i] != '\n') continue;
      if (!skipping) dispatch_line(&c, buf + start, i - start, max);
      skipping = 0;
      start = i + 1;
    }
    memmove(buf, buf + start, end - start);
    have = end - start;
    if (have > max) {
      /* Past the cap without a newline: answer once, drop to the next line. */
      if (!skipping) {
        json_object *a = mcp_error(NULL, MCP_INVALID_REQUEST, "the message is larger than %zu bytes", max);
        char *text = NULL;
        size_t tlen = 0;
        if (mcp_answer_text(a, &text, &tlen, err) == 0) send_line(&c, text, tlen);
        free(text);
        json_object_put(a);
      }
      skipping = 1;
      have = 0;
    }
    if (c.write_failed) break; /* the client stopped reading */
  }
  free(buf);
  sm_mcp_session_cancel_all(s);
  pthread_mutex_lock(&c.mu);
  while (c.running > 0) {
    pthread_cond_wait(&c.cv, &c.mu);
    sm_mcp_session_cancel_all(s); /* a call that registered late */
  }
  pthread_mutex_unlock(&c.mu);
  pthread_cond_destroy(&c.cv);
  pthread_mutex_destroy(&c.mu);
  pthread_mutex_destroy(&c.write_mu);
  return rc;
}
