/* Bytes from outside as JSON text. Internal to the library. */
#ifndef SANDMAN_COMMON_TEXT_H
#define SANDMAN_COMMON_TEXT_H

#include <stddef.h>

#include <json-c/json.h>

/* A JSON string of data (NULL: ""): tool output is bytes and JSON strings
 * are Unicode, so invalid UTF-8 sequences become U+FFFD and the object
 * always serialises. */
json_object *common_json_text(const char *data, size_t len);
/* A JSON array of the strings v[0..n) (NULL: out of memory). */
json_object *common_json_strings(const char *const *v, size_t n);
/* 1 when data[0..len) is valid UTF-8. */
int common_utf8_valid(const char *data, size_t len);

#endif
