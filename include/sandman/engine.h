/* sandman: Docker Engine API client.
 *
 * Speaks the Engine API over unix://, tcp:// or tcp:// with TLS, negotiates
 * the API version through /_ping (the lower of the engine's and ours, never
 * below 1.41), keeps its connection alive between calls and caps every
 * response body it buffers.
 *
 * Threads: an sm_engine is NOT thread-safe. Use one per thread;
 * sm_engine_clone() makes another with the same address, TLS files and
 * negotiated version without a new /_ping.
 *
 * Ownership: json_object ** outputs are the caller's (json_object_put);
 * returned const char * are borrowed from the client. */
#ifndef SANDMAN_ENGINE_H
#define SANDMAN_ENGINE_H

#include <sandman/export.h>

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <json-c/json.h>

#include <sandman/error.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SM_ENGINE_DEFAULT_HOST "unix:///var/run/docker.sock"
#define SM_ENGINE_MIN_API "1.41"
#define SM_ENGINE_MAX_API "1.51"
#define SM_ENGINE_ID_MAX 72 /* 64 hex + NUL, with room */

typedef struct sm_engine sm_engine;

typedef struct sm_engine_options {
  const char *host;          /* NULL: $DOCKER_HOST, else SM_ENGINE_DEFAULT_HOST */
  int tls_verify;            /* -1: from $DOCKER_TLS_VERIFY (on when non-empty, as the
                                docker CLI reads it); 0/1. TLS applies to tcp:// only. */
  const char *cert_path;     /* NULL: $DOCKER_CERT_PATH, else ~/.docker */
  long connect_timeout_ms;   /* 0: 5000 */
  long request_timeout_ms;   /* 0: 120000, for non-streaming calls */
  size_t max_response_bytes; /* 0: 16 MiB; a larger buffered body is SM_ETOOBIG */
  const char *api_version;   /* NULL: negotiate; else use as is ("1.41") */
  const char *host_source;   /* where host came from, for sm_engine_host_source ("--host") */
} sm_engine_options;

#define SM_ENGINE_OPTIONS_INIT {NULL, -1, NULL, 0, 0, 0, NULL, NULL}

/* Streams. A reader returns bytes put in buf (0 < n <= len), 0 at the end,
 * or a negative SM_E* code to abort. A writer returns 0, or a negative
 * SM_E* code to abort the transfer. */
typedef ssize_t (*sm_read_fn)(void *userdata, char *buf, size_t len);
typedef int (*sm_write_fn)(void *userdata, const char *buf, size_t len);
/* One decoded JSON message of a build/import progress stream (borrowed). */
typedef void (*sm_progress_fn)(void *userdata, json_object *message);
/* Exec output as it arrives: stream is 1 (stdout) or 2 (stderr). Return 0, or
 * a negative SM_E* code to stop reading. */
typedef int (*sm_output_fn)(void *userdata, int stream, const char *data, size_t len);

/* Resolves the address (option > $DOCKER_HOST > $DOCKER_CONTEXT > the docker
 * CLI's current context > default) and TLS settings.
 * Does not connect yet. Errors: SM_EINVAL for a bad address or missing TLS
 * files. */
SM_API int sm_engine_new(sm_engine **out, const sm_engine_options *opts, sm_error *err);
SM_API int sm_engine_clone(sm_engine **out, const sm_engine *engine, sm_error *err);
SM_API void sm_engine_free(sm_engine *engine);

/* The resolved address, e.g. "unix:///var/run/docker.sock". */
SM_API const char *sm_engine_host(const sm_engine *engine);
SM_API int sm_engine_uses_tls(const sm_engine *engine);
/* Where the address came from: "DOCKER_HOST", "docker context colima
 * (DOCKER_CONTEXT)", "the default socket", or the options' host_source. */
SM_API const char *sm_engine_host_source(const sm_engine *engine);
/* Pings and negotiates once (idempotent). SM_EUNREACHABLE names the address
 * and how to start an engine. */
SM_API int sm_engine_negotiate(sm_engine *engine, sm_error *err);
/* Negotiated version ("1.41"), or NULL before negotiation. */
SM_API const char *sm_engine_api_version(const sm_engine *engine);

/* ---- system ---- */
SM_API int sm_engine_ping(sm_engine *engine, sm_error *err);
SM_API int sm_engine_version(sm_engine *engine, json_object **out, sm_error *err);
SM_API int sm_engine_info(sm_engine *engine, json_object **out, sm_error *err);

/* Any JSON call: path without the version prefix ("/containers/json?all=1"),
 * body may be NULL. Statuses >= 400 become errors carrying the engine's
 * message: 404 SM_ENOTFOUND, 409 SM_ECONFLICT, others SM_EENGINE.
 * out (may be NULL) receives the parsed body, or NULL for an empty one. */
