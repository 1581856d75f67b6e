/* The proxy's settings as an owned, reference-counted copy: a runner keeps
 * one and swaps it on a configuration reload while calls in flight keep
 * the one they started with. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/egress.h>

#include "common/unconst.h"

struct sm_egress_settings {
  pthread_mutex_t mu;
  unsigned refs;
  sm_egress_proxy_options opts; /* strings below are owned */
  char **hosts;
};

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

int sm_egress_settings_new(sm_egress_settings **out, const sm_egress_proxy_options *o, sm_error *err) {
  *out = NULL;
  sm_egress_proxy_options none = SM_EGRESS_PROXY_OPTIONS_INIT;
  if (o == NULL) o = &none;
  sm_egress_settings *s = calloc(1, sizeof *s);
  if (s == NULL) return sm_error_set(err, SM_ENOMEM, "egress settings: out of memory");
  pthread_mutex_init(&s->mu, NULL);
  s->refs = 1;
  s->opts = *o;
  s->opts.instance = dup_or_null(o->instance);
  s->opts.state_dir = dup_or_null(o->state_dir);
  s->opts.network = dup_or_null(o->network);
  s->hosts = o->n_hosts ? calloc(o->n_hosts, sizeof *s->hosts) : NULL;
  int bad = (o->instance && !s->opts.instance) || (o->state_dir && !s->opts.state_dir) ||
            (o->network && !s->opts.network) || (o->n_hosts && !s->hosts);
  for (size_t i = 0; !bad && i < o->n_hosts; i++) bad = (s->hosts[i] = strdup(o->hosts[i])) == NULL;
  s->opts.hosts = (const char *const *)s->hosts;
  if (bad) {
    sm_egress_settings_unref(s);
    return sm_error_set(err, SM_ENOMEM, "egress settings: out of memory");
  }
  *out = s;
  return 0;
}

sm_egress_settings *sm_egress_settings_ref(sm_egress_settings *s) {
  if (s == NULL) return NULL;
  pthread_mutex_lock(&s->mu);
  s->refs++;
  pthread_mutex_unlock(&s->mu);
  return s;
}

void sm_egress_settings_unref(sm_egress_settings *s) {
  if (s == NULL) return;
  pthread_mutex_lock(&s->mu);
  unsigned left = --s->refs;
  pthread_mutex_unlock(&s->mu);
  if (left) return;
  free(SM_UNCONST(s->opts.instance));
  free(SM_UNCONST(s->opts.state_dir));
  free(SM_UNCONST(s->opts.network));
  for (size_t i = 0; s->hosts && i < s->opts.n_hosts; i++) free(s->hosts[i]);
  free(s->hosts);
  pthread_mutex_destroy(&s->mu);
  free(s);
}

const sm_egress_proxy_options *sm_egress_settings_options(const sm_egress_settings *s) {
  return s ? &s->opts : NULL;
}
