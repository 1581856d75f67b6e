/* sandman-tools' JSON reader and writer (see json_mini.h). */
#include "agent/json_mini.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct parser {
  const char *p, *end;
} parser;

static void skip_ws(parser *ps) {
  while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
    ps->p++;
}

static int hex4(const char *p, unsigned *out) {
  unsigned v = 0;
  for (int i = 0; i < 4; i++) {
    char c = p[i];
    v <<= 4;
    if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
    else return -1;
  }
  *out = v;
  return 0;
}

static size_t put_utf8(char *out, unsigned cp) {
  if (cp < 0x80) {
    out[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    out[0] = (char)(0xc0 | cp >> 6);
    out[1] = (char)(0x80 | (cp & 0x3f));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = (char)(0xe0 | cp >> 12);
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[2] = (char)(0x80 | (cp & 0x3f));
    return 3;
  }
  out[0] = (char)(0xf0 | cp >> 18);
  out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
  out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
  out[3] = (char)(0x80 | (cp & 0x3f));
  return 4;
}

/* At the opening quote: the decoded string (malloc'd), its length. */
static char *parse_string(parser *ps, size_t *len) {
  const char *p = ps->p + 1;
  /* The decoded text is never longer than the escaped one. */
  const char *q = p;
  while (q < ps->end && *q != '"') q += *q == '\\' ? 2 : 1;
  if (q >= ps->end) return NULL;
  char *out = malloc((size_t)(q - p) + 1), *o = out;
  if (out == NULL) return NULL;
  while (p < q) {
    unsigned char c = (unsigned char)*p;
    if (c < 0x20) goto bad;
    if (c != '\\') {
      *o++ = (char)c;
      p++;
      continue;
    }
    if (p + 1 >= q) goto bad;
    char e = p[1];
    p += 2;
    switch (e) {
    case '"': *o++ = '"'; break;
    case '\\': *o++ = '\\'; break;
    case '/': *o++ = '/'; break;
    case 'b': *o++ = '\b'; break;
    case 'f': *o++ = '\f'; break;
    case 'n': *o++ = '\n'; break;
    case 'r': *o++ = '\r'; break;
    case 't': *o++ = '\t'; break;
    case 'u': {
      unsigned cp, lo;
      if (q - p < 4 || hex4(p, &cp) != 0) goto bad;
      p += 4;
      if (cp >= 0xd800 && cp < 0xdc00) {
        if (q - p < 6 || p[0] != '\\' || p[1] != 'u' || hex4(p + 2, &lo) != 0 || lo < 0xdc00 ||
            lo > 0xdfff)
          goto bad;
        p += 6;
        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
      } else if (cp >= 0xdc00 && cp < 0xe000) {
        goto bad;
      }
      o += put_utf8(o, cp); /* at most 4 bytes for 6 or 12 escaped */
      break;
    }
    default: goto bad;
    }
  }
  *o = '\0';
  *len = (size_t)(o - out);
  ps->p = q + 1;
  return out;
bad:
  free(out);
  return NULL;
}

static int parse_number(parser *ps) {
  const char *p = ps->p;
  if (p < ps->end && *p == '-') p++;
  if (p >= ps->end) return -1;
  if (*p == '0') p++;
  else if (*p >= '1' && *p <= '9')
    while (p < ps->end && *p >= '0' && *p <= '9') p++;
  else return -1;
  if (p < ps->end && *p == '.') {
    p++;
    if (p >= ps->end || *p < '0' || *p > '9') return -1;
    while (p < ps->end && *p >= '0' && *p <= '9') p++;
  }
  if (p < ps->end && (*p == 'e' || *p == 'E')) {
    p++;
    if (p < ps->end && (*p == '+' || *p == '-')) p++;
    if (p >= ps->end || *p < '0' || *p > '9') return -1;
    while (p < ps->end && *p >= '0' && *p <= '9') p++;
  }
  ps->p = p;
  return 0;
}

static int literal(parser *ps, const char *word) {
  size_t n = strlen(word);
  if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0) return -1;
  ps->p += n;
  return 0;
}

static jm_node *parse_value(parser *ps, int depth);

