/* Internal to src/lib/mcp: the protocol revisions sandman speaks and a
 * request's per-request metadata (revision.c).
 *
 * Two eras (the specification's words): "legacy" revisions open with an
 * `initialize` handshake (2025-11-25 and before), "modern" ones carry the
 * protocol version and the client's capabilities in every request's _meta
 * (2026-07-28). A request is of the modern era when its params._meta holds
 * io.modelcontextprotocol/protocolVersion. */
#ifndef SANDMAN_MCP_REVISION_H
#define SANDMAN_MCP_REVISION_H

#include <stddef.h>

#include <json-c/json.h>

#define MCP_META_VERSION "io.modelcontextprotocol/protocolVersion"
#define MCP_META_CAPABILITIES "io.modelcontextprotocol/clientCapabilities"
#define MCP_META_CLIENT "io.modelcontextprotocol/clientInfo"
#define MCP_META_SERVER "io.modelcontextprotocol/serverInfo"
#define MCP_EXT_TASKS "io.modelcontextprotocol/tasks"

#define MCP_VERSION_MAX 32   /* bytes of a protocol version we read */
#define MCP_META_KEYS_MAX 64 /* keys of _meta, of the capabilities, of their extensions */

/* 1 when v is a revision of that era sandman speaks. */
int mcp_revision_legacy(const char *v);
int mcp_revision_modern(const char *v);
/* Every revision sandman speaks, newest first, as a JSON array (new). */
json_object *mcp_revision_all(void);

typedef struct mcp_meta {
  int modern;                         /* _meta names a protocol version */
  char version[MCP_VERSION_MAX + 1];  /* that version */
  int tasks;                          /* the client declared the tasks extension */
} mcp_meta;

enum {
  MCP_META_OK = 0,        /* a modern request of a version sandman speaks */
  MCP_META_NONE = 1,      /* no protocol version in _meta: not a modern request */
  MCP_META_MALFORMED = 2, /* a required field missing or of the wrong type, or past a cap */
  MCP_META_UNSUPPORTED = 3, /* a version sandman does not speak (in out->version) */
};

/* Reads params._meta (params may be NULL). One of MCP_META_*; why (for the
 * client) says what is wrong. */
int mcp_meta_read(json_object *params, mcp_meta *out, char *why, size_t why_len);

/* The data of an UnsupportedProtocolVersionError: {"supported", "requested"}. */
json_object *mcp_revision_unsupported(const char *requested);

#endif
