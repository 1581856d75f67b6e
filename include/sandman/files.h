/* sandman: the files of a keyed sandbox (per_run, per_worker).
 *
 * Read (binary-safe, streamed, with offset and length), write (streamed,
 * with mode and parent folders), make a folder, delete, stat, list
 * (recursive, capped), glob, grep, and upload or download a set of files as
 * a tar stream. Paths are relative to the sandbox's /workspace ("/workspace/x"
 * is taken as "x"); ".." is refused, and a symbolic link anywhere on a path
 * is refused, never followed, so nothing a tool planted in the sandbox can
 * point an operation outside the workspace.
 *
 * Every operation is one call of sandman's own helper inside the sandbox
 * (sm_run_request.helper): it finds or creates the sandbox exactly as sm_run
 * does for the request's keys and settings (so files and commands of a run
 * share one sandbox and one busy lock), copies the request's workspace in
 * and out when it names one, applies the request's timeout and cancel flag,
 * and goes over the in-sandbox agent's session when the runner has one
 * (a few ms instead of an engine exec). `base` below is such a request:
 * settings (mode per_run or per_worker), project, run_id or worker_id,
 * agent, workspace and sync; its argv, stdin and output fields are ignored.
 *
 * Errors: SM_ENOTFOUND (no such path), SM_ECONFLICT (exists), SM_EUNSAFE
 * (".." or a link on the path), SM_EINVAL (a folder where a file was
 * expected and the like), SM_ETOOBIG (over a limit, or the sandbox's disk
 * is full), SM_EPOLICY (permission denied in the sandbox), and whatever the
 * call itself met (SM_ESANDBOX, SM_EUNREACHABLE, SM_ETIMEOUT, SM_ECANCELLED).
 *
 * `call` (may be NULL) receives the underlying call's result: sandbox_id,
 * reused, files_changed of a workspace sync, failure_kind; the caller
 * disposes it with sm_run_result_dispose. */
#ifndef SANDMAN_FILES_H
#define SANDMAN_FILES_H

#include <stddef.h>
#include <stdint.h>

#include <sandman/engine.h>
#include <sandman/error.h>
#include <sandman/export.h>
#include <sandman/runner.h>
#include <sandman/run.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SM_FILES_PATH_MAX 4096
/* Default cap of one file written or of an upload/download (1 GiB). */
#define SM_FILES_DEFAULT_MAX_BYTES ((int64_t)1 << 30)
#define SM_FILES_DEFAULT_MAX_ENTRIES 10000
#define SM_FILES_MAX_ENTRIES 1000000

/* A path as the files API takes it: relative to /workspace, or absolute
 * under it. Writes the canonical relative form ("." for the workspace
 * itself) to out. SM_EUNSAFE for "..", an absolute path elsewhere, or a NUL;
 * SM_EINVAL for an empty or too long path. */
SM_API int sm_files_path(const char *path, char *out, size_t len, sm_error *err);

typedef struct sm_file_entry {
  char type;        /* 'f' file, 'd' folder, 'l' symbolic link, 'o' other */
  uint32_t mode;    /* permission bits */
  int64_t size;     /* files only, else 0 */
  int64_t mtime_s;
  int32_t mtime_ns;
  char *path;       /* relative to /workspace */
  char *link;       /* 'l': the link's target (never followed), else NULL */
} sm_file_entry;

typedef struct sm_file_list {
  sm_file_entry *v;
  size_t n;
  int truncated;    /* the cap stopped the listing */
} sm_file_list;

SM_API void sm_file_list_dispose(sm_file_list *list);
/* {"path", "type": "file"|"dir"|"symlink"|"other", "size", "mode": "0644",
 * "mtime": RFC 3339 with ns, "link"} (caller owns it). */
SM_API json_object *sm_file_entry_to_json(const sm_file_entry *e);

/* ---- read ---- */
typedef struct sm_files_read_opts {
  int64_t offset;      /* byte offset, >= 0 */
  int64_t length;      /* bytes at most; < 0: to the end */
  /* Called once before any content: the file's size and how many bytes
   * will follow. Return 0, or a negative code to stop. May be NULL. */
  int (*on_size)(void *ud, int64_t file_size, int64_t count);
  sm_write_fn write;   /* the content as it arrives */
  void *ud;
} sm_files_read_opts;

