/* Repeated keys in JSON text from outside. json-c keeps one of them (the
 * last) without a word, so two readers of one body could disagree on what
 * it says: the runner's request bodies, MCP messages (the runner's /mcp,
 * the route's /mcp, `sandman mcp`) and the route's host-tool calls refuse
 * a body that repeats a key in any object, however it is spelled ("A",
 * "\u0041"). Internal to the library. */
#ifndef SANDMAN_COMMON_JSON_KEYS_H
#define SANDMAN_COMMON_JSON_KEYS_H

#include <stddef.h>

#include <json-c/json.h>

/* 0 when no object of parsed repeats a key. text[0..len) must be the
 * syntactically valid JSON text parsed was made from (nothing after it but
 * white space). -1 with *why set otherwise: a repeated key, or a key
 * holding \u0000 (json-c keeps keys as C strings and would cut it). */
int common_json_keys_unique(const char *text, size_t len, json_object *parsed, const char **why);

#endif
