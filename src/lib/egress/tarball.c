/* A tar stream of one regular file, made in memory: the proxy's image (its
 * binary) and the policy files sandman writes into the proxy. ustar is all
 * the engine needs for that. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "egress/egress_internal.h"

static void octal(char *dst, size_t width, unsigned long long v) {
  /* width includes the terminating NUL */
  snprintf(dst, width, "%0*llo", (int)(width - 1), v);
}

int egress_tar_one(eg_tar *t, const char *name, unsigned mode, const void *data, size_t len) {
  memset(t, 0, sizeof *t);
  size_t nl = strlen(name);
  if (nl == 0 || nl > 99) return -1;
  size_t padded = (len + 511) / 512 * 512;
  t->len = 512 + padded + 1024; /* header, content, two zero blocks */
  t->data = calloc(1, t->len);
  if (t->data == NULL) return -1;
  char *h = t->data;
  memcpy(h, name, nl);
  octal(h + 100, 8, mode & 07777);
  octal(h + 108, 8, 0);
  octal(h + 116, 8, 0);
  octal(h + 124, 12, (unsigned long long)len);
  octal(h + 136, 12, (unsigned long long)time(NULL));
  memset(h + 148, ' ', 8);
  h[156] = '0';
  memcpy(h + 257, "ustar", 6);
  memcpy(h + 263, "00", 2);
  unsigned sum = 0;
  for (int i = 0; i < 512; i++) sum += (unsigned char)h[i];
  snprintf(h + 148, 8, "%06o", sum);
  h[155] = ' ';
  if (len) memcpy(t->data + 512, data, len);
  return 0;
}

ssize_t egress_tar_read(void *ud, char *buf, size_t len) {
  eg_tar *t = ud;
  size_t left = t->len - t->off;
  if (len > left) len = left;
  memcpy(buf, t->data + t->off, len);
  t->off += len;
  return (ssize_t)len;
}

void egress_tar_dispose(eg_tar *t) {
  free(t->data);
  memset(t, 0, sizeof *t);
}
