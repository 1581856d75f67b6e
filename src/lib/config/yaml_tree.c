/* YAML text -> a small tree with positions (libyaml's event parser).
 *
 * Only what a configuration needs: mappings, sequences and scalars of one
 * document. Aliases are refused (an alias bomb would expand without bound),
 * tags other than !!str are refused, and depth, node count and scalar size
 * are capped so that a hostile file cannot exhaust memory. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "config/config_internal.h"

#define YAML_STR_TAG "tag:yaml.org,2002:str"

typedef struct builder {
  const char *name;
  sm_error *err;
  cfg_ynode *stack[CFG_MAX_DEPTH + 1];
  size_t depth;
  size_t nodes;
  cfg_ynode *root;
} builder;

void config_ynode_free(cfg_ynode *n) {
  if (!n) return;
  for (size_t i = 0; i < n->n; i++) config_ynode_free(n->kids[i]);
  free(n->kids);
  free(n->str);
  free(n);
}

int config_ynode_is_null(const cfg_ynode *n) {
  if (n == NULL) return 1;
  if (n->type != CFG_Y_SCALAR || !n->plain) return 0;
  return n->len == 0 || strcmp(n->str, "~") == 0 || strcmp(n->str, "null") == 0 ||
         strcmp(n->str, "Null") == 0 || strcmp(n->str, "NULL") == 0;
}

size_t config_map_size(const cfg_ynode *map) {
  return map && map->type == CFG_Y_MAP ? map->n / 2 : 0;
}

const cfg_ynode *config_map_key(const cfg_ynode *map, size_t i) { return map->kids[2 * i]; }
const cfg_ynode *config_map_value(const cfg_ynode *map, size_t i) { return map->kids[2 * i + 1]; }

const cfg_ynode *config_map_get(const cfg_ynode *map, const char *key) {
  for (size_t i = 0; i < config_map_size(map); i++) {
    const cfg_ynode *k = config_map_key(map, i);
    if (k->type == CFG_Y_SCALAR && strcmp(k->str, key) == 0) return config_map_value(map, i);
  }
  return NULL;
}

static int fail_at(builder *b, const yaml_mark_t *m, const char *msg) {
  return sm_error_set(b->err, SM_ECONFIG, "%s:%zu:%zu: syntax error: %s", b->name,
                      (size_t)m->line + 1, (size_t)m->column + 1, msg);
}

static int add_child(builder *b, cfg_ynode *parent, cfg_ynode *kid) {
  if (parent->n == parent->cap) {
    size_t cap = parent->cap ? parent->cap * 2 : 8;
    cfg_ynode **k = realloc(parent->kids, cap * sizeof *k);
    if (!k) return sm_error_set(b->err, SM_ENOMEM, "out of memory reading %s", b->name);
    parent->kids = k;
    parent->cap = cap;
  }
  parent->kids[parent->n++] = kid;
  return 0;
}

/* Attaches a finished (scalar) or opened (collection) node to its parent. */
static int attach(builder *b, cfg_ynode *node, const yaml_mark_t *m) {
  if (++b->nodes > CFG_MAX_NODES) {
    config_ynode_free(node);
    return fail_at(b, m, "too many nodes (the file is not a plausible configuration)");
  }
  if (b->depth == 0) {
    if (b->root) {
      config_ynode_free(node);
      return fail_at(b, m, "more than one root node");
    }
    b->root = node;
    return 0;
  }
  int rc = add_child(b, b->stack[b->depth - 1], node);
  if (rc) config_ynode_free(node);
  return rc;
}

static cfg_ynode *new_node(cfg_ytype type, const yaml_mark_t *m) {
  cfg_ynode *n = calloc(1, sizeof *n);
  if (!n) return NULL;
  n->type = type;
  n->line = (size_t)m->line + 1;
  n->col = (size_t)m->column + 1;
  return n;
}