SM_API int sm_files_read(sm_runner *runner, const sm_run_request *base, const char *path,
                  const sm_files_read_opts *opts, sm_run_result *call, sm_error *err);
/* The whole file (or offset/length of it) in memory: *out is NUL-terminated
 * and owned by the caller. SM_ETOOBIG when more than max bytes would come. */
SM_API int sm_files_read_all(sm_runner *runner, const sm_run_request *base, const char *path,
                      int64_t offset, int64_t length, size_t max, char **out, size_t *out_len,
                      sm_run_result *call, sm_error *err);

/* ---- write ---- */
typedef struct sm_files_write_opts {
  int mode;            /* permission bits; < 0: keep an existing file's, else 0644 */
  int parents;         /* make missing parent folders */
  int exclusive;       /* refuse (SM_ECONFLICT) when the file exists */
  int64_t max_bytes;   /* 0: SM_FILES_DEFAULT_MAX_BYTES; more is SM_ETOOBIG, nothing written */
  sm_read_fn read;     /* the content; 0 at its end */
  void *ud;
} sm_files_write_opts;

#define SM_FILES_WRITE_OPTS_INIT {-1, 1, 0, 0, NULL, NULL}

/* The file appears whole or not at all (a temporary file renamed over it);
 * an existing link at path is replaced, never followed. */
SM_API int sm_files_write(sm_runner *runner, const sm_run_request *base, const char *path,
                   const sm_files_write_opts *opts, int64_t *written, sm_run_result *call,
                   sm_error *err);
SM_API int sm_files_write_all(sm_runner *runner, const sm_run_request *base, const char *path,
                       const void *data, size_t len, int mode, sm_run_result *call,
                       sm_error *err);

/* ---- folders, delete, stat, list ---- */
/* mode < 0: 0755. parents: make missing parents; an existing folder is fine. */
SM_API int sm_files_mkdir(sm_runner *runner, const sm_run_request *base, const char *path, int mode,
                   int parents, sm_run_result *call, sm_error *err);
/* A folder needs recursive (else SM_EINVAL when it is not empty). A link is
 * removed, not what it points to. *removed (may be NULL): entries removed. */
SM_API int sm_files_delete(sm_runner *runner, const sm_run_request *base, const char *path,
                    int recursive, int64_t *removed, sm_run_result *call, sm_error *err);
/* lstat: a link is described, not followed. out is the caller's to dispose
 * (free path and link). */
SM_API int sm_files_stat(sm_runner *runner, const sm_run_request *base, const char *path,
                  sm_file_entry *out, sm_run_result *call, sm_error *err);
SM_API void sm_file_entry_dispose(sm_file_entry *e);
/* The entries under folder path (a file lists as itself), sorted per folder;
 * depth 1: its own entries, 0: all levels. max_entries 0: the default cap. */
SM_API int sm_files_list(sm_runner *runner, const sm_run_request *base, const char *path,
                  int depth, size_t max_entries, sm_file_list *out, sm_run_result *call,
                  sm_error *err);
/* Entries under folder path whose path relative to it matches pattern
 * ('/'-separated; * ? [..] within a name, ** any number of folders). */
SM_API int sm_files_glob(sm_runner *runner, const sm_run_request *base, const char *path,
                  const char *pattern, size_t max_entries, sm_file_list *out,
                  sm_run_result *call, sm_error *err);

/* ---- grep ---- */
typedef struct sm_grep_match {
  char *path;
  int64_t line;        /* 1-based */
  char *text;          /* the line, at most 2048 bytes, NUL-terminated */
  size_t text_len;
} sm_grep_match;

typedef struct sm_grep_result {
  sm_grep_match *v;
  size_t n;
  int truncated;
} sm_grep_result;

typedef struct sm_grep_opts {
  const char *pattern;  /* POSIX extended regular expression, or a fixed string */
  int fixed;            /* pattern is a plain string */
  int ignore_case;
  const char *include;  /* glob on paths relative to path, or NULL */
  size_t max_matches;   /* 0: 1000 */
} sm_grep_opts;

