/* Who asks the host-tool route: the process the kernel names as the
 * writer of a request's first bytes (SCM_CREDENTIALS) and its ancestors,
 * with their start times, as the relay reads them from /proc when those
 * bytes arrive (route.c). The
 * relay sends this "peer block" in front of each request; the host gives
 * the request the identity of the live call whose first process (pid and
 * start time, from the call's preamble) is in the chain, and none
 * otherwise (src/lib/sandbox/tool_route.c). A process whose call ended was
 * handed to the sandbox's init (or a subreaper) by the kernel and has no
 * call in its chain any more.
 *
 * libc only: built into sandman-agent and, for the host's decoding and the
 * unit tests, into the library. */
#ifndef SANDMAN_AGENT_ROUTE_PEER_H
#define SANDMAN_AGENT_ROUTE_PEER_H

#include <stddef.h>
#include <stdint.h>

/* Deeper process trees are cut there (no call is found above the cut). */
#define ROUTE_PEER_CHAIN_MAX 128
/* uid, gid, n (4 bytes each), then n times pid (4) and start (8); big endian. */
#define ROUTE_PEER_BLOCK_MAX (12u + ROUTE_PEER_CHAIN_MAX * 12u)

typedef struct route_peer {
  uint32_t uid, gid;
  uint32_t n;                            /* 0: no process of the sandbox's (or it is gone) */
  uint32_t pid[ROUTE_PEER_CHAIN_MAX];    /* [0] the writing process, then its parent, ... */
  uint64_t start[ROUTE_PEER_CHAIN_MAX];  /* start times, clock ticks since boot */
} route_peer;

/* The parent and the start time of a /proc/PID/stat line (line[0..len),
 * not NUL-terminated): 0, or -1 when it is not such a line. The process
 * names itself (comm), so the fields are read after its last ')'. */
int agent_route_peer_parse_stat(const char *line, size_t len, long *ppid,
                                unsigned long long *start);

/* Fills out->pid/start/n from process pid up its parents (read in proc,
 * "/proc"), stopping before pid 1 (the sandbox's init, which every orphan
 * is handed to) and at a parent 0 (an engine exec's first process). A
 * process that started after its child, or the peer itself when it started
 * after not_after (ticks; 0: no bound), is a pid used again since: the
 * chain ends before it. uid and gid are the caller's to set. */
void agent_route_peer_walk(const char *proc, long pid, unsigned long long not_after,
                           route_peer *out);

/* Clock ticks since boot now, as /proc/PID/stat counts start times. */
unsigned long long agent_route_peer_now_ticks(void);

/* The block of p into out (cap bytes): its length, 0 when it does not fit. */
size_t agent_route_peer_encode(const route_peer *p, unsigned char *out, size_t cap);
/* The block at the front of in[0..len) into out: its length, 0 when it is
 * malformed (short, or n over ROUTE_PEER_CHAIN_MAX). */
size_t agent_route_peer_decode(const unsigned char *in, size_t len, route_peer *out);

#endif
