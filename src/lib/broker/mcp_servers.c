/* Host MCP servers (broker.mcp_servers, docs/host-tools.md "Host MCP
 * servers"): each started over stdio on first use (sandman/mcp_client.h:
 * no shell, only the environment variables its entry names), its tools
 * re-exported into the catalog by name (with its `prefix`, filtered by
 * its `tools` globs) and called for host tools of kind "mcp". Stopped with
 * the broker. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/mcp_client.h>
#include <sandman/util.h>

#include "broker/mcp_servers.h"
#include "common/strv.h"

#define NAME_MAX_LEN 64

typedef struct server {
  const char *name;      /* borrowed from the configuration */
  json_object *def;      /* its normalized entry (borrowed) */
  pthread_mutex_t mu;    /* starting it */
  sm_mcp_client *client; /* NULL until first used */
} server;

struct bk_mcp_servers {
  server *v;
  size_t n;
  pthread_mutex_t mu;    /* tools */
  json_object *tools;    /* the re-exported tools, once listed */
};

static double num(json_object *o, const char *key, double dflt) {
  json_object *v = NULL;
  return json_object_object_get_ex(o, key, &v) ? json_object_get_double(v) : dflt;
}

static const char *str(json_object *o, const char *key) {
  json_object *v = NULL;
  return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string)
             ? json_object_get_string(v)
             : NULL;
}

int broker_mcp_servers_new(bk_mcp_servers **out, json_object *servers, sm_error *err) {
  *out = NULL;
  bk_mcp_servers *s = calloc(1, sizeof *s);
  size_t n = json_object_is_type(servers, json_type_object) ? (size_t)json_object_object_length(servers) : 0;
  if (s == NULL || (s->v = calloc(n ? n : 1, sizeof *s->v)) == NULL) {
    free(s);
    return sm_error_set(err, SM_ENOMEM, "broker: out of memory");
  }
  pthread_mutex_init(&s->mu, NULL);
  if (n) {
    json_object_object_foreach(servers, name, def) {
      server *v = &s->v[s->n++];
      v->name = name;
      v->def = def;
      pthread_mutex_init(&v->mu, NULL);
    }
  }
  *out = s;
  return 0;
}

void broker_mcp_servers_free(bk_mcp_servers *s) {
  if (s == NULL) return;
  for (size_t i = 0; i < s->n; i++) {
    sm_mcp_client_free(s->v[i].client);
    pthread_mutex_destroy(&s->v[i].mu);
  }
  json_object_put(s->tools);
  pthread_mutex_destroy(&s->mu);
  free(s->v);
  free(s);
}

/* The environment the server gets: the host's values of the names its
 * entry lists (a name the host does not have is left out). */
static int server_env(json_object *def, common_strv *env, sm_error *err) {
  json_object *names = NULL;
  if (!json_object_object_get_ex(def, "env", &names) || !json_object_is_type(names, json_type_array))
    return 0;
  for (size_t i = 0; i < json_object_array_length(names); i++) {
    const char *name = json_object_get_string(json_object_array_get_idx(names, i));
    const char *value = name ? getenv(name) : NULL;
    if (value && common_strv_addf(env, "%s=%s", name, value) != 0)
      return sm_error_set(err, SM_ENOMEM, "broker: out of memory passing %s to an MCP server", name);
  }
  return 0;
}

