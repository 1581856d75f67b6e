/* A small, bounded JSON reader for sandman-tools (the agent binary stays
 * libc-only): a tree whose nodes keep their span in the source, so that
 * a value can be printed back exactly as it came. */
#ifndef SANDMAN_AGENT_JSON_MINI_H
#define SANDMAN_AGENT_JSON_MINI_H

#include <stddef.h>

#define JM_MAX_DEPTH 64

enum { JM_NULL, JM_BOOL, JM_NUM, JM_STR, JM_ARR, JM_OBJ };

typedef struct jm_node {
  int type;
  int boolean;             /* JM_BOOL */
  const char *raw;         /* the value's text in the source */
  size_t raw_len;
  char *str;               /* JM_STR: decoded (UTF-8, NUL-terminated) */
  size_t str_len;
  char *key;               /* a member of an object: its decoded name */
  struct jm_node *child, *next;
} jm_node;

/* Parses text[0..len) (one value, whitespace around it). NULL when it is
 * not JSON (or nests deeper than JM_MAX_DEPTH, or memory runs out). */
jm_node *agent_json_parse(const char *text, size_t len);
void agent_json_free(jm_node *n);
/* The member named key of an object, or NULL. */
const jm_node *agent_json_get(const jm_node *obj, const char *key);
/* The string value of member key, or NULL when absent or not a string. */
const char *agent_json_get_str(const jm_node *obj, const char *key);

/* A growing text with a hard cap. */
typedef struct jm_buf {
  char *data;
  size_t len, cap, max;
  int failed; /* over max or out of memory */
} jm_buf;

void agent_json_buf_add(jm_buf *b, const char *s, size_t n);
void agent_json_buf_str(jm_buf *b, const char *s);
/* s as a JSON string literal, quotes included. */
void agent_json_buf_json_string(jm_buf *b, const char *s, size_t n);

#endif
