/* Capped capture of a tool's stdout and stderr, shared by containers and
 * mode none. Past the cap the bytes are read and dropped, so the tool never
 * blocks on a full pipe and runs on undisturbed; the truncation is flagged. */
#include <stdlib.h>
#include <string.h>

#include "sandbox/capture.h"

void sandbox_capture_init(sandbox_capture *c, int64_t out_cap, int64_t err_cap,
                          sm_output_fn forward, void *forward_ud) {
  memset(c, 0, sizeof *c);
  common_buf_init(&c->out, out_cap > 0 ? (size_t)out_cap : 0);
  common_buf_init(&c->err, err_cap > 0 ? (size_t)err_cap : 0);
  c->forward = forward;
  c->forward_ud = forward_ud;
}

int sandbox_capture_output(void *userdata, int stream, const char *data, size_t len) {
  sandbox_capture *c = userdata;
  if (c->forward_only && stream != 2) {
    if (c->forward && !c->forward_failed && c->forward(c->forward_ud, 1, data, len) < 0)
      c->forward_failed = 1;
    return 0;
  }
  common_buf *b = stream == 2 ? &c->err : &c->out;
  int *trunc = stream == 2 ? &c->err_truncated : &c->out_truncated;
  size_t before = b->len;
  size_t room = b->max > b->len ? b->max - b->len : 0;
  size_t dropped = common_buf_append_capped(b, data, len);
  size_t kept = b->len - before;
  /* Less kept than fitted: memory ran out, which the result says as such. */
  if (kept < (len < room ? len : room)) c->lost = 1;
  else if (dropped) *trunc = 1;
  if (kept && c->forward && !c->forward_failed) {
    if (c->forward(c->forward_ud, stream == 2 ? 2 : 1, b->data + before, kept) < 0)
      c->forward_failed = 1;
  }
  return 0;
}

static int take(common_buf *b, char **data, size_t *len) {
  if (b->data == NULL) {
    *data = strdup("");
    *len = 0;
    return *data ? 0 : SM_ENOMEM;
  }
  *data = common_buf_steal(b, len);
  return 0;
}

int sandbox_capture_to_result(sandbox_capture *c, sm_run_result *r) {
  free(r->stdout_data);
  free(r->stderr_data);
  r->stdout_data = r->stderr_data = NULL;
  int rc = take(&c->out, &r->stdout_data, &r->stdout_len);
  if (rc == 0) rc = take(&c->err, &r->stderr_data, &r->stderr_len);
  r->stdout_truncated = c->out_truncated;
  r->stderr_truncated = c->err_truncated;
  return rc ? rc : c->lost ? SM_ENOMEM : 0;
}

void sandbox_capture_dispose(sandbox_capture *c) {
  common_buf_dispose(&c->out);
  common_buf_dispose(&c->err);
}
