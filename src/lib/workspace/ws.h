/* Internals of the workspace module: the manifest, the host scanner, the
 * tar packer (a pull reader), the checking extractor and the staged apply.
 * Shared by the src/lib/workspace sources and the unit and fuzz tests. */
#ifndef SANDMAN_WORKSPACE_WS_H
#define SANDMAN_WORKSPACE_WS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <sandman/engine.h>
#include <sandman/error.h>
#include <sandman/sandbox.h>
#include <sandman/workspace.h>

#include "common/buf.h"

#define WS_DEFAULT_MAX_BYTES ((int64_t)1 << 30)
#define WS_DEFAULT_MAX_ENTRIES ((int64_t)100000)
#define WS_DEFAULT_MAX_PATH ((int64_t)4096)
/* The longest workspace path that comes back (path_too_long past it): the
 * engine reads /workspace under a folder of its own (the container's or
 * the volume's, some 100 bytes or more) and no tool in the sandbox takes a
 * path of more than 4,095 bytes; the listing stops where a path passes
 * this, so it never meets one that it could not read. */
#define WS_LIST_PATH_MAX 3072
/* Top-level names sandman uses inside a workspace: never copied either way. */
#define WS_STAGE_PREFIX ".sandman-stage-"
#define WS_CONFLICT_SUFFIX ".sandman-conflict"
#define WS_UNKNOWN_MTIME INT64_MIN

enum { WS_RACY_HOST = 1, WS_RACY_BOX = 2 };

/* Wall clock in ns: compared with file times, here and in the sandbox. */
int64_t workspace_now_ns(void);

/* Entry states set by the extractor. REFUSED: a change the host does not
 * get (its reason in ws_entry.refusal); the sandbox keeps it. */
enum { WS_SAME = 0, WS_CHANGED = 1, WS_TOUCHED = 2, WS_REFUSED = 3 };

/* Why an entry was refused (the result's `refused[].reason`, refusal.c). */
enum {
  WS_R_NONE = 0,
  WS_R_PROTECTED,     /* a protected path (create, change, chmod, delete) */
  WS_R_LINK_OUTSIDE,  /* a relative link whose target climbs out */
  WS_R_LINK_ABSOLUTE, /* an absolute link */
  WS_R_DEVICE,
  WS_R_FIFO,
  WS_R_SOCKET,
  WS_R_SPECIAL,       /* any other file type */
  WS_R_NAME_TOO_LONG, /* a name of more than 255 bytes */
  WS_R_UNSAFE_PATH,   /* absolute, "..", under a link or a file, twice, reserved */
  WS_R_HARD_LINK,     /* a hard link to anything but a file earlier in the stream */
  WS_R_PATH_TOO_LONG, /* a path longer than WS_LIST_PATH_MAX */
  WS_R_COUNT
};
const char *workspace_reason_name(int reason); /* "protected", ... */
const char *workspace_reason_text(int reason); /* "a protected path", ... */
int workspace_reason_parse(const char *name);  /* WS_R_NONE if unknown */

/* ws_entry.sniff: a staged file that starts with "gitdir:" (git follows
 * such a file to another repository). */
#define WS_SNIFF_GITFILE 1

/* The type of a held deletion: the tool deleted a protected path. */
#define WS_DELETED 'x'

/* One path of a workspace. type: 'f' file, 'd' directory, 'l' symlink; in a
 * scan of a scratch directory or a listing also 'p' fifo, 'c'/'b' devices,
 * 's' socket (so that the extractor sees and refuses them, as with the
 * engine's tar); in held entries WS_DELETED. */
