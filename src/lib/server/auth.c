/* Control and per-worker tokens: loading, derivation, comparison, the
 * checks of a request's token, and random identifiers (auth.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/random.h>

#include <sandman/principal.h>
#include <sandman/server.h>

#include "common/cleanup.h"
#include "server/auth.h"

int sm_token_derive(const char *control_token, const char *worker_key, char out[65],
                    sm_error *err) {
  if (control_token == NULL || control_token[0] == '\0')
    return sm_error_set(err, SM_EINVAL, "no control token to derive from");
  if (worker_key == NULL || worker_key[0] == '\0')
    return sm_error_set(err, SM_EINVAL, "worker key is empty");
  size_t plen = sizeof SM_WORKER_TOKEN_PREFIX; /* includes the NUL separator */
  size_t klen = strlen(worker_key);
  if (klen > SM_SERVER_KEY_MAX)
    return sm_error_set(err, SM_EINVAL, "worker key is longer than %d bytes",
                        SM_SERVER_KEY_MAX);
  unsigned char msg[sizeof SM_WORKER_TOKEN_PREFIX + SM_SERVER_KEY_MAX];
  memcpy(msg, SM_WORKER_TOKEN_PREFIX, plen);
  memcpy(msg + plen, worker_key, klen);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_len = 0;
  if (HMAC(EVP_sha256(), control_token, (int)strlen(control_token), msg, plen + klen, mac,
           &mac_len) == NULL ||
      mac_len != 32)
    return sm_error_set(err, SM_EIO, "HMAC-SHA256 failed");
  static const char hex[] = "0123456789abcdef";
  for (unsigned i = 0; i < 32; i++) {
    out[2 * i] = hex[mac[i] >> 4];
    out[2 * i + 1] = hex[mac[i] & 15];
  }
  out[64] = '\0';
  OPENSSL_cleanse(mac, sizeof mac);
  return 0;
}

int sm_token_equal(const char *a, const char *b) {
  if (a == NULL || b == NULL) return 0;
  size_t la = strlen(a), lb = strlen(b);
  /* CRYPTO_memcmp's time does not depend on where the bytes differ. The
   * length is no secret: worker tokens are always 64 hex digits. */
  if (la != lb) return 0;
  return CRYPTO_memcmp(a, b, la) == 0;
}

int server_auth_is_control(const char *control_token, const char *token) {
  return token != NULL && sm_token_equal(token, control_token);
}

int server_auth_token_ok(const char *control_token, const char *token, const char *worker_key) {
  if (token == NULL) return 0;
  if (server_auth_is_control(control_token, token)) return 1;
  if (worker_key == NULL || worker_key[0] == '\0') return 0;
  char expect[65];
  if (sm_token_derive(control_token, worker_key, expect, NULL) != 0) return 0;
  int ok = sm_token_equal(token, expect);
  OPENSSL_cleanse(expect, sizeof expect);
  return ok;
}

int server_auth_principal(const char *worker_key, char *out, size_t len) {
  if (worker_key == NULL) {
    snprintf(out, len, "%s", SM_PRINCIPAL_CONTROL);
    return 0;
  }
  return sm_principal_worker(worker_key, out, len, NULL) == 0 ? 0 : -1;
}

int server_token_valid(const char *t) {
  size_t n = strlen(t);
  if (n < SM_TOKEN_MIN_LEN || n > SM_TOKEN_MAX_LEN) return 0;
  for (size_t i = 0; i < n; i++)
    if (t[i] <= ' ' || t[i] > '~') return 0;
  return 1;
}

static int check_token(const char *t, const char *where, sm_error *err) {
  size_t n = strlen(t);
  if (n < SM_TOKEN_MIN_LEN)
    return sm_error_set(err, SM_EINVAL,
                        "the control token from %s is %zu characters: use at least %d "
                        "random characters (e.g. `openssl rand -hex 32`)",
                        where, n, SM_TOKEN_MIN_LEN);
  if (!server_token_valid(t))
    return sm_error_set(err, SM_EINVAL,
                        "the control token from %s must be at most %d visible ASCII "
                        "characters without spaces",
                        where, SM_TOKEN_MAX_LEN);
  return 0;
}

int sm_token_load(const char *token_file, char *out, size_t out_len, sm_error *err) {
  if (out_len < 2) return sm_error_set(err, SM_EINVAL, "token buffer too small");
  out[0] = '\0';
  if (token_file == NULL) {
    const char *v = getenv(SM_TOKEN_ENV);
    if (v == NULL || v[0] == '\0')
      return sm_error_set(err, SM_EINVAL,
                          "no control token: give --token-file FILE or set " SM_TOKEN_ENV);
    if (strlen(v) >= out_len)
      return sm_error_set(err, SM_EINVAL, SM_TOKEN_ENV " is too long");
    snprintf(out, out_len, "%s", v);
    return check_token(out, SM_TOKEN_ENV, err);
  }
  cleanup_fd int fd = open(token_file, O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0)
    return sm_error_set_errno(err, SM_EIO, errno, "cannot open token file %s: %s", token_file,
                              strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
    return sm_error_set(err, SM_EINVAL, "token file %s is not a regular file", token_file);
  size_t len = 0;
  for (;;) {
    if (len + 1 >= out_len) {
      OPENSSL_cleanse(out, out_len);
      return sm_error_set(err, SM_EINVAL, "token file %s is larger than %d bytes", token_file,
                          SM_TOKEN_MAX_LEN);
    }
    ssize_t n = read(fd, out + len, out_len - 1 - len);
    if (n < 0) {
      if (errno == EINTR) continue;
      return sm_error_set_errno(err, SM_EIO, errno, "reading token file %s: %s", token_file,
                                strerror(errno));
    }
    if (n == 0) break;
    len += (size_t)n;
  }
  out[len] = '\0';
  while (len > 0 && (out[len - 1] == '\n' || out[len - 1] == '\r')) out[--len] = '\0';
  char where[600];
  snprintf(where, sizeof where, "token file %s", token_file);
  return check_token(out, where, err);
}

void server_random_hex(char *out, size_t n_bytes) {
  static const char hex[] = "0123456789abcdef";
  unsigned char buf[64];
  if (n_bytes > sizeof buf) n_bytes = sizeof buf;
  if (RAND_bytes(buf, (int)n_bytes) != 1) {
    /* The kernel's generator is the fallback; it blocks only before the
     * pool is initialised at boot. */
    size_t got = 0;
    while (got < n_bytes) {
      ssize_t n = getrandom(buf + got, n_bytes - got, 0);
      if (n > 0) got += (size_t)n;
      else if (errno != EINTR) break;
    }
  }
  for (size_t i = 0; i < n_bytes; i++) {
    out[2 * i] = hex[buf[i] >> 4];
    out[2 * i + 1] = hex[buf[i] & 15];
  }
  out[2 * n_bytes] = '\0';
  OPENSSL_cleanse(buf, sizeof buf);
}
