/* A container's /workspace filled from a saved tar (ws_fill.h).
 *
 * The engine's archive upload extracts in a process of its own, as root,
 * one file at a time with its Go runtime: 0.8 s for 10,000 files here. The
 * agent's unpacker (src/agent/untar.c, the workspace's copy in) takes the
 * same tar in well under half that, as the sandbox's user, never following
 * a link. It is used only when it would make exactly what the upload makes:
 * the tar is read through on the host first (headers only) and anything
 * the unpacker does not take as the tar says (a fifo, a device, a setuid
 * bit, an extended attribute, an owner other than the sandbox's user, a
 * hard link to something that is not a regular file before it) sends the
 * whole tar to the engine's upload instead, decided before a byte is
 * written, so a /workspace is never half filled by one and finished by the
 * other. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sandman/log.h>
#include <sandman/util.h>

#include "agent/tar_path.h"
#include "common/buf.h"
#include "sandbox/helper.h"
#include "sandbox/ws_fill.h"
#include "sandbox/ws_save.h"

#define FILL_BLOCK 512
#define FILL_PAX_MAX (64u << 10)
#define FILL_PATH_MAX 8192 /* the unpacker's own limit */
#define FILL_MAX_ENTRIES 4000000L
#define FILL_TIMEOUT_S 3600.0

/* ---- the paths met so far (a hard link's target must be one of them) ---- */

typedef struct fill_set {
  char **path;
  unsigned char *reg;
  size_t n, cap;
} fill_set;