typedef struct ws_entry {
  char *path;             /* relative, '/'-separated, no "." or ".." */
  char *link;             /* symlink target, else NULL */
  int64_t size;
  int64_t host_mtime_ns;  /* host side; WS_UNKNOWN_MTIME: compare by content */
  int64_t box_mtime;      /* sandbox side, whole seconds (tar precision) */
  int64_t box_ctime;      /* sandbox side ctime (ns) when last seen; 0 unknown.
                             Any change there gives a new one. */
  uint32_t mode;          /* permission bits only (0777) */
  char type;
  /* Recorded so close to a sync that a later change could keep the same
   * mtime (timestamps are coarse): such entries are compared by content. */
  unsigned char racy;     /* WS_RACY_HOST | WS_RACY_BOX */
  unsigned char has_hash;
  unsigned char hash[32]; /* SHA-256 of a file's content */
  unsigned char refusal;  /* WS_R_*: why the host did not get it (held entries) */
  /* Working fields, not saved. */
  unsigned char state;    /* WS_SAME / WS_CHANGED / WS_TOUCHED / WS_REFUSED */
  unsigned char quiet;    /* refused exactly as reported before: not reported again */
  unsigned char sniff;    /* WS_SNIFF_*: what a staged file's first bytes say */
  int32_t stage;          /* staged file number, or -1 */
  int64_t ctime;          /* listings only: change time (ns), not saved */
} ws_entry;

typedef struct ws_manifest {
  ws_entry *v;
  size_t n, cap;
  uint32_t *index;        /* open addressing: entry number + 1, 0 empty */
  size_t index_cap;
  int64_t total_size;
  char container[SM_ENGINE_ID_MAX]; /* sandbox the state belongs to ("" none) */
  char *root;             /* sandbox path it was synced to */
} ws_manifest;

/* Sets e->racy for a record taken by a sync that started at stamp_ns. */
void workspace_entry_mark_racy(ws_entry *e, int64_t stamp_ns, int host, int box);

void workspace_manifest_init(ws_manifest *m);
/* Rebuilds the hash index after entries were removed from m->v. */
int workspace_manifest_reindex(ws_manifest *m);
void workspace_manifest_dispose(ws_manifest *m);
void workspace_manifest_clear(ws_manifest *m);
ws_entry *workspace_manifest_get(const ws_manifest *m, const char *path);
/* Copies e (path and link duplicated). SM_ECONFLICT if the path is there. */
int workspace_manifest_add(ws_manifest *m, const ws_entry *e, ws_entry **out);
/* A missing file is an empty manifest; a damaged one is an error. held
 * (may be NULL) gets the entries held back from the host (refused). */
int workspace_manifest_load(ws_manifest *m, ws_manifest *held, const char *path,
                            int64_t max_entries, sm_error *err);
/* Written to a temporary file beside it, fsync'ed and renamed; held may be NULL. */
int workspace_manifest_save(const ws_manifest *m, const ws_manifest *held, const char *path,
                            sm_error *err);
int workspace_manifest_set_target(ws_manifest *m, const char *container, const char *root);

/* ---- paths and directories ---- */
/* Normalises a tar member or link name: drops "." and empty components,
 * refuses absolute names and "..". Returns 0 and a malloc'ed path (possibly
 * "") or SM_EUNSAFE with why in err. */
int workspace_path_normalize(const char *raw, char **out, sm_error *err);
/* 1 if path (or any directory above it) matches an exclude glob (matched
 * against the whole relative path and against each name). */
int workspace_excluded(const sm_string_list *excludes, const char *path);
/* 1 if a symlink at path with this target stays inside the root whatever
 * the other links in the tree are: relative, only leading "..", no more of
 * them than path has directories above it. */
int workspace_link_inside(const char *path, const char *target);
/* 1 if the engine's archive upload takes a symlink at path with this target:
 * absolute, or relative and lexically (each ".." pops one name) never above
 * the root. The engine refuses the whole upload for any other link. */
int workspace_link_engine_accepts(const char *path, const char *target);
int workspace_is_reserved(const char *path);

/* Opens the directory rel under root_fd; every component must be a real
 * directory (no symlink is followed). create: missing ones are made (0700).
 * Returns an fd or -errno (-ENOTDIR when a component is not a directory). */
int workspace_open_dir(int root_fd, const char *rel, int create);

/* Caches the last opened parent directory while walking sorted paths. */
typedef struct ws_dircache {
  int root_fd;
  int fd;
  char *dir;
} ws_dircache;
void workspace_dircache_init(ws_dircache *c, int root_fd);
void workspace_dircache_dispose(ws_dircache *c);
/* fd of path's parent (owned by the cache) and *name its last component, or -errno. */
int workspace_dircache_parent(ws_dircache *c, const char *path, const char **name, int create);

