/* Fuzzes the MCP session's message handling (src/lib/mcp/session.c and the
 * 2026-07-28 requests of stateless.c): any bytes a client could send. The
 * first byte says whether the session is initialized first (2025-11-25,
 * with its tasks); every answer must be one JSON-RPC object that parses
 * back, with "jsonrpc": "2.0" and a result or an error. A long-running tool
 * makes tasks, whose threads the session's end waits for. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/mcp.h>

static const sm_mcp_tool tools[] = {
    {"echo", NULL, "echo", "{\"type\":\"object\"}", NULL, SM_MCP_READ_ONLY},
    {"slow", NULL, "echo, as a task", "{\"type\":\"object\"}", NULL, SM_MCP_LONG_RUNNING},
};

static const sm_mcp_tool *list(void *ud, size_t *n) {
  (void)ud;
  *n = 2;
  return tools;
}

static int call(void *ud, void *request, const char *name, json_object *args,
                volatile int *cancel, sm_mcp_result *out, sm_error *err) {
  (void)ud;
  (void)request;
  (void)name;
  (void)cancel;
  (void)err;
  const char *text = json_object_to_json_string(args);
  return sm_mcp_result_text(out, text, strlen(text));
}

static void check(sm_mcp_session *s, const char *msg, size_t len) {
  char *answer = NULL;
  size_t alen = 0;
  sm_error err = SM_ERROR_INIT;
  if (sm_mcp_session_handle(s, msg, len, NULL, &answer, &alen, &err) != 0) abort();
  if (answer == NULL) return;
  if (strlen(answer) != alen) abort();
  json_object *o = json_tokener_parse(answer), *v = NULL;
  if (!json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, "jsonrpc", &v) ||
      strcmp(json_object_get_string(v), "2.0") != 0 ||
      (json_object_object_get_ex(o, "result", NULL) == json_object_object_get_ex(o, "error", NULL)))
    abort();
  json_object_put(o);
  free(answer);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  sm_mcp_provider p = {list, call, NULL, NULL, NULL};
  sm_mcp_server_info info = {"fuzz", NULL, "1", NULL, 64 * 1024};
  sm_mcp_session *s = NULL;
  sm_error err = SM_ERROR_INIT;
  if (sm_mcp_session_new(&s, &info, &p, &err) != 0) abort();
  if (data[0] & 1) {
    static const char init[] = "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\","
                               "\"params\":{\"protocolVersion\":\"2025-11-25\"}}";
    check(s, init, sizeof init - 1);
  }
  check(s, (const char *)data + 1, size - 1);
  sm_mcp_session_free(s);
  return 0;
}
