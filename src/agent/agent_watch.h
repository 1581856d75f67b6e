/* `sandman-agent watch ROOT PATH FLAGS`: file events of a folder of the
 * workspace as they happen (inotify), for GET /v1/files/watch
 * (docs/file-events.md). It runs as the sandbox's user like the
 * files API's helper (fs.h), and follows the same path rules: PATH is
 * relative to ROOT, walked with O_NOFOLLOW one name at a time (a link on
 * the way is refused), a folder reached through a link is never watched.
 * FLAGS: "r" (the folders below too) or "-".
 *
 * Output on stdout (the host parses it against hard caps,
 * src/lib/files/watch_wire.c):
 *   "ok\n"                          once every watch is in place
 *   "e K D PATHLEN TOLEN\n" PATH TO  an event; PATH (and TO) relative to
 *                                   ROOT; K: c created, m modified,
 *                                   d deleted, v moved (PATH to TO),
 *                                   o overflow (events were lost: the
 *                                   kernel's queue overflowed, or a new
 *                                   folder could not be watched); D: 1
 *                                   for a folder
 *   "end 0 0\n"                     the watched folder itself was removed
 *                                   or moved away; the watch is over
 *   "err ERRNAME MESSAGE\n"         it could not start (or went wrong)
 * It runs until killed, or until its stdout is closed. */
#ifndef SANDMAN_AGENT_WATCH_H
#define SANDMAN_AGENT_WATCH_H

#define AGENT_WATCH_DIRS_MAX 8192 /* folders watched at once */

int agent_watch(const char *root, const char *path, const char *flags);

#endif