/* Removes name under dir_fd, recursively for a directory (never following links). */
int workspace_remove_tree(int dir_fd, const char *name);
/* Makes <dir>/.sandman-stage-XXXXXX, locked (flock) for as long as the
 * returned fd is open; *out_path malloc'ed; returns the fd or an error. */
int workspace_stage_create(int root_fd, const char *root_path, char **out_path, sm_error *err);
/* Empties and removes a flat stage directory. */
void workspace_stage_remove(int root_fd, const char *stage_path, int stage_fd);
/* Removes the stage directories no live copy holds (left by a crash);
 * where locks do not work, those untouched for an hour. */
void workspace_stage_sweep(int root_fd);

/* True when fd was read to its end: out its SHA-256, *out_len its size. */
bool workspace_hash_fd_ok(int fd, unsigned char out[32], int64_t *out_len);
void workspace_hex(const unsigned char *bytes, size_t n, char *out);

/* ---- scan ---- */
typedef struct ws_scan_opts {
  const sm_string_list *excludes;
  int64_t max_bytes, max_entries, max_path;
  int specials;   /* record fifos and devices (scratch side) instead of skipping */
} ws_scan_opts;
int workspace_scan(int root_fd, const char *root_path, const ws_scan_opts *opts, ws_manifest *out,
                   sm_error *err);

/* ---- packer: a tar stream of chosen entries, pulled by an sm_read_fn ---- */
typedef struct ws_packer ws_packer;
/* items: entries of a scan (borrowed; their hash and size are filled in as
 * files are read). prefix: first component of every member ("" none). */
int workspace_packer_new(ws_packer **out, int root_fd, ws_entry **items, size_t n,
                         const char *prefix, int uid, int gid, sm_error *err);
ssize_t workspace_packer_read(void *ud, char *buf, size_t len);
/* A stream that begins at once with an entry for "./" (which the engine
 * skips: it names the destination, which exists), so that the upload, and
 * the engine's extraction, start while the caller still scans. Nothing more
 * is packed until workspace_packer_supply (the items, borrowed as above) or
 * workspace_packer_abandon (the stream then fails with that code: the engine
 * extracts nothing). Either may come before or after the first read. */
int workspace_packer_new_deferred(ws_packer **out, int root_fd, int uid, int gid, sm_error *err);
void workspace_packer_supply(ws_packer *p, ws_entry **items, size_t n);
void workspace_packer_abandon(ws_packer *p, int code);
/* Members are named from byte `cut` of each path on (one subtree sent). */
void workspace_packer_set_cut(ws_packer *p, size_t cut);
/* The first workspace_packer_read starts a producer thread that packs ahead into a
 * bounded ring (2 MiB); workspace_packer_read may then be called from one thread.
 * workspace_packer_error, workspace_packer_stats and workspace_packer_free stop the producer and
 * join it first, so the items, stats and error are settled after them. */
/* The error that made workspace_packer_read fail (code 0 if none). */
const sm_error *workspace_packer_error(ws_packer *p);
void workspace_packer_stats(ws_packer *p, int64_t *bytes, int64_t *entries);
/* Test hook: fail with SM_ECANCELLED once this many tar bytes were produced. */
void workspace_packer_abort_after(ws_packer *p, int64_t bytes);
int64_t workspace_packer_produced(const ws_packer *p);
/* The packer's own failure explains a cut stream best: copied into err
 * unless it has none or was cancelled. */
void workspace_packer_reason(ws_packer *p, sm_error *err);
void workspace_packer_free(ws_packer *p);

/* ---- refusals (refusal.c) ---- */
typedef sm_workspace_refusal ws_refusal;
typedef struct ws_refusal_list {
  ws_refusal *v; /* paths owned */
  size_t n, cap;
} ws_refusal_list;
void workspace_refusal_list_clear(ws_refusal_list *l);
void workspace_refusal_list_dispose(ws_refusal_list *l);
int workspace_refusal_list_add(ws_refusal_list *l, const char *path, int reason, sm_error *err);
void workspace_refusal_list_sort(ws_refusal_list *l);

typedef struct ws_extract ws_extract;
typedef struct ws_protect ws_protect;