SM_API int sm_engine_request_json(sm_engine *engine, const char *method, const char *path,
                                  json_object *body, int *out_status, json_object **out,
                                  sm_error *err);

/* ---- images ---- */
SM_API int sm_engine_image_inspect(sm_engine *engine, const char *ref, json_object **out,
                                   sm_error *err);
/* filters: engine filter JSON object (e.g. {"label":["a=b"]}) or NULL. */
SM_API int sm_engine_image_list(sm_engine *engine, json_object *filters, json_object **out,
                                sm_error *err);
/* Removes an image (force: also when containers use it). A missing image
 * is SM_ENOTFOUND; one still used without force is SM_ECONFLICT. */
SM_API int sm_engine_image_remove(sm_engine *engine, const char *ref, int force, sm_error *err);
/* Imports a root file system tar stream as image repo:tag (changes: Dockerfile
 * instructions such as "USER 1000", may be NULL). */
SM_API int sm_engine_image_import(sm_engine *engine, sm_read_fn reader, void *reader_ud,
                                  const char *repo, const char *tag,
                                  const char *const *changes, size_t n_changes,
                                  sm_progress_fn progress, void *progress_ud, sm_error *err);
/* Loads images from a `docker save` tar stream (the images keep their
 * tags): how images reach an engine that has no registry to pull from. */
SM_API int sm_engine_image_load(sm_engine *engine, sm_read_fn reader, void *reader_ud,
                                sm_progress_fn progress, void *progress_ud, sm_error *err);
/* Builds from a tar context stream; an error message in the stream is an
 * error (SM_EENGINE with the engine's text). Import and build have no time
 * limit (a build step may be silent for long). */
SM_API int sm_engine_image_build(sm_engine *engine, sm_read_fn reader, void *reader_ud,
                                 const char *tag, const char *dockerfile,
                                 sm_progress_fn progress, void *progress_ud, sm_error *err);

/* ---- containers ---- */
/* name may be NULL. config is the engine's ContainerConfig JSON (with
 * HostConfig inside). out_id receives the full id. */
SM_API int sm_engine_container_create(sm_engine *engine, const char *name, json_object *config,
                                      char out_id[SM_ENGINE_ID_MAX], json_object **out_warnings,
                                      sm_error *err);
SM_API int sm_engine_container_start(sm_engine *engine, const char *id, sm_error *err);
SM_API int sm_engine_container_inspect(sm_engine *engine, const char *id, json_object **out,
                                       sm_error *err);
/* labels: "key=value" or "key" strings, ANDed. */
SM_API int sm_engine_container_list(sm_engine *engine, int all, const char *const *labels,
                                    size_t n_labels, json_object **out, sm_error *err);
SM_API int sm_engine_container_stop(sm_engine *engine, const char *id, int timeout_s,
                                    sm_error *err);
/* The engine's pause (the cgroup freezer) and its end. Pausing a paused
 * container, or unpausing one that is not, is SM_ECONFLICT. */
SM_API int sm_engine_container_pause(sm_engine *engine, const char *id, sm_error *err);
SM_API int sm_engine_container_unpause(sm_engine *engine, const char *id, sm_error *err);
/* Whether the engine's list shows container id (its full id) paused. The
 * list reads the engine's view of its containers, which takes no
 * container's lock: it answers while an unpause of id is under way, and
 * shows id paused until that unpause has ended. */
SM_API int sm_engine_container_listed_paused(sm_engine *engine, const char *id, int *paused,
                                             sm_error *err);
/* signal: "KILL", "TERM" or NULL (KILL). */
SM_API int sm_engine_container_kill(sm_engine *engine, const char *id, const char *signal,
                                    sm_error *err);
/* A container already gone is SM_ENOTFOUND (callers that reap ignore it). */
SM_API int sm_engine_container_remove(sm_engine *engine, const char *id, int force,
                                      int remove_volumes, sm_error *err);
/* Renames a container (running or not); SM_ECONFLICT when the name is taken. */
SM_API int sm_engine_container_rename(sm_engine *engine, const char *id, const char *new_name,
                                      sm_error *err);
/* condition: "not-running", "next-exit", "removed" or NULL. */
SM_API int sm_engine_container_wait(sm_engine *engine, const char *id, const char *condition,
                                    long timeout_ms, int64_t *out_status_code, sm_error *err);

/* ---- a container's state kept by the engine (checkpoints.c) ---- */
/* Commits container id's writable layer as image repo:tag; config (may be
 * NULL) is the image's config to merge (Labels...); pause: freeze it for
 * the commit. out_id (may be NULL) gets the image id. */
