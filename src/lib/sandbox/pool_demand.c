/* The warm pool's size from the calls it sees (pool_demand.h). */
#include "sandbox/pool_demand.h"

#include <string.h>

void sandbox_pool_demand_init(sandbox_pool_demand *d) {
  memset(d, 0, sizeof *d);
  d->make_ms = SM_POOL_DEMAND_MAKE_MS;
}

/* Calls in the ring at or after `since`. */
static unsigned calls_since(const sandbox_pool_demand *d, double since) {
  unsigned count = 0;
  for (unsigned k = 0; k < d->n; k++) {
    unsigned i = (d->next + SM_POOL_DEMAND_RING - 1 - k) % SM_POOL_DEMAND_RING;
    if (d->at[i] < since) break; /* newest first: the rest are older */
    count++;
  }
  return count;
}

void sandbox_pool_demand_call(sandbox_pool_demand *d, double now_ms, int missed, unsigned base,
                              int others) {
  d->at[d->next] = now_ms;
  d->next = (d->next + 1) % SM_POOL_DEMAND_RING;
  if (d->n < SM_POOL_DEMAND_RING) d->n++;
  /* The run of calls back to back this one belongs to. */
  if (others || (d->last_seen > 0 && now_ms - d->last_seen <= d->make_ms)) {
    if (d->run < SM_POOL_DEMAND_RING) d->run++;
  } else {
    d->run = 1;
    d->run_missed = 0;
  }
  d->last_seen = now_ms;
  unsigned burst = calls_since(d, now_ms - d->make_ms);
  if (missed && d->made > 0) {
    unsigned held = now_ms - d->peak_at > SM_POOL_DEMAND_HOLD_MS ? 0 : d->peak;
    unsigned more = (held > base ? held : base) + 1;
    if (more > burst) burst = more;
    d->run_missed = 1;
  }
  if (d->run_missed && d->run > burst) burst = d->run;
  if (burst >= d->peak || now_ms - d->peak_at > SM_POOL_DEMAND_HOLD_MS) {
    d->peak = burst;
    d->peak_at = now_ms;
  }
}

void sandbox_pool_demand_done(sandbox_pool_demand *d, double now_ms) {
  if (now_ms > d->last_seen) d->last_seen = now_ms;
}

void sandbox_pool_demand_made(sandbox_pool_demand *d, double ms) {
  if (!(ms > 0)) return;
  d->made++;
  d->make_ms = d->make_ms * 0.75 + ms * 0.25;
}

unsigned sandbox_pool_demand_target(const sandbox_pool_demand *d, unsigned base, unsigned max,
                                    double now_ms) {
  if (base == 0) return 0;
  if (max < base) max = base;
  unsigned want = d->peak;
  if (now_ms - d->peak_at > SM_POOL_DEMAND_HOLD_MS)
    want = calls_since(d, now_ms - d->make_ms); /* the peak has aged out */
  if (want < base) want = base;
  return want > max ? max : want;
}
