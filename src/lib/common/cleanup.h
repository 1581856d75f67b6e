/* Scope-bound cleanup for locals (as crun's utils.h does), so that error
 * paths cannot leak: `cleanup_free char *s = NULL;`. Every type the library
 * owns through a local has one. steal_pointer(&p) hands the value on, with
 * p's own type, and leaves NULL behind. Internal to the library. */
#ifndef SANDMAN_COMMON_CLEANUP_H
#define SANDMAN_COMMON_CLEANUP_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <archive.h>
#include <curl/curl.h>
#include <json-c/json.h>

#include "common/buf.h"
#include "common/strv.h"

static inline void common_cleanup_freep(void *p) {
  void **pp = (void **)p;
  free(*pp);
}
static inline void common_cleanup_fdp(int *fd) {
  if (*fd >= 0) close(*fd);
}
static inline void common_cleanup_filep(FILE **f) {
  if (*f) fclose(*f);
}
static inline void common_cleanup_jsonp(json_object **j) {
  if (*j) json_object_put(*j);
}
static inline void common_cleanup_dirp(DIR **d) {
  if (*d) closedir(*d);
}
static inline void common_cleanup_curlp(CURL **c) {
  if (*c) curl_easy_cleanup(*c);
}
static inline void common_cleanup_slistp(struct curl_slist **l) {
  if (*l) curl_slist_free_all(*l);
}
/* archive_free dispatches to the reader's or the writer's own free. */
static inline void common_cleanup_archivep(struct archive **a) {
  if (*a) archive_free(*a);
}

#define cleanup_free __attribute__((cleanup(common_cleanup_freep)))
#define cleanup_fd __attribute__((cleanup(common_cleanup_fdp)))
#define cleanup_file __attribute__((cleanup(common_cleanup_filep)))
#define cleanup_json __attribute__((cleanup(common_cleanup_jsonp)))
#define cleanup_dir __attribute__((cleanup(common_cleanup_dirp)))
#define cleanup_curl __attribute__((cleanup(common_cleanup_curlp)))
#define cleanup_slist __attribute__((cleanup(common_cleanup_slistp)))
#define cleanup_archive __attribute__((cleanup(common_cleanup_archivep)))
/* Stack structs: their contents are disposed (common_buf_dispose, common_strv_dispose). */
#define cleanup_buf __attribute__((cleanup(common_buf_dispose)))
#define cleanup_strv __attribute__((cleanup(common_strv_dispose)))

/* Type-checked: the result has the pointer's own type, so assigning it to
 * another type is the compiler's warning, not a silent void * conversion. */
#define steal_pointer(pp)                \
  __extension__({                        \
    __typeof__(*(pp)) sm_stolen_ = *(pp); \
    *(pp) = NULL;                        \
    sm_stolen_;                          \
  })

/* steal_pointer for a descriptor (crun's get_and_reset): its value, and -1
 * left behind so that cleanup_fd closes nothing. */
static inline int common_steal_fd(int *fd) {
  int v = *fd;
  *fd = -1;
  return v;
}

#endif
