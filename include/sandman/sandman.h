/* sandman: the whole public API. */
#ifndef SANDMAN_SANDMAN_H
#define SANDMAN_SANDMAN_H
#include <sandman/error.h>
#include <sandman/log.h>
#include <sandman/util.h>
#include <sandman/version.h>
#include <sandman/engine.h>
#include <sandman/sandbox.h>
#include <sandman/state.h>
#include <sandman/workspace.h>
#include <sandman/files.h>
#include <sandman/code.h>
#include <sandman/mcp.h>
#include <sandman/config.h>
#include <sandman/ops.h>
#include <sandman/image.h>
#include <sandman/audit.h>
#include <sandman/egress.h>
#include <sandman/hostroute.h>
#include <sandman/broker.h>
#include <sandman/terminal.h>
#endif
