/* What the proxy (topology.c) and the relays (relay.c) share on the engine:
 * names, labels, the image's reference, the socket volume's mount, reading
 * inspect answers, and waiting for a program's ready line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "common/thread.h"
#include "egress/egress_blob.h"
#include "egress/egress_internal.h"

#define LABEL_PREFIX "io.sandman."
#define READY_WAIT_MS 10000
#define IMAGE_REPO "sandman/egress"

static int valid_instance(const char *s) {
  if (s == NULL || *s == '\0' || strlen(s) > 64) return 0;
  if (!((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= '0' && s[0] <= '9')))
    return 0;
  for (const char *p = s; *p; p++) {
    char c = *p;
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
          c == '.' || c == '-'))
      return 0;
  }
  return 1;
}

int egress_instance(const sm_egress_proxy_options *opts, char *out, size_t len, sm_error *err) {
  const char *inst = opts ? opts->instance : NULL;
  if (inst == NULL || *inst == '\0') inst = getenv("SANDMAN_INSTANCE");
  if (inst == NULL || *inst == '\0') inst = "default";
  if (!valid_instance(inst))
    return sm_error_set(err, SM_EINVAL,
                        "instance '%s' must be 1-64 letters, digits, '_', '.' or '-' (set SANDMAN_INSTANCE)", inst);
  snprintf(out, len, "%s", inst);
  return 0;
}

void egress_proxy_name(const char *instance, char *out, size_t len) {
  snprintf(out, len, "sandman-egress-%s", instance);
}

void egress_socket_volume(const char *instance, char *out, size_t len) {
  snprintf(out, len, "sandman-egress-%s-socket", instance);
}

void egress_image_ref(char *out, size_t len) {
  snprintf(out, len, IMAGE_REPO ":%.16s", sm_egress_blob_sha256);
}

void egress_settings_hash(const char *text, char out[17]) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(text, strlen(text), md, &n, EVP_sha256(), NULL);
  static const char hex[] = "0123456789abcdef";
  for (unsigned i = 0; i < 8 && i < n; i++) {
    out[2 * i] = hex[md[i] >> 4];
    out[2 * i + 1] = hex[md[i] & 15];
  }
  out[16] = '\0';
}

json_object *egress_labels_new(const char *instance, const char *role) {
  json_object *l = json_object_new_object();
  json_object_object_add(l, LABEL_PREFIX "managed", json_object_new_string("true"));
  json_object_object_add(l, LABEL_PREFIX "instance", json_object_new_string(instance));
  json_object_object_add(l, EG_LABEL, json_object_new_string(role));
  return l;
}

json_object *egress_socket_mount(const char *instance, int read_only) {
  char vol[SM_EGRESS_NAME_MAX];
  egress_socket_volume(instance, vol, sizeof vol);
  json_object *m = json_object_new_object(), *vo = json_object_new_object();
  json_object *dc = json_object_new_object(), *o = json_object_new_object();
  json_object_object_add(m, "Type", json_object_new_string("volume"));
  json_object_object_add(m, "Source", json_object_new_string(vol));
  json_object_object_add(m, "Target", json_object_new_string(EG_SOCKET_DIR));
  json_object_object_add(m, "ReadOnly", json_object_new_boolean(read_only));
  json_object_object_add(vo, "Labels", egress_labels_new(instance, "socket"));
  /* A tmpfs of the proxy's user, mode 0700: nothing but the proxy and the
   * relays (its user) can even look inside. */
  json_object_object_add(dc, "Name", json_object_new_string("local"));
  json_object_object_add(o, "type", json_object_new_string("tmpfs"));
  json_object_object_add(o, "device", json_object_new_string("tmpfs"));
  json_object_object_add(o, "o", json_object_new_string("size=64k,uid=65534,gid=65534,mode=0700"));
  json_object_object_add(dc, "Options", o);
  json_object_object_add(vo, "DriverConfig", dc);
  json_object_object_add(m, "VolumeOptions", vo);
  return m;
}

