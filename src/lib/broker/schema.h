/* Arguments checked against a host tool's input_schema (the subset the
 * configuration accepts, docs/host-tools.md). */
#ifndef SANDMAN_BROKER_SCHEMA_H
#define SANDMAN_BROKER_SCHEMA_H

#include <stddef.h>

#include <json-c/json.h>

/* 0 when args (an object) fits schema; else -1 with msg saying which
 * argument and why (names only, never a value). */
int broker_schema_check(json_object *schema, json_object *args, char *msg, size_t len);

#endif
