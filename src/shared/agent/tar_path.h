/* A tar member's path as sandman's unpacker (src/agent/untar.c) takes it,
 * shared with the host's scan that decides whether the unpacker may fill
 * a /workspace (src/lib/sandbox/ws_fill.c): both must agree on it. */
#ifndef SANDMAN_SHARED_AGENT_TAR_PATH_H
#define SANDMAN_SHARED_AGENT_TAR_PATH_H

/* Cleans p in place ("." and empty parts dropped; "" is the directory
 * itself). -1 for an absolute path, a ".." part or a part over 255 bytes,
 * which the unpacker refuses; else 0. */
int agent_tar_path_clean(char *p);

#endif
