/* `sandman-agent ports`: the sandbox's side of port forwarding
 * (docs/ports.md). sandman starts it as a long-lived engine exec as the
 * sandbox's user; it carries TCP connections to the sandbox's own loopback
 * over its stdin and stdout in frames (frame.h, SM_FRAME_PORT_*), so a
 * port is reachable from the host with `network: none`: the sandbox gains
 * no network, and nothing but this exec's stream reaches the port. */
#ifndef SANDMAN_AGENT_PORT_RELAY_H
#define SANDMAN_AGENT_PORT_RELAY_H

/* Connections the relay holds at once; an open past it is refused
 * (EMFILE), whatever the host asks. */
#define AGENT_PORTS_MAX_CONNS 256

/* Runs until fd 0 ends (every connection is then closed). 0, or 1 when it
 * could not start; 2 on a protocol error of the host. */
int agent_ports(void);

#endif
