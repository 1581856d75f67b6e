/* The routing table (route_match.h): exact paths first, then the routes
 * with ids, ports, file operations and tokens in them. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include <sandman/keep.h>
#include <sandman/util.h>

#include "server/context_route.h"
#include "server/files_route.h"
#include "server/route_match.h"
#include "server/sandboxes_route.h"
#include "server/terminal_route.h"

static const char *const route_names[R_PREVIEW + 1] = {"unknown",   "unknown", "healthz",   "execute",
                                          "leases",    "handles", "sandboxes", "reap",
                                          "metrics",   "files",   "mcp",       "audit",
                                          "approvals", "sandbox", "contexts",  "terminals",
                                          "ports",     "previews",  "preview"};

const char *server_route_name(server_route_id r) {
  return (unsigned)r <= R_PREVIEW ? route_names[r] : "unknown";
}

/* Is method one of methods ("GET", "GET, POST", ...)? HEAD is GET. */
static int method_in(const char *methods, const char *method) {
  if (strcmp(method, "HEAD") == 0) method = "GET";
  size_t n = strlen(method);
  for (const char *p = methods; *p;) {
    size_t k = strcspn(p, ",");
    if (k == n && strncmp(p, method, n) == 0) return 1;
    p += k;
    p += strspn(p, ", ");
  }
  return 0;
}

/* A route that answers only methods: r when method is one of them, else
 * R_BAD_METHOD; either way the 405's Allow header is methods. */
static server_route_id only(server_route_id r, const char *methods, const char *method, const char **allow) {
  *allow = methods;
  return method_in(methods, method) ? r : R_BAD_METHOD;
}

/* handle_id gets the id of /v1/handles/{id} or /v1/approvals/{id}. */
static server_route_id match_route(const char *url, const char *method, char *handle_id,
                            const char **allow) {
  static const struct {
    const char *path, *methods;
    server_route_id route;
  } exact[] = {
      {"/healthz", "GET", R_HEALTHZ},
      {"/metrics", "GET", R_METRICS},
      {"/v1/execute", "POST", R_EXECUTE},
      {"/v1/leases", "POST", R_LEASES},
      {"/v1/sandboxes", "GET, POST", R_SANDBOXES},
      {"/v1/audit", "GET", R_AUDIT},
      {"/v1/sandboxes/reap", "POST", R_REAP},
      {"/v1/approvals", "GET", R_APPROVALS},
  };
  for (size_t i = 0; i < sizeof exact / sizeof *exact; i++)
    if (strcmp(url, exact[i].path) == 0)
      return only(exact[i].route, exact[i].methods, method, allow);
  if (strncmp(url, "/v1/approvals/", 14) == 0) {
    /* handle_id holds the approval's id (32 hex digits, as a handle's) */
    const char *id = url + 14;
    size_t n = strlen(id);
    if (n == 0 || n > SM_HANDLE_ID_LEN || strspn(id, "0123456789abcdef") != n) return R_NOT_FOUND;
    memcpy(handle_id, id, n + 1);
    return only(R_APPROVALS, "POST", method, allow);
  }
  if (strncmp(url, "/v1/handles/", 12) == 0) {
    const char *id = url + 12;
    size_t n = strlen(id);
    if (n == 0 || n > SM_HANDLE_ID_LEN) return R_NOT_FOUND;
    for (size_t i = 0; i < n; i++)
      if (!isxdigit((unsigned char)id[i])) return R_NOT_FOUND;
    memcpy(handle_id, id, n + 1);
    return only(R_HANDLE, "GET, DELETE", method, allow);
  }
  return R_NOT_FOUND;
}

/* /preview/{token}[/{path}]: any method, no other token (port_route.c). */
static server_route_id match_preview_route(server_route_match *c, const char *url) {
  if (strncmp(url, "/preview/", 9) != 0) return R_NOT_FOUND;
  const char *tok = url + 9, *slash = strchr(tok, '/');
  size_t n = slash ? (size_t)(slash - tok) : strlen(tok);
  if (n == 0 || n > SERVER_PREVIEW_TOKEN_LEN) n = 0;
  memcpy(c->preview_token, tok, n);
  c->preview_token[n] = '\0';
  c->port_path = slash ? slash + 1 : "";
  return R_PREVIEW;
}

/* /v1/sandboxes/{id}/ports/{port}[/{path}]: any method (port_route.c). */
static server_route_id match_port_route(server_route_match *c, const char *rest) {
  const char *slash = strchr(rest, '/');
  size_t n = slash ? (size_t)(slash - rest) : strlen(rest);
  char num[8];
  int64_t port = 0;
  if (n == 0 || n >= sizeof num) return R_NOT_FOUND;
  memcpy(num, rest, n);
  num[n] = '\0';
  if (strspn(num, "0123456789") != n || sm_parse_int(num, 1, 65535, &port, NULL) != 0)
    return R_NOT_FOUND;
  c->port = (unsigned)port;
  c->port_path = slash ? slash + 1 : "";
  return R_PORT;
}

/* /v1/snapshots (GET) and /v1/snapshots/{name} (GET, DELETE): carried by
 * the sandboxes routes' request (snapshots_route.c). */
