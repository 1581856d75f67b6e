/* SM_UNCONST(p): p without its const, said out loud (curl's CURL_UNCONST).
 * For the few places where an interface takes a non-const pointer to what
 * it only reads (exec's argv, a borrowed name in a struct that otherwise
 * owns its strings) or where we free or scrub what we own through a const
 * pointer. The cast goes through uintptr_t so that -Wcast-qual keeps
 * flagging every other cast that drops a const. libc only: the agent and
 * the egress proxy use it too. */
#ifndef SANDMAN_COMMON_UNCONST_H
#define SANDMAN_COMMON_UNCONST_H

#include <stdint.h>

#define SM_UNCONST(p) ((void *)(uintptr_t)(p))

#endif
