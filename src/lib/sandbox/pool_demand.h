/* How many ready containers a configuration's warm pool keeps (pool.c):
 * its base size, and more while calls come faster than containers can be
 * made (pool_demand.c). Pure bookkeeping: no lock, no engine; the pool
 * holds its own lock around these calls.
 *
 * The measure is the largest number of calls that arrived within one
 * making time (a container's create, start and agent install, averaged
 * over the last ones): that many are taken before a refill started by the
 * first of them can be ready, so that many must be ready when such a burst
 * comes again. A call that finds the pool empty adds one more: calls that
 * wait for their container come no faster than containers are made, so
 * the first measure alone would not see a burst that outruns the pool
 * (not before the pool has made its first container: until then it is
 * empty because it is new). And once a call of a run of calls back to
 * back (each began while another ran or waited, or within one making time
 * of the last one's start or end) found the pool empty, the whole run
 * counts: one client calling back to back never has two calls within one
 * making time while it waits for each container, yet its next burst as
 * long needs that many ready.
 * The peak is kept for SM_POOL_DEMAND_HOLD_MS after it was last raised,
 * then falls back to what recent calls show. */
#ifndef SANDMAN_SANDBOX_POOL_DEMAND_H
#define SANDMAN_SANDBOX_POOL_DEMAND_H

#define SM_POOL_DEMAND_RING 64            /* calls remembered */
#define SM_POOL_DEMAND_HOLD_MS 60000.0    /* a peak is kept this long */
#define SM_POOL_DEMAND_MAKE_MS 600.0      /* the making time before any is measured */

typedef struct sandbox_pool_demand {
  double at[SM_POOL_DEMAND_RING]; /* monotonic ms of the last calls, a ring */
  unsigned next, n;
  double make_ms;                 /* average making time (exponential, 1/4 weight) */
  unsigned long made;             /* containers made so far */
  unsigned peak;                  /* most calls within one making time... */
  double peak_at;                 /* ...last seen then */
  double last_seen;               /* the last call's start or end (0: none yet) */
  unsigned run;                   /* calls of the current run back to back */
  int run_missed;                 /* one of them found the pool empty */
} sandbox_pool_demand;

void sandbox_pool_demand_init(sandbox_pool_demand *d);
/* A call of the configuration at now_ms; missed: it found no container
 * ready, with `base` the pool's base size; others: another call of it is
 * running or waiting for its container. */
void sandbox_pool_demand_call(sandbox_pool_demand *d, double now_ms, int missed, unsigned base,
                              int others);
/* A call that took a container ended at now_ms. */
void sandbox_pool_demand_done(sandbox_pool_demand *d, double now_ms);
/* A container was made in ms (create to ready). */
void sandbox_pool_demand_made(sandbox_pool_demand *d, double ms);
/* Ready containers wanted now: the peak, within [base, max] (max below
 * base counts as base). base 0 (the pool is off) gives 0. */
unsigned sandbox_pool_demand_target(const sandbox_pool_demand *d, unsigned base, unsigned max,
                                    double now_ms);

#endif
