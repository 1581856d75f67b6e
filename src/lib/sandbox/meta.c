/* The labels a sandbox carries about itself beyond its keys (meta.h): its
 * resources, its idle timeout and, for a sandbox made as a resource, its
 * template, its life and its owner's labels. The engine's labels are the
 * truth: a runner that starts again reads them back (src/lib/ops). */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "sandbox/meta.h"
#include "sandbox/spec.h"

static void add(json_object *labels, const char *key, const char *value) {
  char full[160];
  snprintf(full, sizeof full, SM_LABEL_PREFIX "%s", key);
  json_object_object_add(labels, full, json_object_new_string(value));
}

static void add_number(json_object *labels, const char *key, double v) {
  char s[40];
  snprintf(s, sizeof s, "%.15g", v);
  add(labels, key, s);
}

int sm_sandbox_label_check(const char *kv, sm_error *err) {
  const char *eq = kv ? strchr(kv, '=') : NULL;
  if (eq == NULL || eq == kv)
    return sm_error_set(err, SM_EINVAL, "a label is key=value, with a key");
  size_t kl = (size_t)(eq - kv);
  if (kl > SM_SANDBOX_LABEL_KEY_MAX || !isalnum((unsigned char)kv[0]))
    return sm_error_set(err, SM_EINVAL,
                        "label key '%.*s': 1 to %d of a-z 0-9 . _ -, starting with a letter or "
                        "digit",
                        (int)(kl > 64 ? 64 : kl), kv, SM_SANDBOX_LABEL_KEY_MAX);
  for (size_t i = 0; i < kl; i++) {
    unsigned char c = (unsigned char)kv[i];
    if (!(islower(c) || isdigit(c) || c == '.' || c == '_' || c == '-'))
      return sm_error_set(err, SM_EINVAL,
                          "label key '%.*s': only a-z 0-9 . _ - (lower case), up to %d",
                          (int)(kl > 64 ? 64 : kl), kv, SM_SANDBOX_LABEL_KEY_MAX);
  }
  const char *v = eq + 1;
  size_t vl = strlen(v);
  if (vl > SM_SANDBOX_LABEL_VALUE_MAX)
    return sm_error_set(err, SM_EINVAL, "label '%.*s': the value is longer than %d", (int)kl, kv,
                        SM_SANDBOX_LABEL_VALUE_MAX);
  for (size_t i = 0; i < vl; i++)
    if (!isprint((unsigned char)v[i]))
      return sm_error_set(err, SM_EINVAL, "label '%.*s': the value holds a control character",
                          (int)kl, kv);
  return 0;
}

int sandbox_meta_check(const sm_sandbox_meta *m, sm_error *err) {
  if (m == NULL) return 0;
  if (m->n_labels > SM_SANDBOX_LABELS_MAX)
    return sm_error_set(err, SM_EINVAL, "at most %d labels", SM_SANDBOX_LABELS_MAX);
  for (size_t i = 0; i < m->n_labels; i++) {
    int rc = sm_sandbox_label_check(m->labels[i], err);
    if (rc) return rc;
    size_t kl = (size_t)(strchr(m->labels[i], '=') - m->labels[i]);
    for (size_t j = 0; j < i; j++)
      if (strncmp(m->labels[j], m->labels[i], kl + 1) == 0)
        return sm_error_set(err, SM_EINVAL, "label '%.*s' given twice", (int)kl, m->labels[i]);
  }
  if (m->template_name && (strlen(m->template_name) > 63 || m->template_name[0] == '\0'))
    return sm_error_set(err, SM_EINVAL, "a template name is 1 to 63 characters");
  if (!(m->timeout_s >= 0) || m->timeout_s > 1e9)
    return sm_error_set(err, SM_EINVAL, "a sandbox's timeout is 0 (none) to 1e9 seconds");
  return 0;
}

void sandbox_meta_labels(json_object *labels, const sm_run_request *req) {
  const sm_sandbox_settings *s = &req->settings;
  add_number(labels, "cpu", s->cpu);
  add_number(labels, "memory", (double)s->memory);
  add_number(labels, "pids", (double)s->pids);
  add_number(labels, "disk", (double)s->disk);
  add(labels, "network", s->network);
  if (s->runtime[0]) add(labels, "runtime", s->runtime);
  if (s->idle_timeout_s > 0) add_number(labels, "idle-timeout", s->idle_timeout_s);
  const sm_sandbox_meta *m = req->meta;
  if (m == NULL) return;
  add(labels, "resource", "true");
  if (m->template_name) add(labels, "template", m->template_name);
  if (m->timeout_s > 0) add_number(labels, "timeout", m->timeout_s);
  for (size_t i = 0; i < m->n_labels; i++) {
    const char *eq = strchr(m->labels[i], '=');
    char key[SM_SANDBOX_LABEL_KEY_MAX + 8];
    snprintf(key, sizeof key, "label.%.*s", (int)(eq - m->labels[i]), m->labels[i]);
    add(labels, key, eq + 1);
  }
}
