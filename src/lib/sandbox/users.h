/* Internal to src/lib/sandbox: a named user of an image ("app", "app:staff")
 * as numbers, read from the image's /etc/passwd and /etc/group. */
#ifndef SANDMAN_SANDBOX_USERS_H
#define SANDMAN_SANDBOX_USERS_H

#include <sandman/engine.h>
#include <sandman/error.h>

/* spec is "user" or "user:group" (names or numbers). A container of image
 * is created (never started; labelled for instance, mode "lookup"), the
 * files are read out of it, and it is removed. SM_ESANDBOX when the user or
 * group does not exist in the image. */
int sandbox_image_user(sm_engine *e, const char *instance, const char *image, const char *spec,
                       int *uid, int *gid, sm_error *err);

#endif
