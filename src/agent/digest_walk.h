/* sandman-agent wsdigest: the workspace digest (src/shared/workspace/digest.h) of
 * what a sandbox's workspace holds now.
 *
 *   sandman-agent wsdigest DIR MAX_ENTRIES [EXCLUDE...]
 *
 * Walks DIR (never following a link) depth-first, the names of each folder
 * sorted bytewise, every entry under DIR but those an EXCLUDE glob matches
 * (matched as workspace_excluded does: the whole relative path and the name), and
 * prints "wsdigest HEX COUNT\n". Exit 0 then; 3 when it gives no digest
 * (more than MAX_ENTRIES entries, a path longer than WS_DIGEST_PATH_MAX,
 * folders nested too deep); 1 when a folder cannot be read; 2 for a usage
 * error; a line on stderr says why. It runs as the sandbox's user, like
 * the listing it stands in for, and is no more trusted than it. */
#ifndef SANDMAN_AGENT_DIGEST_WALK_H
#define SANDMAN_AGENT_DIGEST_WALK_H

#define SM_DIGEST_DEPTH_MAX 256 /* folder levels walked */

/* argv[0] is "wsdigest". */
int sm_agent_wsdigest_main(int argc, char **argv);

#endif