/* ---- values log lines must not quote (redact.c) ---- */
/* As the runner's scrubbing: shorter values are not masked. */
#define WS_REDACT_MIN_LEN 6
typedef struct ws_redact {
  char **v;
  size_t n;
} ws_redact;
void workspace_redact_init(ws_redact *r);
void workspace_redact_dispose(ws_redact *r);
/* The values of "NAME=VALUE" entries (copied); replaces what was set. */
int workspace_redact_set(ws_redact *r, const char *const *kv, size_t n, sm_error *err);
/* path for a log line: itself, or in buf with every value [REDACTED]. */
const char *workspace_log_path(const ws_redact *r, const char *path, char *buf, size_t len);
/* Sockets the listing shows (the engine's tar leaves them out) join
 * x->box as refused. */
int workspace_refusal_sockets(ws_extract *x, const ws_manifest *listing, sm_error *err);
/* After the stream: changes to protected paths are refused (and, with
 * deletions, deletions of them held as WS_DELETED entries); every refusal
 * the same as a held one is marked quiet. */
int workspace_refusal_decide(ws_extract *x, const ws_protect *protect, int deletions,
                             sm_error *err);
/* The refusals to report: not quiet, from x->box and x->stray, by path. */
int workspace_refusal_report(const ws_extract *x, ws_refusal_list *out, sm_error *err);
/* Moves the refused entries of box into held, and puts back old_base's
 * record of each such path (the host kept its version). */
int workspace_refusal_hold(ws_manifest *box, const ws_manifest *old_base, ws_manifest *held,
                           sm_error *err);

/* ---- protected paths (protect.c) ---- */
/* Folds n bytes of the name s into out (room for n + 1) as a host file
 * system might take it: lower-case ASCII, no HFS+-ignorable code points,
 * no trailing dots or spaces. Returns the folded length. */
size_t workspace_name_fold(const char *s, size_t n, char *out);
/* Compiles globs (NULL or none: nothing protected). SM_EINVAL names a bad one. */
int workspace_protect_new(ws_protect **out, const sm_string_list *globs, sm_error *err);
void workspace_protect_free(ws_protect *p);
size_t workspace_protect_count(const ws_protect *p);
/* Checks one glob's syntax (the configuration's and the CLI's check). */
int workspace_protect_glob_check(const char *text, sm_error *err);
/* 1 if a change at path (normalised, relative) must not reach the host:
 * a glob matches it or a directory above it, or (not is_dir) it stands
 * where a glob reaches further down. */
int workspace_protected(const ws_protect *p, const char *path, int is_dir);
/* The same over many paths: given in workspace_path_cmp order, each costs one
 * step (the parents' states are kept). */
typedef struct ws_protect_walk {
  const ws_protect *p;
  uint64_t **states;       /* per level, per glob */
  unsigned char *covered;  /* per level */
  size_t cap;
  char *path;              /* the last path walked */
  size_t depth;            /* its components */
} ws_protect_walk;
void workspace_protect_walk_init(ws_protect_walk *w, const ws_protect *p);
int workspace_protect_walk_path(ws_protect_walk *w, const char *path, int is_dir);
void workspace_protect_walk_dispose(ws_protect_walk *w);
/* strcmp with '/' before every other byte: depth-first order. */
int workspace_path_cmp(const char *a, const char *b);

/* ---- git's own ways to run a command (gitconf.c, gitdir.c) ---- */
/* 1 if a git configuration file's text names a command (or other code or
 * configuration git would take) as git would read it; also 1 when it
 * cannot be read to its end. The fd is read from its start. */
int workspace_gitconf_runs_fd(int fd);
int workspace_gitconf_runs_text(const char *data, size_t len);
/* 1 if the last component of path, folded (workspace_name_fold), is name. */
int workspace_git_name_is(const char *path, const char *name);
/* 1 if a component of path, folded, is ".git". */
int workspace_git_in_dotgit(const char *path);
/* Which directories git would take for a repository (HEAD with objects
 * and refs, or with commondir) in what the sandbox holds (box) joined with
 * what the host holds (root_fd; -1: nothing). */
typedef struct ws_gitdirs {
  ws_manifest marks; /* folded directory -> the markers the box has in it (size: bits) */
  ws_manifest memo;  /* directory as named -> its answer (size) */
  int root_fd;
} ws_gitdirs;
int workspace_gitdirs_init(ws_gitdirs *g, const ws_manifest *box, int root_fd, sm_error *err);
/* 1 if path, or a directory above it (the root too), is a repository not
 * named .git; out of memory counts as 1. */
