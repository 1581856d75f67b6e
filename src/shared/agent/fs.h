/* sandman-agent fs: file operations inside a sandbox, confined to one
 * directory (the sandbox's /workspace), for the files API (src/lib/files).
 *
 * `sandman-agent fs OP ROOT ARGS...` runs one operation and exits: 0 when
 * it answered "ok", 1 when it answered "err", 2 for a usage error. It runs
 * as the sandbox's user, like any tool call, through an engine exec or an
 * agent session. Every path is relative to ROOT and is walked one
 * component at a time with openat(O_NOFOLLOW): a symbolic link anywhere on
 * the way is refused (ELOOP), never followed, so nothing the sandbox
 * planted can point an operation outside ROOT. ".." and absolute paths are
 * refused (EXDEV).
 *
 * Output on stdout (the host parses it against hard caps, src/lib/files/files_wire.c):
 *   status line   "ok[ FIELDS]\n"  or  "err ERRNAME MESSAGE\n"
 *   record        "T MODE SIZE MTIME_S MTIME_NS PATHLEN LINKLEN\n" PATH LINK
 *                 T: f file, d directory, l symbolic link, o other
 *                 (fifo, socket, device); MODE octal (permission bits),
 *                 PATH relative to ROOT, LINK the link's target (l only).
 *                 In `get`, a file record is followed by SIZE content bytes.
 *   match         "m LINE PATHLEN TEXTLEN\n" PATH TEXT     (grep)
 *   end           "end COUNT TRUNCATED\n"  (TRUNCATED 1: a cap stopped it)
 * An "err" line may also come after records (the operation stopped).
 *
 * Operations (FLAGS is "-" or letters):
 *   read   ROOT PATH OFFSET LENGTH   "ok SIZE COUNT\n" + COUNT bytes (LENGTH -1: to the end)
 *   write  ROOT PATH MODE FLAGS      stdin is the content in chunks ("HEXLEN\n" and that
 *                                    many bytes, ended by "0\n"); "ok BYTES\n". MODE octal or "-"
 *                                    (keep an existing file's, else 0644); p: make parent
 *                                    folders, x: refuse an existing file. Written to a
 *                                    temporary file beside it, then renamed over it.
 *   mkdir  ROOT PATH MODE FLAGS      "ok\n"; p: parents, and an existing folder is fine
 *   delete ROOT PATH FLAGS           "ok COUNT\n"; r: a folder with what it holds
 *   stat   ROOT PATH                 "ok\n" one record (a link described, not followed) "end"
 *   list   ROOT PATH DEPTH MAX       "ok\n" records "end"; DEPTH 0: no limit; PATH may be a file
 *   glob   ROOT PATH PATTERN MAX     "ok\n" records of matches "end"; PATTERN relative to
 *                                    PATH, '/'-separated, * ? [..] per name, ** any folders
 *   grep   ROOT PATH REGEX FLAGS INCLUDE MAX
 *                                    "ok\n" matches "end"; REGEX POSIX extended; i: ignore
 *                                    case, F: REGEX is a fixed string; INCLUDE a glob on paths
 *                                    relative to PATH or "-"; binary files are skipped
 *   get    ROOT MAXBYTES PATH...     "ok\n" records with content "end"; folders recursively;
 *                                    more than MAXBYTES of content: "err EFBIG"
 *   put    ROOT PATH                 stdin: records with content (f and d only), paths
 *                                    relative to PATH, then "end\n"; "ok FILES BYTES\n"
 * A stream cut short (write without its "0\n", put without its "end") is
 * an error: the file being written is never renamed into place. */
#ifndef SANDMAN_AGENT_FS_H
#define SANDMAN_AGENT_FS_H

#include <stddef.h>

#define SM_FS_PATH_MAX 4096   /* bytes of a relative path */
#define SM_FS_NAME_MAX 255    /* bytes of one component */
#define SM_FS_LINE_MAX 512    /* a status, record or end line */
#define SM_FS_TEXT_MAX 2048   /* bytes of a grep line sent back */
#define SM_FS_DEPTH_MAX 256   /* folder levels walked */

/* Opens the folder PATH (relative to the folder root; "." is root itself)
 * walking one name at a time with O_NOFOLLOW: *out a new descriptor and
 * canon its canonical form ("" for root). 0 or an errno (ELOOP: a link on
 * the way, EXDEV: '..' or absolute, ENOTDIR, ENOENT...). */
int agent_fs_open_dir(int root, const char *path, int *out, char *canon, size_t clen);

/* The agent's entry point for `sandman-agent fs ...` (argv[0] is "fs"). */
int sm_agent_fs_main(int argc, char **argv);

#endif
