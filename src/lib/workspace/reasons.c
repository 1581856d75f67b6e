/* The reasons a copy out gives for an entry it did not apply: their names
 * (the result's `refused[].reason`, stable: scripts match them) and words. */
#include <string.h>

#include "workspace/ws.h"

static const struct {
  const char *name, *text;
} reasons[WS_R_COUNT] = {
    [WS_R_NONE] = {"", ""},
    [WS_R_PROTECTED] = {"protected", "a protected path"},
    [WS_R_LINK_OUTSIDE] = {"link_outside", "a symbolic link that leaves the workspace"},
    [WS_R_LINK_ABSOLUTE] = {"link_absolute", "an absolute symbolic link"},
    [WS_R_DEVICE] = {"device", "a device node"},
    [WS_R_FIFO] = {"fifo", "a fifo"},
    [WS_R_SOCKET] = {"socket", "a socket"},
    [WS_R_SPECIAL] = {"special", "a special file"},
    [WS_R_NAME_TOO_LONG] = {"name_too_long", "a name longer than 255 bytes"},
    [WS_R_UNSAFE_PATH] = {"unsafe_path",
                          "a path that could lead outside the workspace (absolute, '..', under a "
                          "link or a file, given twice, or reserved)"},
    [WS_R_HARD_LINK] = {"hard_link", "a hard link to something that is not a file of the copy"},
    [WS_R_PATH_TOO_LONG] = {"path_too_long",
                            "a path longer than 3072 bytes (the engine cannot read it back)"},
};

const char *workspace_reason_name(int r) {
  return r > 0 && r < WS_R_COUNT ? reasons[r].name : "unsafe_path";
}

const char *workspace_reason_text(int r) {
  return r > 0 && r < WS_R_COUNT ? reasons[r].text : reasons[WS_R_UNSAFE_PATH].text;
}

int workspace_reason_parse(const char *name) {
  for (int r = 1; r < WS_R_COUNT; r++)
    if (name && strcmp(name, reasons[r].name) == 0) return r;
  return WS_R_NONE;
}
