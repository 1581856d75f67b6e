/* Named users of an image (users.h). The engine hands a file of a
 * container as a tar stream: libarchive reads it, and the C library's own
 * parsers (fgetpwent_r, fgetgrent_r) read the passwd and group text. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* fgetpwent_r, fgetgrent_r, fmemopen */
#endif
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <archive.h>
#include <archive_entry.h>
#include <json-c/json.h>

#include "common/buf.h"
#include "common/cleanup.h"
#include "sandbox/spec.h"
#include "sandbox/users.h"

#define PASSWD_CAP (256 * 1024)

static int all_digits(const char *s) {
  if (*s == '\0') return 0;
  for (; *s; s++)
    if (*s < '0' || *s > '9') return 0;
  return 1;
}

static int buf_writer(void *ud, const char *data, size_t len) {
  common_buf *b = ud;
  return common_buf_append(b, data, len) == 0 ? 0 : SM_ETOOBIG;
}

/* The first file of a tar stream in memory, appended to out. */
static int untar_first(const common_buf *tar, const char *path, common_buf *out, sm_error *err) {
  cleanup_archive struct archive *a = archive_read_new();
  if (a == NULL) return sm_error_set(err, SM_ENOMEM, NULL);
  archive_read_support_format_tar(a);
  struct archive_entry *entry = NULL;
  if (archive_read_open_memory(a, tar->data, tar->len) != ARCHIVE_OK ||
      archive_read_next_header(a, &entry) != ARCHIVE_OK)
    return sm_error_set(err, SM_EPROTOCOL, "reading %s from the image: %s", path,
                        archive_error_string(a) ? archive_error_string(a) : "bad archive");
  char chunk[8192];
  for (;;) {
    la_ssize_t n = archive_read_data(a, chunk, sizeof chunk);
    if (n == 0) return 0;
    if (n < 0)
      return sm_error_set(err, SM_EPROTOCOL, "reading %s from the image: %s", path,
                          archive_error_string(a) ? archive_error_string(a) : "bad archive");
    if (common_buf_append(out, chunk, (size_t)n) != 0)
      return sm_error_set(err, SM_ETOOBIG, "%s in the image is too large", path);
  }
}

/* Reads one file from a created (never started) container as text. */
static int read_image_file(sm_engine *e, const char *cid, const char *path, common_buf *out,
                           sm_error *err) {
  common_buf tar;
  common_buf_init(&tar, PASSWD_CAP);
  int rc = sm_engine_archive_get(e, cid, path, buf_writer, &tar, err);
  if (rc == 0) rc = untar_first(&tar, path, out, err);
  common_buf_dispose(&tar);
  return rc;
}

/* uid and gid of user `name` in a passwd text; -1 when it is not there. */
static int passwd_lookup(const common_buf *text, const char *name, int *uid, int *gid) {
  FILE *f = fmemopen(text->data, text->len, "r");
  if (f == NULL) return -1;
  struct passwd pw, *res = NULL;
  char line[4096];
  int found = -1;
  while (fgetpwent_r(f, &pw, line, sizeof line, &res) == 0 && res) {
    if (strcmp(pw.pw_name, name) == 0) {
      *uid = (int)pw.pw_uid;
      *gid = (int)pw.pw_gid;
      found = 0;
      break;
    }
  }
  fclose(f);
  return found;
}

/* gid of group `name` in a group text; -1 when it is not there. */
static int group_lookup(const common_buf *text, const char *name, int *gid) {
  FILE *f = fmemopen(text->data, text->len, "r");
  if (f == NULL) return -1;
  struct group gr, *res = NULL;
  char line[16384];
  int found = -1;
  while (fgetgrent_r(f, &gr, line, sizeof line, &res) == 0 && res) {
    if (strcmp(gr.gr_name, name) == 0) {
      *gid = (int)gr.gr_gid;
      found = 0;
      break;
    }
  }
  fclose(f);
  return found;
}

/* A container of image to read files from: never started. */
static int lookup_container(sm_engine *e, const char *instance, const char *image, char *cid,
                            sm_error *err) {
  json_object *cfg = json_object_new_object();
  json_object_object_add(cfg, "Image", json_object_new_string(image));
  json_object *ep = json_object_new_array();
  json_object_array_add(ep, json_object_new_string("/bin/true"));
  json_object_object_add(cfg, "Entrypoint", ep);
  json_object *labels = json_object_new_object();
  json_object_object_add(labels, SM_LABEL_PREFIX "managed", json_object_new_string("true"));
  json_object_object_add(labels, SM_LABEL_PREFIX "instance", json_object_new_string(instance));
  json_object_object_add(labels, SM_LABEL_PREFIX "mode", json_object_new_string("lookup"));
  json_object_object_add(cfg, "Labels", labels);
  int rc = sm_engine_container_create(e, NULL, cfg, cid, NULL, err);
  json_object_put(cfg);
  return rc;
}

int sandbox_image_user(sm_engine *e, const char *instance, const char *image, const char *spec,
                       int *uid, int *gid, sm_error *err) {
  char user[128], group[128] = "";
  snprintf(user, sizeof user, "%s", spec);
  char *colon = strchr(user, ':');
  if (colon) {
    snprintf(group, sizeof group, "%s", colon + 1);
    *colon = '\0';
  }
  char cid[SM_ENGINE_ID_MAX];
  int rc = lookup_container(e, instance, image, cid, err);
  if (rc) return sm_error_wrap(err, "looking up user '%s' in image %s", spec, image);
  common_buf text;
  common_buf_init(&text, PASSWD_CAP);
  int g = -1;
  rc = read_image_file(e, cid, "/etc/passwd", &text, err);
  if (rc == 0 && all_digits(user)) *uid = (int)strtol(user, NULL, 10);
  else if (rc == 0 && passwd_lookup(&text, user, uid, &g) != 0)
    rc = sm_error_set(err, SM_ESANDBOX, "user '%s' does not exist in image %s", user, image);
  if (rc == 0) *gid = g >= 0 ? g : *uid;
  if (rc == 0 && group[0]) {
    if (all_digits(group)) {
      *gid = (int)strtol(group, NULL, 10);
    } else {
      common_buf_reset(&text);
      rc = read_image_file(e, cid, "/etc/group", &text, err);
      if (rc == 0 && group_lookup(&text, group, gid) != 0)
        rc = sm_error_set(err, SM_ESANDBOX, "group '%s' does not exist in image %s", group,
                          image);
    }
  }
  common_buf_dispose(&text);
  sm_error ignore = SM_ERROR_INIT;
  sm_engine_container_remove(e, cid, 1, 1, &ignore);
  return rc;
}
