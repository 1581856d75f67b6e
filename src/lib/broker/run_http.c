/* The HTTP relay (libcurl): one request per call, the arguments as its
 * JSON body, only http and https, no redirects, a bounded answer. */
#include <stdio.h>
#include <string.h>

#include <curl/curl.h>

#include "broker/run_http.h"
#include "common/buf.h"
#include "common/cleanup.h"

typedef struct sink {
  common_buf buf;
  int truncated;
  volatile int *cancel;
} sink;

static size_t on_data(char *p, size_t size, size_t n, void *ud) {
  sink *s = ud;
  size_t len = size * n;
  if (s->cancel && *s->cancel) return 0;
  if (common_buf_append_capped(&s->buf, p, len) > 0) {
    s->truncated = 1;
    return 0; /* stop reading: the cap is reached */
  }
  return len;
}

static int on_progress(void *ud, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d) {
  (void)a, (void)b, (void)c, (void)d;
  sink *s = ud;
  return s->cancel && *s->cancel ? 1 : 0;
}

static void shape(sink *s, long status, sm_mcp_result *out) {
  if (s->buf.len > 0) sm_mcp_result_text(out, s->buf.data, s->buf.len);
  if (s->truncated) {
    char note[96];
    int n = snprintf(note, sizeof note, "[answer truncated at %zu bytes]", s->buf.max);
    sm_mcp_result_text(out, note, (size_t)n);
  }
  json_object *j = s->truncated ? NULL : json_tokener_parse(s->buf.data ? s->buf.data : "");
  if (j && json_object_is_type(j, json_type_object)) sm_mcp_result_structured(out, j);
  else json_object_put(j);
  out->is_error = status < 200 || status > 299;
  if (out->is_error && s->buf.len == 0) sm_mcp_result_error(out, "the endpoint answered %ld", status);
}

int broker_http_call(json_object *http, json_object *args, double timeout_s, size_t max_output,
                     volatile int *cancel, sm_mcp_result *out, sm_error *err) {
  json_object *url = NULL, *method = NULL, *headers = NULL;
  json_object_object_get_ex(http, "url", &url);
  json_object_object_get_ex(http, "method", &method);
  json_object_object_get_ex(http, "headers", &headers);
  cleanup_curl CURL *c = curl_easy_init();
  cleanup_slist struct curl_slist *hl = NULL;
  if (!c) return sm_error_set(err, SM_ENOMEM, "broker: out of memory");
  hl = curl_slist_append(hl, "Content-Type: application/json");
  if (headers) {
    json_object_object_foreach(headers, k, v) {
      char line[4096];
      snprintf(line, sizeof line, "%s: %s", k, json_object_get_string(v));
      struct curl_slist *n = curl_slist_append(hl, line);
      if (!n) return sm_error_set(err, SM_ENOMEM, "broker: out of memory");
      hl = n;
    }
  }
  const char *body = json_object_to_json_string_ext(args, JSON_C_TO_STRING_PLAIN);
  sink s = {.cancel = cancel};
  common_buf_init(&s.buf, max_output);
  curl_easy_setopt(c, CURLOPT_URL, json_object_get_string(url));
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, json_object_get_string(method));
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)(timeout_s * 1000));
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
  curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
  curl_easy_setopt(c, CURLOPT_XFERINFODATA, &s);
  curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  CURLcode rc = curl_easy_perform(c);
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  int ret = 0;
  if (rc == CURLE_OPERATION_TIMEDOUT)
    ret = sm_error_set(err, SM_ETIMEOUT, "the endpoint did not answer within %.0fs", timeout_s);
  else if (rc == CURLE_ABORTED_BY_CALLBACK || (rc == CURLE_WRITE_ERROR && !s.truncated))
    ret = sm_error_set(err, SM_ECANCELLED, "the call was cancelled");
  else if (rc != CURLE_OK && !(rc == CURLE_WRITE_ERROR && s.truncated))
    ret = sm_error_set(err, SM_EIO, "the endpoint could not be reached: %s", curl_easy_strerror(rc));
  else
    shape(&s, status, out);
  common_buf_dispose(&s.buf);
  return ret;
}