static int on_scalar(builder *b, const yaml_event_t *ev) {
  const yaml_mark_t *m = &ev->start_mark;
  const char *tag = (const char *)ev->data.scalar.tag;
  if (tag && strcmp(tag, YAML_STR_TAG) != 0 && strcmp(tag, "!") != 0)
    return fail_at(b, m, "tags other than !!str are not supported");
  size_t len = ev->data.scalar.length;
  if (len > CFG_MAX_SCALAR) return fail_at(b, m, "value longer than 8192 bytes");
  if (memchr(ev->data.scalar.value, '\0', len)) return fail_at(b, m, "value contains a NUL byte");
  cfg_ynode *n = new_node(CFG_Y_SCALAR, m);
  if (!n) return sm_error_set(b->err, SM_ENOMEM, "out of memory reading %s", b->name);
  n->str = malloc(len + 1);
  if (!n->str) {
    free(n);
    return sm_error_set(b->err, SM_ENOMEM, "out of memory reading %s", b->name);
  }
  memcpy(n->str, ev->data.scalar.value, len);
  n->str[len] = '\0';
  n->len = len;
  n->plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && tag == NULL;
  return attach(b, n, m);
}

static int on_open(builder *b, const yaml_event_t *ev, cfg_ytype type) {
  const yaml_mark_t *m = &ev->start_mark;
  const char *tag = type == CFG_Y_MAP ? (const char *)ev->data.mapping_start.tag
                                      : (const char *)ev->data.sequence_start.tag;
  if (tag) return fail_at(b, m, "tags are not supported on lists or mappings");
  if (b->depth >= CFG_MAX_DEPTH) return fail_at(b, m, "nested too deeply");
  cfg_ynode *n = new_node(type, m);
  if (!n) return sm_error_set(b->err, SM_ENOMEM, "out of memory reading %s", b->name);
  int rc = attach(b, n, m);
  if (rc) return rc;
  b->stack[b->depth++] = n;
  return 0;
}

static int syntax_error(builder *b, const yaml_parser_t *p) {
  size_t line = (size_t)p->problem_mark.line + 1, col = (size_t)p->problem_mark.column + 1;
  const char *problem = p->problem ? p->problem : "invalid YAML";
  if (p->error == YAML_MEMORY_ERROR)
    return sm_error_set(b->err, SM_ENOMEM, "out of memory reading %s", b->name);
  if (p->context)
    return sm_error_set(b->err, SM_ECONFIG, "%s:%zu:%zu: syntax error: %s (%s at line %zu, column %zu)",
                        b->name, line, col, problem, p->context,
                        (size_t)p->context_mark.line + 1, (size_t)p->context_mark.column + 1);
  return sm_error_set(b->err, SM_ECONFIG, "%s:%zu:%zu: syntax error: %s", b->name, line, col,
                      problem);
}

int config_yaml_parse(cfg_ynode **out, const char *name, const char *text, size_t len,
                      sm_error *err) {
  *out = NULL;
  if (len > CFG_MAX_BYTES)
    return sm_error_set(err, SM_ECONFIG, "%s: larger than %u bytes", name, CFG_MAX_BYTES);
  yaml_parser_t p;
  if (!yaml_parser_initialize(&p)) return sm_error_set(err, SM_ENOMEM, "out of memory");
  yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
  builder b = {.name = name, .err = err};
  int rc = 0, documents = 0, done = 0;
  while (!done && rc == 0) {
    yaml_event_t ev;
    if (!yaml_parser_parse(&p, &ev)) {
      rc = syntax_error(&b, &p);
      break;
    }
    switch (ev.type) {
      case YAML_DOCUMENT_START_EVENT:
        if (++documents > 1) rc = fail_at(&b, &ev.start_mark, "only one YAML document is allowed");
        break;
      case YAML_SCALAR_EVENT: rc = on_scalar(&b, &ev); break;
      case YAML_SEQUENCE_START_EVENT: rc = on_open(&b, &ev, CFG_Y_SEQ); break;
      case YAML_MAPPING_START_EVENT: rc = on_open(&b, &ev, CFG_Y_MAP); break;
      case YAML_SEQUENCE_END_EVENT:
      case YAML_MAPPING_END_EVENT:
        if (b.depth > 0) b.depth--;
        break;
      case YAML_ALIAS_EVENT:
        rc = fail_at(&b, &ev.start_mark, "aliases (*name) are not supported");
        break;
      case YAML_STREAM_END_EVENT: done = 1; break;
      default: break;
    }
    yaml_event_delete(&ev);
  }
  yaml_parser_delete(&p);
  if (rc) {
    config_ynode_free(b.root);
    return rc;
  }
  *out = b.root;
  return 0;
}

int config_verr(cfg_vctx *v, const cfg_ynode *at, const char *path, const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return sm_error_set(v->err, SM_ECONFIG, "%s:%zu:%zu: %s: %s", v->file, at ? at->line : 1,
                      at ? at->col : 1, path[0] ? path : "(top level)", msg);
}
