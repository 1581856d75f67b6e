/* Request paths: escaping, label filters and id checks (path.c). */
#ifndef SANDMAN_ENGINE_PATH_H
#define SANDMAN_ENGINE_PATH_H

#include <stddef.h>

#include <sandman/error.h>

#include "common/buf.h"

/* Appends s percent-encoded; keep lists extra bytes left as they are. */
int engine_url_escape(common_buf *b, const char *s, const char *keep);
/* Appends "filters=<escaped JSON>" for labels ({"label":[...]}). */
int engine_label_filters(common_buf *b, const char *const *labels, size_t n_labels,
                         sm_error *err);
/* Checks an id or name used in a path (non-empty, bounded). */
int engine_check_ref(const char *ref, const char *what, sm_error *err);

/* Appends "<collection><ref, escaped><suffix>" ("/containers/", id,
 * "/json"), after checking ref as engine_check_ref does (named by what);
 * keep as for engine_url_escape; suffix may be NULL. SM_EINVAL when too
 * long ("<what> too long"). */
int engine_ref_path(common_buf *b, const char *collection, const char *ref, const char *keep,
                    const char *suffix, const char *what, sm_error *err);

#endif