int workspace_gitdirs_covers(ws_gitdirs *g, const char *path);
void workspace_gitdirs_dispose(ws_gitdirs *g);

/* ---- upload: what a copy in sends (upload.c) ---- */
/* pack: the entries of send, with every directory above each (from cur),
 * in cur's order (a directory before its contents). later (engine set):
 * the links of send the engine's upload would refuse, left out of pack.
 * Both owned arrays of borrowed entries. */
int workspace_upload_plan(const ws_manifest *cur, ws_entry **send, size_t nsend, int engine,
                          ws_entry ***pack, size_t *npack, ws_entry ***later, size_t *nlater,
                          sm_error *err);

/* ---- extractor: reads a tar, refuses what is unsafe, stages changes ---- */
struct ws_extract {
  int stage_fd;                 /* flat staging directory */
  int root_fd;                  /* destination (hard links to unchanged files), or -1 */
  const char *strip;            /* required first component, or NULL */
  const char *place;            /* NULL: the first component is dropped; else it
                                   stands for this relative path (one path fetched) */
  const ws_manifest *base;      /* last synced state; NULL: all entries are changes */
  const sm_string_list *excludes;
  int64_t max_bytes, max_entries, max_path;
  /* The sandbox listing the copy out was planned from (NULL: none). With
   * one, a file whose ctime differs from the one recorded is compared by
   * content even when its size, mtime and mode are the manifest's (the tool
   * may have set the mtime back); without one, those decide. */
  const ws_manifest *listing;
  int trusted;                  /* copy in from the host: its own links pass as they are,
                                   and unchanged parents need not be in the stream */
  /* The sandbox's versions of what was refused before (last copy out):
   * the same refusal again is quiet. NULL: none. */
  const ws_manifest *held;
  const ws_redact *redact;      /* values log lines must not quote, or NULL */
  ws_manifest box;              /* out: every entry of the archive */
  /* out: refused entries that have no place in box (a name that is not a
   * workspace path, a second entry for one path): always reported. */
  ws_manifest stray;
  int64_t bytes_staged;
  int64_t raw_bytes;
  int64_t entries;              /* over every stream read into this extractor */
  int32_t next_stage;
  /* A file whose size, mtime and mode are the manifest's but that must be
   * compared by content (racy, or a new ctime) is hashed as it streams by,
   * not staged: unchanged, it costs no disk (a nearly full one cannot
   * wedge the copy out). One that differs is left out of box and listed
   * here, to be read again with `only` set. */
  int verify;                   /* set by the caller for the first reads */
  ws_manifest again;            /* out: paths to read again and stage */
  const ws_manifest *only;      /* a read again: every other entry is skipped */
};

void workspace_extract_init(ws_extract *x);
void workspace_extract_dispose(ws_extract *x);
/* Reads the whole stream. Any unsafe entry or cap is an error (nothing is
 * applied by the caller then). */
int workspace_extract_run(ws_extract *x, sm_read_fn reader, void *reader_ud, sm_error *err);

/* ---- probe: copy out only what a listing says changed ---- */
/* Parses the listing exec's output: one
 * "size|mtime|ctime|ctime as text|hexmode|./path" line per entry (the text
 * form carries the nanoseconds). SM_EPROTOCOL when it
 * cannot be trusted to be complete (the caller then copies everything). */
int workspace_probe_parse(const char *out, size_t len, int64_t max_entries, int64_t max_path,
                          ws_manifest *listing, sm_error *err);
/* Puts into x->box what the listing shows unchanged since the manifest
 * (the very ctime the manifest recorded, same size, mtime and mode) and
 * directories whose mode alone changed; *roots gets the paths to fetch
 * whole. Returns 1 when more than max_roots would be fetched. */
int workspace_probe_plan(ws_extract *x, const ws_manifest *listing, size_t max_roots, char ***roots,
                         size_t *n, sm_error *err);
/* Records in m the sandbox ctimes a listing shows, for entries whose type,
 * size and mtime agree with it (only entries whose state is `which`, or all
 * when which < 0); the others get 0 (unknown: compared in full next time). */