/* The members (object) or items (array) up to the closing bracket. */
static int parse_items(parser *ps, jm_node *n, int depth, char close) {
  jm_node **tail = &n->child;
  ps->p++;
  skip_ws(ps);
  if (ps->p < ps->end && *ps->p == close) {
    ps->p++;
    return 0;
  }
  for (;;) {
    char *key = NULL;
    size_t klen;
    if (close == '}') {
      skip_ws(ps);
      if (ps->p >= ps->end || *ps->p != '"' || (key = parse_string(ps, &klen)) == NULL) return -1;
      skip_ws(ps);
      if (ps->p >= ps->end || *ps->p != ':') {
        free(key);
        return -1;
      }
      ps->p++;
    }
    jm_node *item = parse_value(ps, depth + 1);
    if (item == NULL) {
      free(key);
      return -1;
    }
    item->key = key;
    *tail = item;
    tail = &item->next;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == ',') {
      ps->p++;
      continue;
    }
    if (ps->p < ps->end && *ps->p == close) {
      ps->p++;
      return 0;
    }
    return -1;
  }
}

static jm_node *parse_value(parser *ps, int depth) {
  if (depth > JM_MAX_DEPTH) return NULL;
  skip_ws(ps);
  if (ps->p >= ps->end) return NULL;
  jm_node *n = calloc(1, sizeof *n);
  if (n == NULL) return NULL;
  n->raw = ps->p;
  int rc = 0;
  switch (*ps->p) {
  case '{': n->type = JM_OBJ; rc = parse_items(ps, n, depth, '}'); break;
  case '[': n->type = JM_ARR; rc = parse_items(ps, n, depth, ']'); break;
  case '"':
    n->type = JM_STR;
    n->str = parse_string(ps, &n->str_len);
    rc = n->str ? 0 : -1;
    break;
  case 't': n->type = JM_BOOL; n->boolean = 1; rc = literal(ps, "true"); break;
  case 'f': n->type = JM_BOOL; rc = literal(ps, "false"); break;
  case 'n': n->type = JM_NULL; rc = literal(ps, "null"); break;
  default: n->type = JM_NUM; rc = parse_number(ps); break;
  }
  n->raw_len = (size_t)(ps->p - n->raw);
  if (rc != 0) {
    agent_json_free(n);
    return NULL;
  }
  return n;
}

jm_node *agent_json_parse(const char *text, size_t len) {
  parser ps = {text, text + len};
  jm_node *n = parse_value(&ps, 0);
  if (n == NULL) return NULL;
  skip_ws(&ps);
  if (ps.p != ps.end) {
    agent_json_free(n);
    return NULL;
  }
  return n;
}

void agent_json_free(jm_node *n) {
  while (n) {
    jm_node *next = n->next;
    agent_json_free(n->child);
    free(n->str);
    free(n->key);
    free(n);
    n = next;
  }
}

const jm_node *agent_json_get(const jm_node *obj, const char *key) {
  if (obj == NULL || obj->type != JM_OBJ) return NULL;
  const jm_node *found = NULL;
  for (const jm_node *m = obj->child; m; m = m->next)
    if (strcmp(m->key, key) == 0) found = m; /* the last one wins, as in most readers */
  return found;
}

const char *agent_json_get_str(const jm_node *obj, const char *key) {
  const jm_node *v = agent_json_get(obj, key);
  return v && v->type == JM_STR ? v->str : NULL;
}

void agent_json_buf_add(jm_buf *b, const char *s, size_t n) {
  if (b->failed) return;
  if (n > b->max - b->len) {
    b->failed = 1;
    return;
  }
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 1024;
    while (cap < b->len + n + 1) cap *= 2;
    char *d = realloc(b->data, cap);
    if (d == NULL) {
      b->failed = 1;
      return;
    }
    b->data = d;
    b->cap = cap;
  }
  memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = '\0';
}

void agent_json_buf_str(jm_buf *b, const char *s) { agent_json_buf_add(b, s, strlen(s)); }

void agent_json_buf_json_string(jm_buf *b, const char *s, size_t n) {
  static const char hex[] = "0123456789abcdef";
  agent_json_buf_add(b, "\"", 1);
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') {
      char e[2] = {'\\', (char)c};
      agent_json_buf_add(b, e, 2);
    } else if (c == '\n' || c == '\t' || c == '\r' || c == '\b' || c == '\f') {
      char e[2] = {'\\', c == '\n' ? 'n' : c == '\t' ? 't' : c == '\r' ? 'r' : c == '\b' ? 'b' : 'f'};
      agent_json_buf_add(b, e, 2);
    } else if (c < 0x20 || c == 0x7f) {
      char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
      agent_json_buf_add(b, e, 6);
    } else {
      agent_json_buf_add(b, (const char *)&s[i], 1);
    }
  }
  agent_json_buf_add(b, "\"", 1);
}
