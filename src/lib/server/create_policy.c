/* POST /v1/sandboxes: what a new sandbox may be, then its making
 * (docs/http-api.md#sandboxes, docs/configuration.md#templates).
 *
 * Its settings are the call's (flags > agent entry > defaults > built-in),
 * then its template's, then the request's own values. A template must be
 * one the configuration lets this caller ask for; an image, the caller's
 * own or one of those templates'; a resource at most limits.<x>_max (or,
 * without one, at most the template's or the configuration's value: a
 * request may lower, never raise); a network no wider than the resolved
 * one; a life at most limits.timeout_max. Anything else is refused (403)
 * naming what was asked and what is allowed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/log.h>
#include <sandman/util.h>

#include "server/server_call.h"
#include "server/create_policy.h"
#include "server/sandbox_owner.h"

#define IDLE_MAX_DEFAULT (24.0 * 3600) /* without limits.idle_timeout_max */

typedef struct making {
  sm_server *srv;
  const sm_config *cfg;
  server_create_params p;
  int control;
  sm_resolved r;
  sm_sandbox_settings s;
  sm_config_limits lim;
  sm_string_list allowed;   /* the templates this caller may ask for */
  char rule[160];
  const char *template_name;
  double timeout_s, idle_s;
} making;

static int refuse(server_answer *a, const char *fmt, const char *what, const char *allowed) {
  server_answer_error(a, 403, "policy", fmt, what, allowed);
  return -1;
}

static void join_list(const sm_string_list *l, char *out, size_t len) {
  size_t u = 0;
  out[0] = '\0';
  for (size_t i = 0; i < l->n && u < len; i++)
    u += (size_t)snprintf(out + u, len - u, "%s%s", i ? ", " : "", l->items[i]);
  if (l->n == 0) snprintf(out, len, "none");
}

static int allowed_template(const making *m, const char *name) {
  for (size_t i = 0; i < m->allowed.n; i++)
    if (strcmp(m->allowed.items[i], name) == 0) return 1;
  return 0;
}

static int apply_template(making *m, server_answer *a) {
  char list[1024];
  join_list(&m->allowed, list, sizeof list);
  sm_config_template t;
  if (!allowed_template(m, m->p.template_name) ||
      sm_config_template_get(m->cfg, m->p.template_name, &t) != 0) {
    char what[96];
    snprintf(what, sizeof what, "template '%.63s'", m->p.template_name);
    char allowed[1300];
    snprintf(allowed, sizeof allowed, "%s (%s)", list, m->rule);
    return refuse(a, "%s is not one this caller may ask for; allowed: %s", what, allowed);
  }
  sm_config_template_apply(&t, &m->s);
  if (t.timeout_s > 0) m->timeout_s = t.timeout_s;
  if (t.idle_timeout_s > 0) m->idle_s = t.idle_timeout_s;
  m->template_name = t.name;
  return 0;
}

/* An image: the caller's own, or one of its templates'. */
static int check_image(making *m, server_answer *a) {
  const char *want = m->p.image;
  if (strcmp(want, m->s.image) == 0) return 0;
  char list[1024];
  size_t u = (size_t)snprintf(list, sizeof list, "%s (the default)", m->s.image);
  for (size_t i = 0; i < m->allowed.n; i++) {
    sm_config_template t;
    if (sm_config_template_get(m->cfg, m->allowed.items[i], &t) != 0 || t.image == NULL) continue;
    if (strcmp(t.image, want) == 0) return 0;
    if (u < sizeof list)
      u += (size_t)snprintf(list + u, sizeof list - u, ", %s (template %s)", t.image, t.name);
  }
  char what[SM_NAME_MAX + 16];
  snprintf(what, sizeof what, "image '%s'", want);
  return refuse(a, "%s is not one this caller may ask for; allowed: %s", what, list);
}