/* The running client of v, started on first use. */
static int client_of(server *v, sm_mcp_client **out, sm_error *err) {
  pthread_mutex_lock(&v->mu);
  int rc = 0;
  if (v->client == NULL) {
    common_strv argv = {0}, env = {0};
    json_object *cmd = NULL;
    json_object_object_get_ex(v->def, "command", &cmd);
    size_t ncmd = json_object_is_type(cmd, json_type_array) ? json_object_array_length(cmd) : 0;
    for (size_t i = 0; rc == 0 && i < ncmd; i++)
      rc = common_strv_add(&argv, json_object_get_string(json_object_array_get_idx(cmd, i)));
    if (rc == 0) rc = server_env(v->def, &env, err);
    if (rc) {
      rc = sm_error_set(err, SM_ENOMEM, "broker: out of memory");
    } else if (argv.n == 0) {
      rc = sm_error_set(err, SM_ECONFIG, "broker.mcp_servers.%s has no command", v->name);
    } else {
      char label[NAME_MAX_LEN + 32];
      snprintf(label, sizeof label, "%s", v->name);
      sm_mcp_client_options o = {.name = label,
                                 .argv = (const char *const *)argv.v,
                                 .env = (const char *const *)env.v,
                                 .cwd = str(v->def, "cwd"),
                                 .timeout_s = num(v->def, "timeout", 30)};
      rc = sm_mcp_client_start(&v->client, &o, err);
    }
    common_strv_dispose(&argv);
    common_strv_dispose(&env);
  }
  *out = v->client;
  pthread_mutex_unlock(&v->mu);
  return rc;
}

static server *find_server(bk_mcp_servers *s, const char *name) {
  for (size_t i = 0; name && i < s->n; i++)
    if (strcmp(s->v[i].name, name) == 0) return &s->v[i];
  return NULL;
}

int broker_mcp_servers_call(bk_mcp_servers *s, const char *server_name, const char *tool,
                            json_object *args, double timeout_s, volatile int *cancel,
                            sm_mcp_result *out, sm_error *err) {
  server *v = find_server(s, server_name);
  if (v == NULL)
    return sm_error_set(err, SM_ECONFIG, "no host MCP server '%s' (broker.mcp_servers)",
                        server_name ? server_name : "");
  sm_mcp_client *c = NULL;
  int rc = client_of(v, &c, err);
  if (rc) return rc;
  sm_error cerr = SM_ERROR_INIT;
  rc = sm_mcp_client_call(c, tool, args, timeout_s, cancel, out, &cerr);
  /* The server refused the call (a JSON-RPC error: bad arguments, unknown
   * tool) or died in it: the tool failed, and the model reads why. */
  if (rc == SM_EPROTOCOL || rc == SM_EIO) return sm_mcp_result_error(out, "%s", cerr.message);
  if (rc) return sm_error_set(err, rc, "%s", cerr.message);
  return 0;
}

/* 1 when the server's `tools` globs let name through (none: all). */
static int exported(json_object *def, const char *name) {
  json_object *globs = NULL;
  if (!json_object_object_get_ex(def, "tools", &globs) || !json_object_is_type(globs, json_type_array))
    return 1;
  for (size_t i = 0; i < json_object_array_length(globs); i++)
    if (sm_glob_match(json_object_get_string(json_object_array_get_idx(globs, i)), name)) return 1;
  return 0;
}

static int name_ok(const char *n) {
  size_t len = strlen(n);
  if (len == 0 || len > NAME_MAX_LEN) return 0;
  for (const char *c = n; *c; c++)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
          *c == '_' || *c == '-' || *c == '.'))
      return 0;
  return 1;
}

/* The catalog entry of one re-exported tool t of server v. */
static json_object *entry_of(server *v, json_object *t, const char *name) {
  json_object *e = json_object_new_object(), *d = NULL, *schema = NULL, *mcp = json_object_new_object();
  json_object_object_get_ex(t, "description", &d);
  json_object_object_get_ex(t, "inputSchema", &schema);
  json_object_object_add(e, "name", json_object_new_string(name));
  json_object_object_add(e, "description",
                         json_object_new_string(d ? json_object_get_string(d) : ""));
  json_object_object_add(e, "input_schema", json_object_is_type(schema, json_type_object)
                                                ? json_object_get(schema)
                                                : json_tokener_parse("{\"type\":\"object\"}"));
  json_object_object_add(e, "kind", json_object_new_string("mcp"));
  json_object_object_add(mcp, "server", json_object_new_string(v->name));
  json_object_object_add(mcp, "tool", json_object_get(json_object_object_get(t, "name")));
  json_object_object_add(e, "mcp", mcp);
  json_object_object_add(e, "timeout", json_object_new_double(num(v->def, "timeout", 30)));
  json_object_object_add(e, "schema_by_server", json_object_new_boolean(1));
  return e;
}

