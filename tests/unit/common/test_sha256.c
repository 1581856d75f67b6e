/* SHA-256 of common/sha256.c (built into the agent too): the examples of
 * FIPS 180-4 / NIST's test vectors, and OpenSSL's answer for random data
 * fed in pieces of every length around the block size. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/check.h"
#include <openssl/evp.h>

#include "common/sha256.h"

static void hex(const unsigned char *d, char *out) {
  static const char digits[] = "0123456789abcdef";
  for (int i = 0; i < 32; i++) {
    out[2 * i] = digits[d[i] >> 4];
    out[2 * i + 1] = digits[d[i] & 15];
  }
  out[64] = '\0';
}

static void one(const void *data, size_t len, char *out) {
  common_sha256 c;
  unsigned char d[32];
  common_sha256_init(&c);
  common_sha256_update(&c, data, len);
  common_sha256_final(&c, d);
  hex(d, out);
}

static void test_vectors(void **state) {
  (void)state;
  char h[65];
  one("", 0, h);
  assert_string_equal(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  one("abc", 3, h);
  assert_string_equal(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  one(two, strlen(two), h);
  assert_string_equal(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  /* One million "a", given in uneven pieces. */
  common_sha256 c;
  common_sha256_init(&c);
  char a[1000];
  memset(a, 'a', sizeof a);
  size_t left = 1000000, step = 1;
  while (left > 0) {
    size_t n = step < left ? step : left;
    if (n > sizeof a) n = sizeof a;
    common_sha256_update(&c, a, n);
    left -= n;
    step = step * 7 % 997 + 1;
  }
  unsigned char d[32];
  common_sha256_final(&c, d);
  hex(d, h);
  assert_string_equal(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

static void test_against_openssl(void **state) {
  (void)state;
  unsigned char data[300];
  uint32_t x = 2463534242u;
  for (size_t i = 0; i < sizeof data; i++) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    data[i] = (unsigned char)x;
  }
  /* Every length up to 300 (the padding's edge cases at 55, 56, 63, 64),
   * split at every third point. */
  for (size_t len = 0; len <= sizeof data; len++) {
    unsigned char want[32], got[32];
    unsigned int wl = 0;
    EVP_Digest(data, len, want, &wl, EVP_sha256(), NULL);
    for (size_t cut = 0; cut <= len; cut += 3) {
      common_sha256 c;
      common_sha256_init(&c);
      common_sha256_update(&c, data, cut);
      common_sha256_update(&c, data + cut, len - cut);
      common_sha256_final(&c, got);
      assert_memory_equal(got, want, 32);
    }
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_vectors),
      cmocka_unit_test(test_against_openssl),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
