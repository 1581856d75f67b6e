/* See digest.h. Plain libc: this file is also built into sandman-agent. */
#include "workspace/digest.h"

static void put_u64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

void workspace_digest_init(ws_digest *d) {
  common_sha256_init(&d->sha);
  d->count = 0;
}

void workspace_digest_add(ws_digest *d, const char *path, size_t len, char type, int64_t size,
                          int64_t mtime_s, int64_t ctime_ns, uint32_t mode) {
  /* Length first: a record never reads as the start of another. */
  unsigned char head[8], rec[1 + 4 * 8];
  put_u64(head, (uint64_t)len);
  common_sha256_update(&d->sha, head, sizeof head);
  common_sha256_update(&d->sha, path, len);
  size_t n = 0;
  rec[n++] = (unsigned char)type;
  switch (type) {
  case 'f':
    put_u64(rec + n, (uint64_t)size);
    put_u64(rec + n + 8, (uint64_t)mtime_s);
    put_u64(rec + n + 16, (uint64_t)ctime_ns);
    put_u64(rec + n + 24, mode & 0777);
    n += 32;
    break;
  case 'l':
    put_u64(rec + n, (uint64_t)size);
    put_u64(rec + n + 8, (uint64_t)ctime_ns);
    n += 16;
    break;
  default:
    put_u64(rec + n, mode & 0777);
    n += 8;
    break;
  }
  common_sha256_update(&d->sha, rec, n);
  d->count++;
}

void workspace_digest_sum(ws_digest *d, unsigned char sum[32]) {
  unsigned char tail[8];
  put_u64(tail, d->count);
  common_sha256_update(&d->sha, tail, sizeof tail);
  common_sha256_final(&d->sha, sum);
}

void workspace_digest_add_sum(ws_digest *top, const unsigned char sum[32], uint64_t count) {
  unsigned char n[8];
  put_u64(n, count);
  common_sha256_update(&top->sha, sum, 32);
  common_sha256_update(&top->sha, n, sizeof n);
  top->count += count;
}

void workspace_digest_final(ws_digest *top, char hex[65]) {
  static const char digits[] = "0123456789abcdef";
  unsigned char out[32];
  workspace_digest_sum(top, out);
  for (int i = 0; i < 32; i++) {
    hex[2 * i] = digits[out[i] >> 4];
    hex[2 * i + 1] = digits[out[i] & 15];
  }
  hex[64] = '\0';
}