/* Adds server v's re-exported tools to all, refusing a name given twice. */
static int add_server_tools(server *v, json_object *all, sm_error *err) {
  sm_mcp_client *c = NULL;
  json_object *tools = NULL;
  int rc = client_of(v, &c, err);
  if (rc == 0) rc = sm_mcp_client_tools(c, &tools, err);
  if (rc) return rc;
  const char *prefix = str(v->def, "prefix");
  for (size_t i = 0; rc == 0 && i < json_object_array_length(tools); i++) {
    json_object *t = json_object_array_get_idx(tools, i);
    const char *tn = json_object_get_string(json_object_object_get(t, "name"));
    char name[NAME_MAX_LEN * 2 + 1];
    snprintf(name, sizeof name, "%s%s", prefix ? prefix : "", tn);
    if (!exported(v->def, tn) || !name_ok(name)) continue; /* not offered: nothing to clash */
    for (size_t j = 0; rc == 0 && j < json_object_array_length(all); j++) {
      json_object *o = json_object_array_get_idx(all, j);
      if (strcmp(json_object_get_string(json_object_object_get(o, "name")), name) == 0)
        rc = sm_error_set(err, SM_ECONFIG,
                          "host tool '%s' is offered by MCP servers '%s' and '%s': give one a "
                          "prefix (broker.mcp_servers.%s.prefix) or narrow its tools",
                          name,
                          json_object_get_string(json_object_object_get(
                              json_object_object_get(o, "mcp"), "server")),
                          v->name, v->name);
    }
    if (rc == 0) json_object_array_add(all, entry_of(v, t, name));
  }
  json_object_put(tools);
  return rc;
}

int broker_mcp_servers_tools(bk_mcp_servers *s, json_object **tools, sm_error *err) {
  *tools = NULL;
  pthread_mutex_lock(&s->mu);
  int rc = 0;
  if (s->tools == NULL) {
    json_object *all = json_object_new_array();
    for (size_t i = 0; rc == 0 && i < s->n; i++) rc = add_server_tools(&s->v[i], all, err);
    if (rc == 0)
      s->tools = all;
    else
      json_object_put(all);
  }
  if (rc == 0) *tools = json_object_get(s->tools);
  pthread_mutex_unlock(&s->mu);
  return rc;
}

static size_t json_len(json_object *o) {
  size_t n = 0;
  if (o) json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN, &n);
  return n;
}

void broker_mcp_result_cap(sm_mcp_result *r, size_t max) {
  if (json_len(r->content) + json_len(r->structured) <= max) return;
  /* Over the cap: the text of the blocks, cut at max bytes, and a note;
   * other blocks (images, resources) and structuredContent go. */
  json_object *old = r->content;
  json_object *structured = r->structured;
  r->content = NULL;
  r->structured = NULL;
  size_t left = max;
  for (size_t i = 0; i < json_object_array_length(old) && left > 0; i++) {
    json_object *b = json_object_array_get_idx(old, i), *t = NULL;
    if (!json_object_object_get_ex(b, "text", &t) || !json_object_is_type(t, json_type_string)) continue;
    size_t n = (size_t)json_object_get_string_len(t);
    if (n > left) n = left;
    sm_mcp_result_text(r, json_object_get_string(t), n);
    left -= n;
  }
  char note[96];
  int n = snprintf(note, sizeof note, "[output truncated at %zu bytes]", max);
  sm_mcp_result_text(r, note, (size_t)n);
  json_object_put(old);
  json_object_put(structured);
}
