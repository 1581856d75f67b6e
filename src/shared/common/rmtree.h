/* Removing a tree without following symbolic links, on libc alone: shared
 * by the library (src/lib/workspace) and the static in-sandbox agent. */
#ifndef SANDMAN_COMMON_RMTREE_H
#define SANDMAN_COMMON_RMTREE_H

/* Removes name under dir_fd, recursively for a directory; a link is
 * removed, never followed. A directory its owner cannot read or write is
 * opened up first (as `rm -rf` does for its owner). 0 or -errno; a name
 * already gone is 0. */
int common_rmtree_at(int dir_fd, const char *name);

#endif