/* asked <= the limit (limits.<key>_max), else <= the value it replaces. */
static int bound(server_answer *a, const char *key, double asked, double max, double base) {
  double cap = max > 0 ? max : base;
  if (cap <= 0 || asked <= cap) return 0;
  char what[64], allowed[160];
  snprintf(what, sizeof what, "%s %.15g", key, asked);
  if (max > 0) snprintf(allowed, sizeof allowed, "at most %.15g (limits.%s_max)", cap, key);
  else
    snprintf(allowed, sizeof allowed,
             "at most %.15g (the template's or the configuration's value; limits.%s_max allows more)",
             cap, key);
  return refuse(a, "%s is more than this caller may ask for: %s", what, allowed);
}

static int network_rank(const char *n) {
  return strcmp(n, "bridge") == 0 ? 2 : strcmp(n, "allowlist") == 0 ? 1 : 0;
}

static int apply_request(making *m, server_answer *a) {
  sm_sandbox_settings *s = &m->s;
  const server_create_params *p = &m->p;
  if (p->image) {
    if (check_image(m, a) != 0) return -1;
    snprintf(s->image, sizeof s->image, "%s", p->image);
  }
  if (p->network) {
    if (network_rank(p->network) > network_rank(s->network))
      return refuse(a, "network %s is wider than this caller may ask for: at most %s", p->network,
                    s->network);
    snprintf(s->network, sizeof s->network, "%s", p->network);
  }
  if ((p->cpu > 0 && bound(a, "cpu", p->cpu, m->lim.cpu_max, s->cpu) != 0) ||
      (p->memory > 0 && bound(a, "memory", (double)p->memory, (double)m->lim.memory_max, (double)s->memory) != 0) ||
      (p->pids > 0 && bound(a, "pids", (double)p->pids, (double)m->lim.pids_max, (double)s->pids) != 0) ||
      (p->disk > 0 && bound(a, "disk", (double)p->disk, (double)m->lim.disk_max, (double)s->disk) != 0))
    return -1;
  if (p->cpu > 0) s->cpu = p->cpu;
  if (p->memory > 0) s->memory = p->memory;
  if (p->pids > 0) s->pids = p->pids;
  if (p->disk > 0) s->disk = p->disk;
  if (p->timeout_s > 0) m->timeout_s = p->timeout_s;
  if (p->idle_timeout_s > 0) m->idle_s = p->idle_timeout_s;
  if (m->timeout_s == 0) m->timeout_s = m->lim.timeout_max;
  if (m->lim.timeout_max > 0 && m->timeout_s > m->lim.timeout_max)
    return bound(a, "timeout", m->timeout_s, m->lim.timeout_max, 0);
  double idle_max = m->lim.idle_timeout_max > 0 ? m->lim.idle_timeout_max : IDLE_MAX_DEFAULT;
  if (m->idle_s > idle_max) {
    char what[64], allowed[96];
    snprintf(what, sizeof what, "idle_timeout_s %.15g", m->idle_s);
    snprintf(allowed, sizeof allowed, "at most %.15g (%s)", idle_max,
             m->lim.idle_timeout_max > 0 ? "limits.idle_timeout_max" : "built in, without limits.idle_timeout_max");
    return refuse(a, "%s is more than this caller may ask for: %s", what, allowed);
  }
  return 0;
}

/* The settings of the new sandbox, checked; 0 or -1 with *a filled. */
static int decide(making *m, server_answer *a) {
  sm_server *srv = m->srv;
  sm_config_flags flags;
  if (srv->have_flags) flags = srv->flags;
  else memset(&flags, 0, sizeof flags);
  sm_error err = SM_ERROR_INIT;
  if (sm_config_resolve(m->cfg, m->p.agent, NULL, NULL, &flags, &m->r, &err) != 0) {
    server_answer_error(a, 400, "policy", "%s", err.message);
    return -1;
  }
  m->s = m->r.settings;
  m->s.mode = m->p.has_mode ? m->p.mode : SM_MODE_PER_RUN;
  m->idle_s = server_idle_timeout(&m->r);
  sm_config_limits_get(m->cfg, &m->lim);
  sm_config_templates_allowed(m->cfg, m->p.agent, m->control ? NULL : m->p.worker_key, &m->allowed,
                              m->rule, sizeof m->rule);
  if (m->p.template_name && apply_template(m, a) != 0) return -1;
  return apply_request(m, a);
}