void workspace_probe_record(ws_manifest *m, const ws_manifest *listing, int which);
void workspace_probe_free_roots(char **roots, size_t n);

/* ---- nothing changed: the copy out's quick check (unchanged.c) ---- */
/* The digest (digest.h) of the listing the sandbox shows if nothing changed
 * since the manifest (base, with held's versions of what the host did not
 * get). 0 when a listing alone could not show every entry unchanged (a
 * file without a recorded ctime or racy, a held deletion, an entry the
 * excludes now leave out, a path past WS_LIST_PATH_MAX, out of memory):
 * then the listing decides. 1 with hex and *count otherwise. */
int workspace_unchanged_expect(const ws_manifest *base, const ws_manifest *held,
                               const sm_string_list *excludes, char hex[65], uint64_t *count);
/* The same in two steps: which entries (fast: 0 as above), then their
 * digest (the sort and the hash, worth a thread of its own). The entries
 * borrow the manifests' paths. */
typedef struct ws_expected ws_expected;
int workspace_expected_collect(const ws_manifest *base, const ws_manifest *held,
                               const sm_string_list *excludes, ws_expected **out);
void workspace_expected_digest(ws_expected *x, char hex[65], uint64_t *count);
void workspace_expected_free(ws_expected *x);
/* Parses `sandman-agent wsdigest`'s output, "wsdigest HEX COUNT\n"; -1
 * when it is anything else. */
int workspace_unchanged_parse(const char *out, size_t len, char hex[65], uint64_t *count);

/* ---- conflict copies of folders (aside.c) ---- */
typedef struct ws_aside {
  char **from, **to; /* a folder put aside and its place (NULL: dropped) */
  size_t n, cap;
} ws_aside;
void workspace_aside_dispose(ws_aside *a);
/* Where path lands on the host: itself; its place under a folder put
 * aside (malloc'ed into *owned); NULL when dropped or out of memory. */
const char *workspace_aside_map(const ws_aside *a, const char *path, char **owned);
/* The length of the shallowest folder above path that the host does not
 * have as a directory (missing, a file, a link), or 0 when it has all. */
size_t workspace_aside_blocker(int root_fd, const char *path);
/* Makes <dir>.sandman-conflict (replacing an older one) and maps dir to it
 * (*out, owned by a; dir maps to nothing when this fails: 0 or -errno). */
int workspace_aside_make(ws_aside *a, int root_fd, const char *dir, char **out);

/* ---- apply: staged changes onto a directory ---- */
typedef struct ws_apply_result {
  char **changed; size_t n_changed, cap_changed;
  char **conflicts; size_t n_conflicts, cap_conflicts;
  int64_t entries;
} ws_apply_result;

/* Applies x's changes and the deletions (base entries not in x->box) to
 * root_fd. With check_host, a path the host changed since base keeps the
 * host's version and the staged one lands beside it (conflict). Without it
 * (a scratch directory), whatever is in the way is replaced. Updates
 * x->box's host_mtime_ns of what it wrote. */
int workspace_apply(int root_fd, ws_extract *x, int check_host, int deletions, ws_apply_result *res,
                    sm_error *err);
void workspace_apply_result_dispose(ws_apply_result *r);

/* Convenience for tests and fuzzing: extracts a tar stream into dest_dir
 * (stage, check, apply), no manifest. */
int workspace_unpack_dir(const char *dest_dir, sm_read_fn reader, void *ud,
                         const sm_workspace_limits *limits, ws_apply_result *res,
                         ws_refusal_list *refused, sm_error *err);

/* Test hook on a sync: each copy (in or out) aborts once this many tar
 * bytes went through it, over all its requests; -1 turns it off. */
void workspace_sync_abort_after(sm_workspace_sync *sync, int64_t bytes);
/* 1 if the last copy out fetched only what a listing showed changed; 0 if
 * it read the whole workspace. */
int workspace_sync_last_out_listed(const sm_workspace_sync *sync);
/* 1 if the last copy out was settled by the quick check alone (the
 * sandbox's digest was the manifest's: nothing listed, nothing read). */
int workspace_sync_last_out_quick(const sm_workspace_sync *sync);

#endif
