/* Log lines go to the handler the application installed, never to stdio. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <sandman/error.h>
#include <sandman/log.h>

static sm_log_handler g_handler;
static void *g_userdata;
static sm_log_level g_min_level = SM_LOG_INFO;
static _Thread_local char t_request_id[64];

void sm_log_set_handler(sm_log_handler handler, void *userdata) {
  g_handler = handler;
  g_userdata = userdata;
}

void sm_log_set_level(sm_log_level min_level) { g_min_level = min_level; }
sm_log_level sm_log_get_level(void) { return g_min_level; }

static const char *const level_names[] = {"debug", "info", "warn", "error"};

const char *sm_log_level_name(sm_log_level level) {
  if ((int)level < 0 || level > SM_LOG_ERROR) return "info";
  return level_names[level];
}

int sm_log_level_parse(const char *s, sm_log_level *out) {
  if (s == NULL) return SM_EINVAL;
  for (int i = 0; i <= SM_LOG_ERROR; i++) {
    if (strcasecmp(s, level_names[i]) == 0) {
      *out = (sm_log_level)i;
      return 0;
    }
  }
  if (strcasecmp(s, "warning") == 0) {
    *out = SM_LOG_WARN;
    return 0;
  }
  return SM_EINVAL;
}

void sm_log_set_request_id(const char *id) {
  if (id == NULL) {
    t_request_id[0] = '\0';
  } else {
    snprintf(t_request_id, sizeof t_request_id, "%s", id);
  }
}

const char *sm_log_request_id(void) { return t_request_id[0] ? t_request_id : NULL; }

void sm_log(sm_log_level level, const char *fmt, ...) {
  if (g_handler == NULL || level < g_min_level) return;
  char line[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  g_handler(level, sm_log_request_id(), line, g_userdata);
}
