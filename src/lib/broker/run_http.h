/* Host tools that relay their arguments to an HTTP endpoint (`http:`). */
#ifndef SANDMAN_BROKER_RUN_HTTP_H
#define SANDMAN_BROKER_RUN_HTTP_H

#include <stddef.h>

#include <json-c/json.h>

#include <sandman/error.h>
#include <sandman/mcp.h>

/* Sends args as the JSON body to http (the tool's {url, method, headers}),
 * follows no redirect, stops at timeout_s and max_output bytes of answer.
 * A 2xx answer is the result (its JSON object also as structured); any
 * other status is is_error. SM_ETIMEOUT past the timeout; SM_EIO when the
 * endpoint cannot be reached. */
int broker_http_call(json_object *http, json_object *args, double timeout_s, size_t max_output,
                     volatile int *cancel, sm_mcp_result *out, sm_error *err);

#endif
