/* A tar member's path as the unpacker takes it (tar_path.h). */
#include "agent/tar_path.h"

#include <string.h>

int agent_tar_path_clean(char *p) {
  if (p[0] == '/') return -1;
  char *o = p;
  const char *s = p;
  while (*s) {
    const char *e = strchr(s, '/');
    size_t n = e ? (size_t)(e - s) : strlen(s);
    if ((n == 2 && s[0] == '.' && s[1] == '.') || n > 255) return -1;
    if (n > 0 && !(n == 1 && s[0] == '.')) {
      if (o != p) *o++ = '/';
      memmove(o, s, n);
      o += n;
    }
    s += n;
    if (*s == '/') s++;
  }
  *o = '\0';
  return 0;
}
