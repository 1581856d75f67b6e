/* Arguments against a host tool's input_schema: each rule refuses what it
 * should, the message names the argument and never its value. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <sandman/sandman.h>

#include "broker/schema.h"

static const char *yaml =
    "broker:\n  tools:\n    t:\n      argv: [x]\n      input_schema:\n        type: object\n"
    "        properties:\n"
    "          s: {type: string, maxLength: 5, minLength: 1}\n"
    "          e: {type: string, enum: [a, b]}\n"
    "          i: {type: integer, minimum: 1, maximum: 10}\n"
    "          n: {type: number, maximum: 1.5}\n"
    "          b: {type: boolean}\n"
    "          l: {type: array, items: {type: string, maxLength: 3}, maxItems: 2}\n"
    "        required: [s]\n";

typedef struct scase {
  const char *args;
  int ok;
  const char *msg;
} scase;

static const scase cases[] = {
    {"{\"s\": \"abc\"}", 1, NULL},
    {"{\"s\": \"a\", \"e\": \"b\", \"i\": 10, \"n\": 1, \"b\": false, \"l\": [\"x\", \"yz\"]}", 1, NULL},
    {"{}", 0, "argument 's' is required"},
    {"{\"s\": \"secret-value-long\"}", 0, "argument 's' is longer than its maxLength"},
    {"{\"s\": \"\"}", 0, "shorter than its minLength"},
    {"{\"s\": 5}", 0, "argument 's' must be a string"},
    {"{\"s\": \"a\", \"e\": \"c\"}", 0, "argument 'e' is not one of its enum values"},
    {"{\"s\": \"a\", \"i\": 1.5}", 0, "argument 'i' must be a whole number"},
    {"{\"s\": \"a\", \"i\": 0}", 0, "argument 'i' is below its minimum"},
    {"{\"s\": \"a\", \"n\": 2}", 0, "argument 'n' is above its maximum"},
    {"{\"s\": \"a\", \"n\": \"1\"}", 0, "argument 'n' must be a number"},
    {"{\"s\": \"a\", \"b\": 1}", 0, "argument 'b' must be true or false"},
    {"{\"s\": \"a\", \"l\": \"x\"}", 0, "argument 'l' must be a list"},
    {"{\"s\": \"a\", \"l\": [\"a\", \"b\", \"c\"]}", 0, "more items than its maxItems"},
    {"{\"s\": \"a\", \"l\": [1]}", 0, "argument 'l' must be a string"},
    {"{\"s\": \"a\", \"l\": [\"long\"]}", 0, "argument 'l' is longer than its maxLength"},
    {"{\"s\": \"a\", \"zz\": 1}", 0, "argument 'zz' is not in the tool's schema"},
    {"{\"s\": \"a\\u0000b\"}", 0, "holds a NUL byte"},
    {"[1]", 0, "arguments must be a JSON object"},
};

static void table(void **state) {
  (void)state;
  sm_config *cfg = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_config_load_string(&cfg, "s.yaml", yaml, strlen(yaml), &err), 0);
  json_object *schema = json_object_object_get(
      json_object_object_get(json_object_object_get(sm_config_broker(cfg), "tools"), "t"),
      "input_schema");
  assert_non_null(schema);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    json_object *args = json_tokener_parse(cases[i].args);
    char msg[256] = "";
    int rc = broker_schema_check(schema, args, msg, sizeof msg);
    if ((rc == 0) != cases[i].ok || (cases[i].msg && !strstr(msg, cases[i].msg)))
      fprintf(stderr, "%s: rc %d msg '%s'\n", cases[i].args, rc, msg);
    assert_int_equal(rc == 0, cases[i].ok);
    if (cases[i].msg) assert_non_null(strstr(msg, cases[i].msg));
    assert_null(strstr(msg, "secret-value")); /* names, never values */
    json_object_put(args);
  }
  sm_config_free(cfg);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(table)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
