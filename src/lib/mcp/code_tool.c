/* run_code over MCP: see code_tool.h. The text a model reads is the run's
 * stdout and stderr, the value's text, the error's traceback and how it
 * ended; each png or jpeg (and svg) result is an image content block;
 * structuredContent is the run's E2B-shaped execution without the image
 * data (it is in the blocks). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/code.h>

#include "common/buf.h"
#include "mcp/code_tool.h"

#define MCP_CODE_MAX_OUTPUT ((size_t)8 << 20) /* a run's output in one tool result */
#define IMAGES_MAX 16

const char mcp_code_tool_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"code\":{\"type\":\"string\",\"description\":\"Python code, run as a notebook cell: "
    "variables, imports and loaded data stay for the next call; the last expression's value "
    "is returned, figures come back as images\"},"
    "\"context\":{\"type\":\"string\",\"description\":\"A code context made earlier (default: "
    "the sandbox's default one, made on first use)\"},"
    "\"timeout_s\":{\"type\":\"number\",\"minimum\":0.001,\"maximum\":86400,\"description\":"
    "\"Seconds before the cell is interrupted (default: the configuration's)\"}},"
    "\"required\":[\"code\"],\"additionalProperties\":false}";

const char mcp_code_tool_output[] =
    "{\"type\":\"object\",\"properties\":{\"status\":{\"type\":\"string\"},"
    "\"results\":{\"type\":\"array\"},\"logs\":{\"type\":\"object\"},"
    "\"error\":{\"type\":[\"object\",\"null\"]},\"execution_count\":{\"type\":[\"integer\","
    "\"null\"]}},\"required\":[\"status\",\"results\",\"logs\"]}";

/* The images of the execution's results as content blocks, their data
 * dropped from x's JSON (in place). */
static void images_out(json_object *results, sm_mcp_result *out, int *n) {
  static const struct {
    const char *field, *mime;
  } kinds[] = {{"png", "image/png"}, {"jpeg", "image/jpeg"}};
  size_t len = json_object_array_length(results);
  for (size_t i = 0; i < len; i++) {
    json_object *r = json_object_array_get_idx(results, i), *v = NULL;
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
      if (!json_object_object_get_ex(r, kinds[k].field, &v) || !json_object_is_type(v, json_type_string))
        continue;
      if (*n < IMAGES_MAX &&
          sm_mcp_result_image(out, kinds[k].mime, json_object_get_string(v),
                              (size_t)json_object_get_string_len(v)) == 0) {
        char note[64];
        snprintf(note, sizeof note, "image %d (%s, in the content)", ++*n, kinds[k].mime);
        json_object_object_add(r, kinds[k].field, json_object_new_string(note));
      } else {
        json_object_object_add(r, kinds[k].field, json_object_new_string("(not sent: too many images)"));
      }
    }
  }
}

/* The text a model reads. */
static void text_out(json_object *x, const sm_code_run_end *end, size_t cap, sm_mcp_result *out) {
  common_buf b;
  common_buf_init(&b, cap + 4096);
  json_object *logs = json_object_object_get(x, "logs"), *arr;
  if (json_object_object_get_ex(x, "state_lost", &arr) && arr)
    common_buf_printf(&b,
                      "[a fresh kernel was started: the context's earlier state was lost (%s)]\n",
                      json_object_get_string(arr));
  const char *streams[] = {"stdout", "stderr"};
  for (size_t s = 0; s < 2; s++) {
    arr = json_object_object_get(logs, streams[s]);
    for (size_t i = 0; i < json_object_array_length(arr); i++) {
      json_object *t = json_object_array_get_idx(arr, i);
      common_buf_append_capped(&b, json_object_get_string(t),
                               (size_t)json_object_get_string_len(t));
    }
  }
  json_object *results = json_object_object_get(x, "results"), *v;
  for (size_t i = 0; i < json_object_array_length(results); i++) {
    json_object *r = json_object_array_get_idx(results, i);
    int main_result = json_object_get_boolean(json_object_object_get(r, "is_main_result"));
    if (json_object_object_get_ex(r, "text", &v))
      common_buf_printf(&b, "%s%s\n", main_result ? "Out: " : "", json_object_get_string(v));
  }
  json_object *e = json_object_object_get(x, "error");
  if (e) {
    const char *tb = json_object_get_string(json_object_object_get(e, "traceback"));
    if (tb && *tb) common_buf_printf(&b, "%s\n", tb);
    else
      common_buf_printf(&b, "%s: %s\n", json_object_get_string(json_object_object_get(e, "name")),
                        json_object_get_string(json_object_object_get(e, "value")));
  }
  common_buf_printf(&b, "[%s%s%s%s]", end->status, end->message[0] ? ": " : "", end->message,
                    end->truncated ? "; output truncated" : "");
  sm_mcp_result_text(out, b.data ? b.data : "", b.len);
  common_buf_dispose(&b);
}

int mcp_code_tool_call(sm_runner *runner, const sm_run_request *req, json_object *args,
                       size_t max_text, sm_mcp_result *out) {
  json_object *v = NULL;
  sm_code_run_opts ro = SM_CODE_RUN_OPTS_INIT;
  if (json_object_object_get_ex(args, "timeout_s", &v)) {
    ro.timeout_s = json_object_get_double(v);
    if (!(ro.timeout_s >= 0.001 && ro.timeout_s <= 86400))
      return sm_mcp_result_error(out, "timeout_s must be 0.001 to 86400");
  }
  const char *context = NULL, *code = json_object_get_string(json_object_object_get(args, "code"));
  if (json_object_object_get_ex(args, "context", &v)) context = json_object_get_string(v);
  sm_code_execution *x = sm_code_execution_new(MCP_CODE_MAX_OUTPUT);
  if (x == NULL) return SM_ENOMEM;
  ro.max_output = MCP_CODE_MAX_OUTPUT;
  ro.on_event = sm_code_execution_add;
  ro.ud = x;
  sm_code_run_end end;
  sm_error err = SM_ERROR_INIT;
  int rc = sm_code_run(runner, req, context, code, &ro, &end, NULL, &err);
  if (rc != 0) {
    sm_code_execution_free(x);
    if (req->cancel && *req->cancel) return SM_ECANCELLED;
    return sm_mcp_result_error(out, "the code could not run: %s", err.message);
  }
  json_object *j = sm_code_execution_to_json(x, &end);
  sm_code_execution_free(x);
  if (j == NULL) return SM_ENOMEM;
  text_out(j, &end, max_text, out);
  int images = 0;
  images_out(json_object_object_get(j, "results"), out, &images);
  out->is_error = strcmp(end.status, "ok") != 0;
  sm_mcp_result_structured(out, j);
  return 0;
}
