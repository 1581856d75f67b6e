/* Runs a fuzz target without libFuzzer: every file under the corpus folder
 * given as argv[1] (if it exists), then a bounded number of pseudo-random
 * mutations of them, so each target is exercised by every plain test run. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REPLAY_MAX_INPUT (1u << 20)
#define MAX_SEEDS 256

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t next_random(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

int main(int argc, char **argv) {
  static uint8_t *seeds[MAX_SEEDS];
  static size_t sizes[MAX_SEEDS];
  size_t n = 0;
  if (argc > 1) {
    DIR *d = opendir(argv[1]);
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL && n < MAX_SEEDS) {
      if (de->d_name[0] == '.') continue;
      char path[4096];
      snprintf(path, sizeof path, "%s/%s", argv[1], de->d_name);
      FILE *f = fopen(path, "rb");
      if (!f) continue;
      uint8_t *buf = malloc(REPLAY_MAX_INPUT);
      size_t len = buf ? fread(buf, 1, REPLAY_MAX_INPUT, f) : 0;
      fclose(f);
      if (!buf) continue;
      LLVMFuzzerTestOneInput(buf, len);
      seeds[n] = buf;
      sizes[n] = len;
      n++;
    }
    if (d) closedir(d);
  }
  /* Mutations: flip, truncate, duplicate. Empty input too. */
  LLVMFuzzerTestOneInput((const uint8_t *)"", 0);
  unsigned runs = 0;
  for (size_t i = 0; i < n; i++) {
    for (int k = 0; k < 200; k++, runs++) {
      size_t len = sizes[i];
      uint8_t *m = malloc(len + 16);
      if (!m) break;
      memcpy(m, seeds[i], len);
      int flips = 1 + (int)(next_random() % 8);
      for (int f = 0; f < flips && len > 0; f++) m[next_random() % len] ^= (uint8_t)(1u << (next_random() % 8));
      size_t cut = (next_random() % 4 == 0 && len > 0) ? next_random() % len : len;
      LLVMFuzzerTestOneInput(m, cut);
      free(m);
    }
  }
  for (int k = 0; k < 500; k++, runs++) {
    uint8_t junk[512];
    size_t len = next_random() % sizeof junk;
    for (size_t j = 0; j < len; j++) junk[j] = (uint8_t)next_random();
    LLVMFuzzerTestOneInput(junk, len);
  }
  for (size_t i = 0; i < n; i++) free(seeds[i]);
  printf("replayed %zu seeds and %u mutations: 0 crashes\n", n, runs);
  return 0;
}
