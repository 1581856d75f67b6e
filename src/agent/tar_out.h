/* `sandman-agent tar DIR [--stop]` (tar_out.c): DIR as a tar stream on
 * stdout, for a snapshot of a running sandbox (docs/state.md#snapshots),
 * after a line "sandman-tar 1\n" (written once the processes are stopped:
 * the host's sign that what follows is the tar, and that it may commit the
 * sandbox's layer from then on).
 *
 * Entries "./" (DIR itself), "./d/" for folders, "./d/f" for files and
 * symbolic links: the shape of the engine's archive of "DIR/.", in the
 * format untar.c reads (ustar, pax extended headers for a path or link
 * target over 100 bytes and a size over 8 GiB). Never follows a link.
 *
 * Fails closed: anything it cannot read or represent (a file or folder it
 * may not read, a fifo, socket or device, a file with more than one hard
 * link, a path over 4096 bytes, folders nested over 256 deep) ends it with
 * exit 3 and the reason on stderr; what it wrote is then not a whole tar
 * and the host reads DIR another way. Exit 1 on any other failure (a
 * write to stdout that fails), 2 for a usage error.
 *
 * --stop (inside a sandbox only: kill(-1) reaches every process of the
 * user): first stops every other process it may signal (SIGSTOP) and
 * checks that none of the user's is left running (exit 3 if one is), so
 * that nothing changes DIR while it is read; after the tar it waits for a
 * byte (or the end) on stdin, the host's word that the rest of the
 * snapshot is done too, then continues (SIGCONT) the processes it
 * stopped, and only those. */
#ifndef SANDMAN_AGENT_TAR_OUT_H
#define SANDMAN_AGENT_TAR_OUT_H

#define AGENT_TAR_CANNOT 3 /* the exit code: read DIR another way */

/* argv[0] is "tar". */
int agent_tar_main(int argc, char **argv);

#endif
