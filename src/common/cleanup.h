/* Scope-bound cleanup for locals (as crun's utils.h does), so that error
 * paths cannot leak: `cleanup_free char *s = NULL;`. steal_pointer hands the
 * value on and leaves NULL behind. Internal to the library. */
#ifndef SANDMAN_COMMON_CLEANUP_H
#define SANDMAN_COMMON_CLEANUP_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <json-c/json.h>

static inline void sm_cleanup_freep(void *p) {
  void **pp = (void **)p;
  free(*pp);
}
static inline void sm_cleanup_fdp(int *fd) {
  if (*fd >= 0) close(*fd);
}
static inline void sm_cleanup_filep(FILE **f) {
  if (*f) fclose(*f);
}
static inline void sm_cleanup_jsonp(json_object **j) {
  if (*j) json_object_put(*j);
}

#define cleanup_free __attribute__((cleanup(sm_cleanup_freep)))
#define cleanup_fd __attribute__((cleanup(sm_cleanup_fdp)))
#define cleanup_file __attribute__((cleanup(sm_cleanup_filep)))
#define cleanup_json __attribute__((cleanup(sm_cleanup_jsonp)))

static inline void *sm_steal_pointer(void *pp) {
  void **p = (void **)pp;
  void *v = *p;
  *p = NULL;
  return v;
}
#define steal_pointer(pp) sm_steal_pointer(pp)

#endif