/* Lines of the files under path (or of file path) that match. Binary
 * files (a NUL in their first 64 KiB) and files over 64 MiB are left out. */
SM_API int sm_files_grep(sm_runner *runner, const sm_run_request *base, const char *path,
                  const sm_grep_opts *opts, sm_grep_result *out, sm_run_result *call,
                  sm_error *err);
SM_API void sm_grep_result_dispose(sm_grep_result *r);

/* ---- tar upload and download ---- */
typedef struct sm_files_tar_stats {
  int64_t files;
  int64_t bytes;
} sm_files_tar_stats;

/* Extracts a tar stream (any format libarchive reads, uncompressed or
 * gzip) under folder path (made if missing). Only files and folders:
 * any other entry (link, device, fifo), an absolute name or ".." refuses
 * the whole upload before anything is sent (the stream is checked as it is
 * read, so what came before that entry may be written). More than
 * max_bytes of content (0: 1 GiB) or max_entries entries (0: 100000) is
 * SM_ETOOBIG. */
SM_API int sm_files_upload_tar(sm_runner *runner, const sm_run_request *base, const char *path,
                        sm_read_fn read, void *ud, int64_t max_bytes, int64_t max_entries,
                        sm_files_tar_stats *stats, sm_run_result *call, sm_error *err);
/* Writes a tar (pax) of paths (files, and folders with what they hold;
 * links as links) to write. More than max_bytes of content (0: 1 GiB) is
 * SM_ETOOBIG. */
SM_API int sm_files_download_tar(sm_runner *runner, const sm_run_request *base,
                          const char *const *paths, size_t n_paths, int64_t max_bytes,
                          sm_write_fn write, void *ud, sm_files_tar_stats *stats,
                          sm_run_result *call, sm_error *err);

/* ---- file events ---- */
typedef enum {
  SM_WATCH_CREATED = 'c',
  SM_WATCH_MODIFIED = 'm',
  SM_WATCH_DELETED = 'd',
  SM_WATCH_MOVED = 'v',    /* path to to */
  SM_WATCH_OVERFLOW = 'o', /* events were lost here (no path) */
} sm_watch_kind;

typedef struct sm_watch_event {
  sm_watch_kind kind;
  int is_dir;
  const char *path; /* relative to /workspace; "" for an overflow */
  const char *to;   /* a move's new path, else NULL */
} sm_watch_event;

typedef struct sm_files_watch_opts {
  int recursive; /* the folders below path too */
  /* Told once every watch is in place (call->sandbox_id is known then),
   * then each event as it comes, on the thread that runs the call. A
   * non-zero return ends the watch with that code. */
  int (*on_ready)(void *ud, const sm_run_result *call);
  int (*on_event)(void *ud, const sm_watch_event *ev);
  void *ud;
} sm_files_watch_opts;

/* An event as the runner's NDJSON line has it ({"event": "created", "path",
 * "dir"}, a move's "from" and "to", an overflow's "dropped": dropped, or
 * null when it is < 0). Caller owns it. */
SM_API json_object *sm_watch_event_to_json(const sm_watch_event *ev, long long dropped);

/* Events of folder path (inotify in the sandbox, by sandman's agent, as
 * the sandbox's user): runs until the watched folder itself goes (0,
 * *ended set), base's cancel flag is set (SM_ECANCELLED; the flag is
 * required, and set by the watch itself when a handler refuses or the
 * agent's output is malformed, which ends the call), the call's
 * timeout (base->settings.timeout_s; 0: none), or an error. The path's
 * rules are the files API's: a link on it (or path itself a link) is
 * SM_EUNSAFE, never followed; a folder made later through a link is
 * never watched. Unlike the other operations it copies no workspace in
 * or out (base->workspace is ignored). */
SM_API int sm_files_watch(sm_runner *runner, const sm_run_request *base, const char *path,
                          const sm_files_watch_opts *opts, int *ended, sm_run_result *call,
                          sm_error *err);

#ifdef __cplusplus
}
#endif
#endif