static uint64_t fill_hash(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

/* The slot of path: where it is, or the empty one where it would go. */
static size_t fill_slot(const fill_set *s, const char *path) {
  size_t i = (size_t)fill_hash(path) & (s->cap - 1);
  while (s->path[i] && strcmp(s->path[i], path) != 0) i = (i + 1) & (s->cap - 1);
  return i;
}

static int fill_set_grow(fill_set *s) {
  fill_set g = {calloc(s->cap ? s->cap * 2 : 1024, sizeof(char *)), NULL, s->n,
                s->cap ? s->cap * 2 : 1024};
  g.reg = calloc(g.cap, 1);
  if (g.path == NULL || g.reg == NULL) {
    free(g.path);
    free(g.reg);
    return -1;
  }
  for (size_t i = 0; i < s->cap; i++) {
    if (!s->path[i]) continue;
    size_t k = fill_slot(&g, s->path[i]);
    g.path[k] = s->path[i];
    g.reg[k] = s->reg[i];
  }
  free(s->path);
  free(s->reg);
  *s = g;
  return 0;
}

/* 1: added, 0: there already, -1: out of memory. */
static int fill_set_add(fill_set *s, const char *path, int reg) {
  if ((s->n + 1) * 2 > s->cap && fill_set_grow(s) != 0) return -1;
  size_t i = fill_slot(s, path);
  if (s->path[i]) return 0;
  if ((s->path[i] = strdup(path)) == NULL) return -1;
  s->reg[i] = (unsigned char)reg;
  s->n++;
  return 1;
}

static int fill_set_is_reg(const fill_set *s, const char *path) {
  if (s->cap == 0) return 0;
  size_t i = fill_slot(s, path);
  return s->path[i] && s->reg[i];
}

static void fill_set_free(fill_set *s) {
  for (size_t i = 0; i < s->cap; i++) free(s->path[i]);
  free(s->path);
  free(s->reg);
}

/* ---- one header ---- */

/* An octal field; -1 when it is not one (base-256 included: such sizes
 * and ids go to the engine). */
static int64_t fill_octal(const unsigned char *p, size_t n) {
  if (p[0] & 0x80) return -1;
  int64_t v = 0;
  size_t i = 0;
  while (i < n && p[i] == ' ') i++;
  for (; i < n && p[i] >= '0' && p[i] <= '7'; i++) {
    if (v > (INT64_MAX >> 3)) return -1;
    v = v * 8 + (p[i] - '0');
  }
  return v;
}

static int fill_header_ok(const unsigned char *h) {
  int64_t sum = 0;
  for (int i = 0; i < FILL_BLOCK; i++) sum += (i >= 148 && i < 156) ? ' ' : h[i];
  return sum == fill_octal(h + 148, 8) && memcmp(h + 257, "ustar", 5) == 0;
}

/* What a pax header says that matters here. */
typedef struct fill_pax {
  char path[FILL_PATH_MAX], link[FILL_PATH_MAX];
  int has_path, has_link;
  int64_t size, uid, gid; /* -1: not given */
} fill_pax;

static int fill_decimal(const char *v, size_t n, int64_t *out) {
  int64_t x = 0;
  if (n == 0) return -1;
  for (size_t i = 0; i < n; i++) {
    if (v[i] < '0' || v[i] > '9' || x > INT64_MAX / 10 - 9) return -1;
    x = x * 10 + (v[i] - '0');
  }
  *out = x;
  return 0;
}

/* 0, or -1 with why set: a record the unpacker would drop or misread. */
static int fill_pax_parse(const char *p, size_t len, fill_pax *x, char *why, size_t why_len) {
  static const char *const ignored[] = {"mtime", "atime", "ctime", "uname", "gname", "hdrcharset", "comment"};
  size_t off = 0;
  while (off < len) {
    size_t rl = 0, i = off;
    while (i < len && p[i] >= '0' && p[i] <= '9' && rl < len) rl = rl * 10 + (size_t)(p[i++] - '0');
    if (i >= len || p[i] != ' ' || rl == 0 || rl > len - off || p[off + rl - 1] != '\n')
      return snprintf(why, why_len, "a pax header it cannot read"), -1;
    const char *key = p + i + 1, *end = p + off + rl - 1;
    const char *eq = memchr(key, '=', (size_t)(end - key));
    if (eq == NULL) return snprintf(why, why_len, "a pax header it cannot read"), -1;
    size_t klen = (size_t)(eq - key), vlen = (size_t)(end - eq - 1);
    const char *val = eq + 1;
#define FILL_KEY(k) (klen == sizeof(k) - 1 && memcmp(key, k, klen) == 0)
    int ok = 1;
    if (FILL_KEY("path") || FILL_KEY("linkpath")) {
      char *dst = FILL_KEY("path") ? x->path : x->link;
      ok = vlen < FILL_PATH_MAX && memchr(val, '\0', vlen) == NULL;
      if (ok) memcpy(dst, val, vlen), dst[vlen] = '\0';
      *(FILL_KEY("path") ? &x->has_path : &x->has_link) = 1;
    } else if (FILL_KEY("size")) {
      ok = fill_decimal(val, vlen, &x->size) == 0;
    } else if (FILL_KEY("uid") || FILL_KEY("gid")) {
      ok = fill_decimal(val, vlen, FILL_KEY("uid") ? &x->uid : &x->gid) == 0;
    } else {
      ok = 0;
      for (size_t k = 0; k < sizeof ignored / sizeof *ignored; k++)
        if (klen == strlen(ignored[k]) && memcmp(key, ignored[k], klen) == 0) ok = 1;
      if (!ok) return snprintf(why, why_len, "a pax record %.*s", (int)(klen > 64 ? 64 : klen), key), -1;
    }
#undef FILL_KEY
    if (!ok) return snprintf(why, why_len, "a pax record it cannot take"), -1;
    off += rl;
  }
  return 0;
}

/* ---- the scan ---- */

typedef struct fill_scan {
  int fd;
  int64_t off;
  long uid, gid, max_entries;
  fill_set seen;
  fill_pax pax;
  char path[FILL_PATH_MAX], link[FILL_PATH_MAX]; /* the entry's (never static: forks run at once) */
  char *why;
  size_t why_len;
} fill_scan;

static int fill_read(fill_scan *s, void *buf, size_t len) {
  size_t done = 0;
  while (done < len) {
    ssize_t n = pread(s->fd, (char *)buf + done, len - done, (off_t)(s->off + (int64_t)done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    done += (size_t)n;
  }
  s->off += (int64_t)len;
  return 0;
}

#define FILL_NO(...) (snprintf(s->why, s->why_len, __VA_ARGS__), WS_FILL_ENGINE)

/* A pax header's records into s->pax. */
static int fill_scan_pax(fill_scan *s, int64_t size) {
  if (size < 0 || size > (int64_t)FILL_PAX_MAX) return FILL_NO("a pax header too large");
  size_t padded = (size_t)(size + FILL_BLOCK - 1) / FILL_BLOCK * FILL_BLOCK;
  char *buf = malloc(padded + 1);
  if (buf == NULL) return -1;
  int rc = WS_FILL_AGENT;
  if (padded && fill_read(s, buf, padded) != 0) rc = FILL_NO("a pax header cut short");
  else if (fill_pax_parse(buf, (size_t)size, &s->pax, s->why, s->why_len) != 0) rc = WS_FILL_ENGINE;
  free(buf);
  return rc;
}

/* One entry's header (after its pax records): WS_FILL_AGENT to go on. */
static int fill_scan_entry(fill_scan *s, const unsigned char *h, int64_t size) {
  char *path = s->path, *link = s->link;
  char type = h[156] ? (char)h[156] : '0';
  if (!strchr("0521", type)) return FILL_NO("an entry of type '%c'", type);
  int64_t mode = fill_octal(h + 100, 8);
  if (mode < 0 || (mode & 07000)) return FILL_NO("a setuid, setgid or sticky mode");
  int64_t uid = s->pax.uid >= 0 ? s->pax.uid : fill_octal(h + 108, 8);
  int64_t gid = s->pax.gid >= 0 ? s->pax.gid : fill_octal(h + 116, 8);
  if (uid != s->uid || gid != s->gid)
    return FILL_NO("an entry owned by %lld:%lld", (long long)uid, (long long)gid);
  if (s->pax.has_path) snprintf(path, FILL_PATH_MAX, "%s", s->pax.path);
  else if (h[345]) snprintf(path, FILL_PATH_MAX, "%.155s/%.100s", (const char *)h + 345, (const char *)h);
  else snprintf(path, FILL_PATH_MAX, "%.100s", (const char *)h);
  if (s->pax.has_link) snprintf(link, FILL_PATH_MAX, "%s", s->pax.link);
  else snprintf(link, FILL_PATH_MAX, "%.100s", (const char *)h + 157);
  if (agent_tar_path_clean(path) != 0) return FILL_NO("a path it refuses");
  if (type == '1' && (agent_tar_path_clean(link) != 0 || !fill_set_is_reg(&s->seen, link)))
    return FILL_NO("a hard link to no regular file before it");
  int added = fill_set_add(&s->seen, path, type == '0');
  if (added < 0) return -1;
  if (added == 0) return FILL_NO("a path twice");
  if ((long)s->seen.n > s->max_entries) return FILL_NO("too many entries");
  /* its data (a link's or directory's size is skipped the same way) */
  s->off += (size + FILL_BLOCK - 1) / FILL_BLOCK * FILL_BLOCK;
  return WS_FILL_AGENT;
}

static int fill_scan_run(fill_scan *s) {
  unsigned char h[FILL_BLOCK];
  static const unsigned char zero[FILL_BLOCK];
  for (;;) {
    if (fill_read(s, h, FILL_BLOCK) != 0) return FILL_NO("the tar cut short");
    if (memcmp(h, zero, FILL_BLOCK) == 0) return WS_FILL_AGENT;
    if (!fill_header_ok(h)) return FILL_NO("a header it does not read");
    int64_t size = fill_octal(h + 124, 12);
    if (h[156] == 'x') {
      int rc = fill_scan_pax(s, size);
      if (rc != WS_FILL_AGENT) return rc;
      continue;
    }
    if (s->pax.size >= 0) size = s->pax.size;
    if (size < 0) return FILL_NO("a size it cannot read");
    int rc = fill_scan_entry(s, h, size);
    if (rc != WS_FILL_AGENT) return rc;
    memset(&s->pax, 0, sizeof s->pax);
    s->pax.size = s->pax.uid = s->pax.gid = -1;
  }
}

int sandbox_ws_fill_scan(int fd, long uid, long gid, long max_entries, int *verdict, char *why,
                         size_t why_len, sm_error *err) {
  *verdict = WS_FILL_ENGINE;
  fill_scan *s = calloc(1, sizeof *s);
  if (s == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory");
  s->fd = fd;
  s->uid = uid;
  s->gid = gid;
  s->max_entries = max_entries > 0 ? max_entries : FILL_MAX_ENTRIES;
  s->why = why;
  s->why_len = why_len;
  s->pax.size = s->pax.uid = s->pax.gid = -1;
  why[0] = '\0';
  int rc = fill_scan_run(s);
  fill_set_free(&s->seen);
  free(s);
  if (rc < 0) return sm_error_set(err, SM_ENOMEM, "out of memory");
  *verdict = rc;
  return 0;
}

/* ---- the fill ---- */

/* "UID:GID" (or "UID", the group the same), numbers only; 0 for anything
 * else, root included: the unpacker is never run as root. */
static int fill_user(const char *user, long *uid, long *gid) {
  if (user == NULL || user[0] < '0' || user[0] > '9') return 0;
  char *end = NULL;
  *uid = strtol(user, &end, 10);
  *gid = *uid;
  if (*end == ':') {
    const char *g = end + 1;
    if (*g < '0' || *g > '9') return 0;
    *gid = strtol(g, &end, 10);
  }
  return *end == '\0' && *uid > 0 && *gid >= 0;
}

static ssize_t fill_fd_read(void *ud, char *buf, size_t len) {
  ssize_t n;
  do n = read(*(int *)ud, buf, len);
  while (n < 0 && errno == EINTR);
  return n;
}

static int fill_collect(void *ud, int stream, const char *data, size_t len) {
  if (stream == 1) common_buf_append_capped(ud, data, len);
  return 0;
}

/* The agent made ready to unpack (*ready): in a runner a session opened
 * as session says (SM_AGENT_OPEN*; its hello proves the agent runs), else
 * installed for an engine exec. Not ready (why says why): the engine. */
static int fill_agent_ready(sandbox_agents *agents, int session, sm_engine *e, const char *id,
                            const char *user, sandbox_agent_session **s, int *ready, char *why,
                            size_t why_len, sm_error *err) {
  *s = NULL;
  *ready = 0;
  if (session && agents && sandbox_agents_enabled(agents)) {
    int rc = sandbox_agent_take(agents, e, id, user, session, s);
    if (rc) return sm_error_set(err, rc, "container %.12s is gone", id);
    if (*s) {
      *ready = 1;
      return 0;
    }
  }
  sm_error ierr = SM_ERROR_INIT;
  if (sandbox_agent_install(agents, e, id, &ierr) != 0) {
    snprintf(why, why_len, "the agent: %s", ierr.message);
    return 0;
  }
  *ready = 1;
  return 0;
}

/* The unpacker as user, the tar on its stdin (its errors on stdout): over
 * session s, given back afterwards so that the sandbox's first call takes
 * it (no exec of its own, no second install), or (s NULL: the CLI, or no
 * session opened) through an engine exec. */
static int fill_untar(sandbox_agents *agents, sandbox_agent_session *s, sm_engine *e,
                      const char *id, const char *user, int fd, sm_error *err) {
  char agent[128];
  sandbox_agent_binary_path(agent, sizeof agent);
  const char *argv[] = {"/bin/sh", "-c", "exec \"$@\" 2>&1", "sh", agent, "untar", "/workspace"};
  common_buf out;
  common_buf_init(&out, 4096);
  int code = 0;
  int rc = lseek(fd, 0, SEEK_SET) == 0 ? 0 : sm_error_set_errno(err, SM_EIO, errno, "rewinding the tar");
  if (rc == 0 && s)
    rc = sandbox_agent_run(s, argv, 7, fill_fd_read, &fd, fill_collect, &out,
                           (int)(FILL_TIMEOUT_S * 1000), &code, err);
  else if (rc == 0)
    rc = sandbox_exec_helper(e, id, argv, 7, user, fill_fd_read, &fd, FILL_TIMEOUT_S, &out, &code, err);
  if (s && rc == 0 && code == 0) sandbox_agent_give_back(agents, s);
  else sandbox_agent_close(s);
  if (rc == 0 && code != 0)
    rc = sm_error_set(err, SM_ESANDBOX, "sandman's unpacker exited with %d: %.*s", code,
                      (int)out.len, out.data ? out.data : "");
  common_buf_dispose(&out);
  return rc;
}

/* Whether the tar at fd is the agent's to unpack as user (*agent; else
 * why says why). */
static int fill_choose(int fd, const char *user, int *agent, char *why, size_t why_len,
                       sm_error *err) {
  long uid = 0, gid = 0;
  char head[2] = "";
  *agent = 0;
  if (!fill_user(user, &uid, &gid)) {
    snprintf(why, why_len, "its user is '%s'", user ? user : "");
    return 0;
  }
  if (pread(fd, head, 2, 0) != 2 || memcmp(head, "./", 2) != 0) {
    snprintf(why, why_len, "a tar of entries workspace/...");
    return 0;
  }
  int verdict = WS_FILL_ENGINE;
  int rc = sandbox_ws_fill_scan(fd, uid, gid, 0, &verdict, why, why_len, err);
  *agent = rc == 0 && verdict == WS_FILL_AGENT;
  return rc;
}

int sandbox_ws_fill(sandbox_agents *agents, int session, sm_engine *e, const char *id,
                    const char *user, const char *path, const char **how, sm_error *err) {
  if (how) *how = "engine";
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return sm_error_set_errno(err, SM_EIO, errno, "reading the saved /workspace %s", path);
  int agent = 0;
  char why[160] = "";
  sandbox_agent_session *s = NULL;
  double t0 = sm_monotonic_ms();
  int rc = fill_choose(fd, user, &agent, why, sizeof why, err);
  double t1 = sm_monotonic_ms();
  if (rc == 0 && agent) rc = fill_agent_ready(agents, session, e, id, user, &s, &agent, why, sizeof why, err);
  double t2 = sm_monotonic_ms();
  if (rc == 0 && agent) {
    const char *way = s ? "a session" : "installed";
    rc = fill_untar(agents, s, e, id, user, fd, err);
    if (how) *how = "agent";
    sm_log(SM_LOG_DEBUG, "sandbox %.12s: /workspace by the agent's unpacker: scan %.0f ms, the agent "
           "%.0f ms (%s), unpacking %.0f ms", id, t1 - t0, t2 - t1, way,
           sm_monotonic_ms() - t2);
  } else if (rc == 0) {
    sm_log(SM_LOG_DEBUG, "sandbox %.12s: /workspace put back by the engine's upload: %s", id, why);
  }
  close(fd);
  if (rc) return sm_error_wrap(err, "putting /workspace back");
  return agent ? 0 : sandbox_ws_restore(e, id, path, err);
}