const char *egress_jstr(json_object *o, const char *a, const char *b, const char *c) {
  json_object *x = o;
  const char *path[] = {a, b, c};
  for (int i = 0; i < 3 && path[i]; i++)
    if (!json_object_object_get_ex(x, path[i], &x)) return NULL;
  return json_object_is_type(x, json_type_string) ? json_object_get_string(x) : NULL;
}

int egress_parse_log_time(const char *s, size_t len, long long *sec, long *nsec) {
  /* YYYY-MM-DDTHH:MM:SS[.fraction]Z, as the engine writes it (UTC). */
  if (len < 20 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':') return -1;
  int v[6] = {0};
  const int at[6] = {0, 5, 8, 11, 14, 17}, w[6] = {4, 2, 2, 2, 2, 2};
  for (int i = 0; i < 6; i++)
    for (int j = 0; j < w[i]; j++) {
      char c = s[at[i] + j];
      if (c < '0' || c > '9') return -1;
      v[i] = v[i] * 10 + (c - '0');
    }
  size_t p = 19;
  long frac = 0;
  int digits = 0;
  if (p < len && s[p] == '.') {
    for (p++; p < len && s[p] >= '0' && s[p] <= '9'; p++)
      if (digits < 9) {
        frac = frac * 10 + (s[p] - '0');
        digits++;
      }
  }
  if (p >= len || s[p] != 'Z') return -1;
  while (digits < 9) {
    frac *= 10;
    digits++;
  }
  /* Days from the civil date (Howard Hinnant's algorithm). */
  int y = v[0], m = v[1], d = v[2];
  if (m < 1 || m > 12 || d < 1 || d > 31 || v[3] > 23 || v[4] > 59 || v[5] > 60) return -1;
  y -= m <= 2;
  long long era = (y >= 0 ? y : y - 399) / 400;
  long long yoe = y - era * 400;
  long long doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  long long doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  long long days = era * 146097 + doe - 719468;
  *sec = days * 86400 + v[3] * 3600 + v[4] * 60 + v[5];
  *nsec = frac;
  return 0;
}

int egress_started_at(json_object *info, long long *sec, long *nsec) {
  const char *t = egress_jstr(info, "State", "StartedAt", NULL);
  *sec = 0;
  *nsec = 0;
  return t ? egress_parse_log_time(t, strlen(t), sec, nsec) : -1;
}

typedef struct ready_scan {
  const char *needle;
  int seen;
} ready_scan;

static int scan_ready(void *ud, int stream, const char *data, size_t len) {
  ready_scan *r = ud;
  if (stream == 1 && memmem(data, len, r->needle, strlen(r->needle))) r->seen = 1;
  return 0;
}

/* A fresh start takes a few ms. */
int egress_wait_ready(sm_engine *e, const char *id, const char *event, sm_error *err) {
  char needle[64];
  snprintf(needle, sizeof needle, "\"event\":\"%s\"", event);
  for (int waited = 0; waited < READY_WAIT_MS; waited += 20) {
    ready_scan r = {needle, 0};
    sm_error lerr = SM_ERROR_INIT;
    if (sm_engine_container_logs(e, id, 0, 0, scan_ready, &r, &lerr) == 0 && r.seen) return 0;
    json_object *info = NULL;
    if (sm_engine_container_inspect(e, id, &info, &lerr) == 0) {
      json_object *st = NULL, *running = NULL;
      int up = json_object_object_get_ex(info, "State", &st) && json_object_object_get_ex(st, "Running", &running) &&
               json_object_get_boolean(running);
      json_object_put(info);
      if (!up) return sm_error_set(err, SM_ESANDBOX, "%.12s stopped at start (docker logs %.12s)", id, id);
    }
    common_sleep_ms(20);
  }
  return sm_error_set(err, SM_ETIMEOUT, "%.12s did not say it was ready within %d s", id, READY_WAIT_MS / 1000);
}
