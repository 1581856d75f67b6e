/* `sandman-agent route` (route.c) and `sandman-tools` (tools_cli.c): the
 * sandbox's side of the host-tool route (sandman/hostroute.h). */
#ifndef SANDMAN_AGENT_ROUTE_H
#define SANDMAN_AGENT_ROUTE_H

/* The relay: listens on SM_ROUTE_SOCKET and forwards each request to the
 * host as a frame on fd 1, the host's answers coming in on fd 0. self is
 * the agent binary's path (sandman-tools links to it). Returns when fd 0
 * ends. */
int agent_route(const char *self);

/* sandman-tools: argv[0] is the command's name. Returns the exit code. */
int agent_tools_main(int argc, char **argv);

#endif
