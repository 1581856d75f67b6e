/* What doctor says about a swarm (doctor.c presents it): the manager and
 * its quorum, the nodes, TLS to every ready node with the certificates the
 * swarm backend would use, the image on every node. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "ops/swarm_health.h"
#include "sandbox/backend_swarm_box.h"

static void append(char *buf, size_t cap, const char *sep, const char *text) {
  size_t used = strlen(buf);
  if (used < cap) snprintf(buf + used, cap - used, "%s%s", used ? sep : "", text);
}

void ops_swarm_health(sm_engine *engine, const sm_ops_doctor_options *o, const char *image,
                      ops_swarm_health_report *h) {
  memset(h, 0, sizeof *h);
  sm_error e = SM_ERROR_INIT;
  cleanup_json json_object *swarm = NULL;
  cleanup_json json_object *nodes = NULL;
  if (engine_swarm_inspect(engine, &swarm, &e) != 0 ||
      engine_node_list(engine, &nodes, &e) != 0) {
    snprintf(h->manager_error, sizeof h->manager_error, "%s", e.message);
    return;
  }
  h->manager_ok = 1;
  size_t n = json_object_array_length(nodes);
  engine_swarm_node *all = calloc(n ? n : 1, sizeof *all);
  sandbox_swarm *sw = NULL;
  if (all == NULL || sandbox_swarm_new(&sw, &o->swarm, &o->engine, &e) != 0) {
    snprintf(h->tls_bad, sizeof h->tls_bad, "%s", all ? e.message : "out of memory");
    free(all);
    return;
  }
  size_t parsed = 0;
  for (size_t i = 0; i < n; i++) {
    engine_swarm_node *nd = &all[parsed];
    if (engine_swarm_node_parse(json_object_array_get_idx(nodes, i), nd, &e) != 0) continue;
    parsed++;
    h->managers += nd->manager;
    h->reachable += nd->manager && nd->reachable;
    if (nd->ready) {
      h->ready++;
    } else {
      char d[ENGINE_SWARM_NAME_MAX + 48];
      snprintf(d, sizeof d, "%s (%s/%s)", nd->hostname, nd->state, nd->availability);
      append(h->down, sizeof h->down, ", ", d);
    }
  }
  h->nodes = parsed;
  for (size_t i = 0; i < parsed; i++) {
    if (!all[i].ready) continue;
    h->tls_tried++;
    sm_engine *ne = NULL;
    sm_error ne_err = SM_ERROR_INIT;
    if (sandbox_swarm_node_engine(sw, &all[i], &ne, &ne_err) != 0) {
      char d[400];
      snprintf(d, sizeof d, "%s: %.300s", all[i].hostname, ne_err.message);
      append(h->tls_bad, sizeof h->tls_bad, "; ", d);
      continue;
    }
    h->tls_ok++;
    json_object *ii = NULL;
    if (sm_engine_image_inspect(ne, image, &ii, &ne_err) == 0) {
      h->image_ok++;
    } else {
      append(h->image_missing, sizeof h->image_missing, ", ", all[i].hostname);
      if (h->image_fix[0] == '\0')
        snprintf(h->image_fix, sizeof h->image_fix,
                 "load it into each: docker save %.80s | docker --tlsverify -H tcp://%s:%d load "
                 "(sandman never pulls)",
                 image, all[i].addr, o->swarm.node_port > 0 ? o->swarm.node_port : 2376);
    }
    json_object_put(ii);
  }
  sandbox_swarm_free(sw);
  free(all);
}