static server_route_id match_snapshot_route(server_route_match *c, const char *url, const char *method) {
  int get = strcmp(method, "GET") == 0, del = strcmp(method, "DELETE") == 0;
  if (strcmp(url, "/v1/snapshots") == 0) {
    c->sandbox_op = SM_SNAPSHOTS_LIST;
    c->allow = "GET";
    snprintf(c->sandbox_id, sizeof c->sandbox_id, "-");
    return get ? R_SANDBOX : R_BAD_METHOD;
  }
  const char *name = url + 14;
  size_t n = strlen(name);
  if (n == 0 || n >= sizeof c->sandbox_id || !server_name_valid(name, SM_SNAPSHOT_NAME_MAX - 1))
    return R_NOT_FOUND;
  memcpy(c->sandbox_id, name, n + 1);
  c->sandbox_op = del ? SM_SNAPSHOTS_DELETE : SM_SNAPSHOTS_GET;
  c->allow = "GET, DELETE";
  return get || del ? R_SANDBOX : R_BAD_METHOD;
}

/* /v1/sandboxes/{id} (GET, DELETE), /v1/sandboxes/{id}/keepalive, /pause,
 * /resume, /snapshot, /rollback (POST), /diff (GET), /v1/sandboxes/fork
 * (POST), and the snapshots' routes. */
static server_route_id match_sandbox_route(server_route_match *c, const char *url, const char *method) {
  if (strncmp(url, "/v1/snapshots", 13) == 0 && (url[13] == '\0' || url[13] == '/'))
    return match_snapshot_route(c, url, method);
  if (strncmp(url, "/v1/sandboxes/", 14) != 0) return R_NOT_FOUND;
  const char *id = url + 14;
  const char *slash = strchr(id, '/');
  size_t n = slash ? (size_t)(slash - id) : strlen(id);
  if (n == 0 || n >= sizeof c->sandbox_id) return R_NOT_FOUND;
  memcpy(c->sandbox_id, id, n);
  c->sandbox_id[n] = '\0';
  if (!server_sandbox_ref_valid(c->sandbox_id)) return R_NOT_FOUND;
  if (slash && strncmp(slash, "/ports/", 7) == 0) return match_port_route(c, slash + 7);
  if (slash && strcmp(slash, "/previews") == 0) {
    c->allow = "POST";
    return strcmp(method, "POST") == 0 ? R_PREVIEWS : R_BAD_METHOD;
  }
  if (slash && strcmp(slash, "/diff") == 0) {
    c->sandbox_op = SM_SANDBOXES_DIFF;
    c->allow = "GET";
    return strcmp(method, "GET") == 0 ? R_SANDBOX : R_BAD_METHOD;
  }
  if (slash) {
    if (strcmp(slash, "/keepalive") == 0) c->sandbox_op = SM_SANDBOXES_KEEPALIVE;
    else if (strcmp(slash, "/pause") == 0) c->sandbox_op = SM_SANDBOXES_PAUSE;
    else if (strcmp(slash, "/resume") == 0) c->sandbox_op = SM_SANDBOXES_RESUME;
    else if (strcmp(slash, "/snapshot") == 0) c->sandbox_op = SM_SANDBOXES_SNAPSHOT;
    else if (strcmp(slash, "/rollback") == 0) c->sandbox_op = SM_SANDBOXES_ROLLBACK;
    else return R_NOT_FOUND;
    c->allow = "POST";
    return strcmp(method, "POST") == 0 ? R_SANDBOX : R_BAD_METHOD;
  }
  if (strcmp(c->sandbox_id, "fork") == 0) {
    c->sandbox_op = SM_SANDBOXES_FORK;
    c->allow = "POST";
    return strcmp(method, "POST") == 0 ? R_SANDBOX : R_BAD_METHOD;
  }
  c->allow = "GET, DELETE";
  c->sandbox_op = strcmp(method, "DELETE") == 0 ? SM_SANDBOXES_DELETE : SM_SANDBOXES_GET;
  return strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0 ||
                 strcmp(method, "DELETE") == 0
             ? R_SANDBOX
             : R_BAD_METHOD;
}

/* /v1/files/<name>, /mcp and /v1/contexts... */
static server_route_id match_stream_route(server_route_match *c, const char *url, const char *method,
                                   int *files_op) {
  if (strcmp(url, "/mcp") == 0) return R_MCP;
  int ctx_op = server_context_route_match(url, method, &c->allow);
  if (ctx_op >= 0) return R_CONTEXTS;
  if (ctx_op == -2) return R_BAD_METHOD;
  if (strncmp(url, "/v1/files/", 10) != 0 || strlen(url + 10) >= sizeof c->files_name)
    return R_NOT_FOUND;
  snprintf(c->files_name, sizeof c->files_name, "%s", url + 10);
  *files_op = server_files_route_op(c->files_name, method);
  if (*files_op == -1) return R_NOT_FOUND;
  if (*files_op == -2) {
    c->allow = server_files_route_allow(c->files_name);
    return R_BAD_METHOD;
  }
  return R_FILES;
}

server_route_id server_route_match_url(server_route_match *m, const char *url,
                                       const char *method) {
  m->files_op = -1;
  server_route_id r = match_route(url, method, m->handle_id, &m->allow);
  if (r == R_NOT_FOUND) r = match_stream_route(m, url, method, &m->files_op);
  if (r == R_NOT_FOUND) r = match_sandbox_route(m, url, method);
  if (r == R_NOT_FOUND) r = match_preview_route(m, url);
  if (r == R_NOT_FOUND && server_terminal_route_match(url)) r = R_TERMINALS;
  m->route = r;
  return r;
}