SM_API int sm_engine_container_commit(sm_engine *engine, const char *id, const char *repo,
                                      const char *tag, json_object *config, int pause,
                                      char out_id[SM_ENGINE_ID_MAX], sm_error *err);
/* A checkpoint of a running container's processes (the engine's
 * experimental mode): name, dir (NULL: the container's own checkpoint
 * folder; else a folder on the engine's host), exit_after: the container
 * stops once its memory is written. */
SM_API int sm_engine_checkpoint_create(sm_engine *engine, const char *id, const char *name,
                                       const char *dir, int exit_after, sm_error *err);
/* Removes a checkpoint from the container's own checkpoint folder. */
SM_API int sm_engine_checkpoint_remove(sm_engine *engine, const char *id, const char *name,
                                       sm_error *err);
/* Starts a created or stopped container from its checkpoint `checkpoint`
 * (in its own checkpoint folder: the engine takes no other for a start). */
SM_API int sm_engine_container_restore(sm_engine *engine, const char *id, const char *checkpoint,
                                       sm_error *err);

/* ---- archives (tar streams, never held whole in memory) ---- */
/* Extracts the tar stream produced by reader into path inside the container.
 * No overall time limit; a transfer that makes no progress for the request
 * timeout is SM_ETIMEOUT (archive get likewise). */
SM_API int sm_engine_archive_put(sm_engine *engine, const char *id, const char *path,
                                 sm_read_fn reader, void *reader_ud, sm_error *err);
/* Streams a tar of path inside the container to writer. */
SM_API int sm_engine_archive_get(sm_engine *engine, const char *id, const char *path,
                                 sm_write_fn writer, void *writer_ud, sm_error *err);
/* The mode of path inside a container (created or running), as a stat
 * would give it (S_IFDIR | 01777 for a sticky world-writable folder): from
 * the engine's path stat, without copying anything. A missing path is
 * SM_ENOTFOUND. */
SM_API int sm_engine_path_mode(sm_engine *engine, const char *id, const char *path,
                               unsigned *out_mode, sm_error *err);
/* The engine's whole stat of path inside a container (its
 * X-Docker-Container-Path-Stat): mode as sm_engine_path_mode gives it, size,
 * the last path element's name and its mtime to the nanosecond (has_mtime 0
 * when the engine sent none it could read). Filled in *out, the caller's. */
typedef struct sm_engine_path_info {
  unsigned mode;
  int64_t size;
  int has_mtime;
  int64_t mtime_s; /* seconds since the epoch, UTC */
  long mtime_ns;
  char name[256];
} sm_engine_path_info;
SM_API int sm_engine_path_stat(sm_engine *engine, const char *id, const char *path,
                               sm_engine_path_info *out, sm_error *err);

/* ---- exec ---- */
/* config: the engine's ExecConfig JSON (Cmd, Env, WorkingDir, User,
 * AttachStdin/Stdout/Stderr, Tty false). */
SM_API int sm_engine_exec_create(sm_engine *engine, const char *container_id, json_object *config,
                                 char out_exec_id[SM_ENGINE_ID_MAX], sm_error *err);

typedef struct sm_exec_io {
  /* stdin sent through the hijacked connection, then half-closed. NULL: no
   * stdin (the exec must have been created with AttachStdin false). Called
   * on the caller's thread between reads of the output: a reader that
   * blocks delays output, so it should return what it has. */
  sm_read_fn stdin_read;
  void *stdin_ud;
  /* Demultiplexed output as it arrives (a frame may come in several
   * calls). NULL: discarded. */
  sm_output_fn output;
  void *output_ud;
  /* 0: no limit. On expiry the call returns SM_ETIMEOUT; the process keeps
   * running inside the container: killing it is the caller's job. */
  double timeout_s;
  /* Optional: set non-zero from another thread to stop waiting (SM_ECANCELLED). */
  volatile int *cancel;
  /* Cap on a single multiplexed frame (0: 1 MiB). */
  size_t max_frame_bytes;
} sm_exec_io;

#define SM_EXEC_IO_INIT {NULL, NULL, NULL, NULL, 0, NULL, 0}

/* Starts the exec attached and returns when its output ends. */
SM_API int sm_engine_exec_start(sm_engine *engine, const char *exec_id, const sm_exec_io *io,
                                sm_error *err);
/* out_running and out_exit_code may be NULL; out_pid gets the host pid or 0. */
SM_API int sm_engine_exec_inspect(sm_engine *engine, const char *exec_id, int *out_running,
                                  int *out_exit_code, int64_t *out_pid, sm_error *err);

