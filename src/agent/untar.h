/* `sandman-agent untar DIR [--list]` (untar.c): a workspace copy in, as
 * the sandbox's user. */
#ifndef SANDMAN_AGENT_UNTAR_H
#define SANDMAN_AGENT_UNTAR_H

/* Extracts the tar stream on stdin into dir; 0, or 1 with why on stderr.
 * list: prints the listing line of every entry written (untar.c). */
int agent_untar(const char *dir, int list);

#endif
