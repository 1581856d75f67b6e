/* Internal to src/lib/sandbox: the manifest of a /workspace tar (every entry's
 * path, type, size, mode and, for files, SHA-256) and the difference of
 * two manifests (snap_manifest.c). A snapshot keeps one; `sandbox diff`
 * compares the sandbox's /workspace now with it. */
#ifndef SANDMAN_SANDBOX_SNAP_MANIFEST_H
#define SANDMAN_SANDBOX_SNAP_MANIFEST_H

#include <stdint.h>

#include <json-c/json.h>

#include <sandman/error.h>

/* The manifest of the tar open as fd (the engine's archive of /workspace:
 * entries "workspace/..."; the folder itself is left out): {"files":
 * [{"path","type","size","mode","sha256"|"target"}]} in *out, sorted by path.
 * *files (may be NULL): how many. */
int sandbox_snap_manifest_of_tar(int fd, json_object **out, int64_t *files, sm_error *err);

/* What changed from manifest `before` to `after`: {"added": [{"path",
 * "type","size"}], "modified": [{"path","type","size","size_before"}],
 * "deleted": [{"path","type","size"}]} (a type change is modified). */
json_object *sandbox_snap_manifest_diff(json_object *before, json_object *after);

#endif
