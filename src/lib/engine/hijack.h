/* Exec start over the upgraded connection (hijack.c). */
#ifndef SANDMAN_ENGINE_HIJACK_H
#define SANDMAN_ENGINE_HIJACK_H

#include <sandman/engine.h>

int engine_exec_hijack(sm_engine *e, const char *exec_id, const sm_exec_io *io,
                       sm_error *err);

#endif
