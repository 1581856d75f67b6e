/* `sandman-agent quiet` (quiet.c): before a call with leased credentials in
 * a shared sandbox, stops every other process of the sandbox's user. */
#ifndef SANDMAN_AGENT_QUIET_H
#define SANDMAN_AGENT_QUIET_H

/* 0 once every other process of our user is stopped; 1 (why on stderr)
 * when they could not all be stopped. */
int agent_quiet(void);

#endif
