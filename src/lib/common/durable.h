/* Files that survive a crash whole or not at all: written under a
 * temporary name, flushed, then renamed over the old one (durable.c). */
#ifndef SANDMAN_COMMON_DURABLE_H
#define SANDMAN_COMMON_DURABLE_H

#include <stddef.h>

#include <sandman/error.h>

/* Replaces path with data: a reader sees the old file or the new one,
 * never part of one, also after a crash. The folder must exist. */
int common_file_replace(const char *path, const void *data, size_t len, sm_error *err);
/* The same without the flushes: whole or not at all for readers and after
 * the process's crash, but not after the machine's (a few ms less). */
int common_file_replace_quick(const char *path, const void *data, size_t len, sm_error *err);
/* Makes a rename (or an unlink) in path's folder durable; a failure only
 * costs durability. */
void common_sync_dir_of(const char *path);
/* Reads a whole small file (at most cap bytes) into *out, NUL-terminated
 * (the caller frees). SM_ENOTFOUND when it does not exist, SM_ETOOBIG past
 * cap. */
int common_file_read_small(const char *path, size_t cap, char **out, size_t *out_len,
                           sm_error *err);

#endif