/* ---- exec streams: an exec kept attached (the in-sandbox agent) ---- */
typedef struct sm_exec_stream sm_exec_stream;
/* Starts an exec created with AttachStdin/Stdout/Stderr and keeps its
 * hijacked connection: bytes written go to the process's stdin, its
 * demultiplexed output goes to output(ud, stream, ...) during pumps. Needs
 * nothing of the client once open, so it may be used from another thread
 * (one thread at a time). */
SM_API int sm_engine_exec_open(sm_engine *engine, const char *exec_id, sm_output_fn output,
                               void *ud,
                               sm_exec_stream **out, sm_error *err);
/* One round of I/O: reads what has arrived (passing it to output), writes
 * what the connection takes of data[0..len) (*written), and when neither
 * made progress waits up to timeout_ms (0: not at all) and tries once
 * more. 0, 1 once the process's output has ended, or a negative code
 * (including what output returned). */
SM_API int sm_exec_stream_pump(sm_exec_stream *s, const void *data, size_t len, size_t *written,
                               int timeout_ms, sm_error *err);
/* A descriptor (-1: none) whose becoming readable ends a pump's wait
 * early (returning 0): another thread has something to send (a
 * terminal's keystroke). The pump never reads it. */
SM_API void sm_exec_stream_set_wake(sm_exec_stream *s, int fd);
/* Sends what the connection takes of data[0..len) at once, from a thread
 * other than the pumping one, never waiting: the bytes sent (0: none could
 * go now), or -1 when the connection cannot be written from two threads
 * (TLS) or has failed. len 0 only asks whether it can. The caller keeps
 * the pumping thread from writing meanwhile. */
SM_API ssize_t sm_engine_exec_send_now(sm_exec_stream *s, const void *data, size_t len);
/* True when nothing has arrived on an idle stream (no output, no end):
 * what a cached stream must be before it is used again. */
SM_API int sm_exec_stream_quiet(sm_exec_stream *s);
/* Ends the stream's connection from any thread: a pump in progress on
 * another thread returns at once (1 or an error), and the process sees its
 * stdin end. The stream must still be closed. */
SM_API void sm_exec_stream_shutdown(sm_exec_stream *s);
SM_API void sm_exec_stream_close(sm_exec_stream *s);

/* A container's log (stdout and stderr) since an epoch time (0: all of
 * it), demultiplexed to output as it arrives; timestamps: each line starts
 * with the engine's RFC 3339 nano time and a space. Does not follow. */
SM_API int sm_engine_container_logs(sm_engine *engine, const char *id, double since,
                                    int timestamps, sm_output_fn output, void *ud,
                                    sm_error *err);

/* ---- networks ---- */
/* A network (driver NULL: "bridge"); internal: no route out and no outside
 * DNS. labels may be NULL; out_id may be NULL. A name already taken is
 * SM_ECONFLICT. (Defined in src/lib/engine/swarm.c.) */
SM_API int sm_engine_network_create(sm_engine *engine, const char *name, const char *driver,
                                    int internal, json_object *labels,
                                    char out_id[SM_ENGINE_ID_MAX], sm_error *err);
SM_API int sm_engine_network_inspect(sm_engine *engine, const char *name, json_object **out,
                                     sm_error *err);
/* Attaches a (running or created) container, with DNS aliases on it. */
SM_API int sm_engine_network_connect(sm_engine *engine, const char *name, const char *container,
                                     const char *const *aliases, size_t n_aliases,
                                     sm_error *err);
SM_API int sm_engine_network_disconnect(sm_engine *engine, const char *name,
                                        const char *container, int force, sm_error *err);
/* Missing is SM_ENOTFOUND, in use SM_ECONFLICT. */
SM_API int sm_engine_network_remove(sm_engine *engine, const char *id, sm_error *err);
/* labels as for containers; out: the engine's array. */
SM_API int sm_engine_network_list(sm_engine *engine, const char *const *labels,
                                  size_t n_labels, json_object **out, sm_error *err);

/* ---- volumes ---- */
/* driver NULL: "local". driver_opts: {"type":"tmpfs","device":"tmpfs",
 * "o":"size=10m,uid=1000"} or NULL; labels: JSON object or NULL. */
SM_API int sm_engine_volume_create(sm_engine *engine, const char *name, const char *driver,
                                   json_object *driver_opts, json_object *labels,
                                   sm_error *err);
/* The engine's description of a volume (Name, Driver, Options, Labels...);
 * a missing one is SM_ENOTFOUND. */
SM_API int sm_engine_volume_inspect(sm_engine *engine, const char *name, json_object **out,
                                    sm_error *err);
SM_API int sm_engine_volume_remove(sm_engine *engine, const char *name, int force, sm_error *err);
SM_API int sm_engine_volume_list(sm_engine *engine, const char *const *labels, size_t n_labels,
                                 json_object **out, sm_error *err);

#ifdef __cplusplus
}
#endif
#endif