static void answer_made(making *m, const char *id, server_answer *a) {
  sm_ops_sandbox sb;
  sm_error err = SM_ERROR_INIT;
  if (server_sandbox_find(m->srv, id, NULL, 0, &sb, &err) != 0) {
    server_answer_error_code(a, err.code, err.message);
    return;
  }
  a->status = 201;
  a->body = sm_ops_sandbox_to_json(&sb);
}

static int make(making *m, server_answer *a) {
  sm_call_names names = {m->p.project ? m->p.project : m->srv->project,
                         m->srv->project_environment, m->p.agent, NULL, NULL,
                         m->s.mode == SM_MODE_PER_RUN ? m->p.run_id : NULL,
                         m->s.mode == SM_MODE_PER_WORKER ? m->p.worker_key : NULL};
  sm_run_request req;
  sm_config_egress eg;
  sm_run_request_from_config(&req, &eg, m->cfg, &m->r, &names);
  req.project = names.project;
  req.settings = m->s;
  req.settings.idle_timeout_s = m->idle_s;
  req.scope = SM_SCOPE_NONE;
  char principal[SM_PRINCIPAL_MAX];
  if (server_auth_principal(m->p.worker_key, principal, sizeof principal) != 0) {
    server_answer_error(a, 400, "policy", "field 'worker_key' is too long");
    return -1;
  }
  req.principal = principal;
  sm_sandbox_meta meta = {m->template_name, m->timeout_s, (const char *const *)m->p.labels,
                          m->p.n_labels};
  req.meta = &meta;
  char id[SM_ENGINE_ID_MAX], name[SM_NAME_MAX];
  sm_error err = SM_ERROR_INIT;
  int rc = sm_sandbox_create(m->srv->opts.runner, &req, id, name, &err);
  if (rc == SM_ECONFLICT) {
    server_answer_error(a, 409, "policy", "%s: name another run_id, or use that one by its id",
                        err.message);
    json_object_object_add(a->body, "id", json_object_new_string(id));
    return -1;
  }
  if (rc) {
    server_answer_error_code(a, rc, err.message);
    return -1;
  }
  sm_log(SM_LOG_INFO, "sandbox %s made on request (%s)", name, m->template_name ? m->template_name : m->s.image);
  answer_made(m, id, a);
  return 0;
}

void server_sandbox_create(sm_server *srv, const char *body, size_t len, int control,
                           const char *token, server_answer *a) {
  if (!control && !server_body_token_ok(srv, body, len, control, token)) {
    server_refuse_token(srv, "sandboxes", a);
    return;
  }
  making *m = calloc(1, sizeof *m);
  if (m == NULL) {
    server_answer_error(a, 503, "sandbox", "out of memory");
    return;
  }
  m->srv = srv;
  m->control = control;
  m->cfg = sm_server_config(srv);
  sm_error err = SM_ERROR_INIT;
  if (server_parse_create(body, len, &m->p, &err) != 0) {
    server_answer_error(a, 400, "policy", "%s", err.message);
  } else if (m->p.has_mode && m->p.mode == SM_MODE_PER_WORKER && m->p.worker_key == NULL) {
    server_answer_error(a, 400, "policy", "mode per_worker needs 'worker_key'");
  } else if (m->p.has_mode && m->p.mode == SM_MODE_PER_WORKER && m->p.run_id) {
    server_answer_error(a, 400, "policy", "a per_worker sandbox has no 'run_id'");
  } else if (decide(m, a) == 0) {
    make(m, a);
  }
  server_create_params_dispose(&m->p);
  free(m);
}
