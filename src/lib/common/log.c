/* Log lines go to the handler the application installed, never to stdio.
 * The formatters and the one escaping function they share live here too, so
 * that every program using the library writes lines nothing can forge. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>

#include <sandman/error.h>
#include <sandman/log.h>

static sm_log_handler g_handler;
static sm_log_record_handler g_record_handler;
static void *g_userdata;
static sm_log_level g_min_level = SM_LOG_INFO;
static _Thread_local char t_request_id[64];

#define LINE_MAX_BYTES 8192

void sm_log_set_handler(sm_log_handler handler, void *userdata) {
  g_handler = handler;
  g_record_handler = NULL;
  g_userdata = userdata;
}

void sm_log_set_record_handler(sm_log_record_handler handler, void *userdata) {
  g_record_handler = handler;
  g_handler = NULL;
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

/* ---- escaping ---- */

/* Length of the UTF-8 sequence at s (n bytes left) and its code point, or
 * 0 when it is not well-formed (overlong, surrogate, beyond U+10FFFF). */
static size_t utf8_decode(const unsigned char *s, size_t n, unsigned *cp) {
  unsigned c = s[0];
  size_t len;
  unsigned min;
  if (c < 0x80) {
    *cp = c;
    return 1;
  } else if ((c & 0xe0) == 0xc0) {
    len = 2, min = 0x80, c &= 0x1f;
  } else if ((c & 0xf0) == 0xe0) {
    len = 3, min = 0x800, c &= 0x0f;
  } else if ((c & 0xf8) == 0xf0) {
    len = 4, min = 0x10000, c &= 0x07;
  } else {
    return 0;
  }
  if (n < len) return 0;
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xc0) != 0x80) return 0;
    c = (c << 6) | (s[i] & 0x3f);
  }
  if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) return 0;
  *cp = c;
  return len;
}

/* Code points that must not reach a log line raw: controls, line and
 * paragraph separators, and the bidirectional controls that reorder how a
 * line reads on a terminal. */
static int must_escape(unsigned cp) {
  return cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0x9f) || cp == 0x2028 ||
         cp == 0x2029 || cp == 0x200e || cp == 0x200f || (cp >= 0x202a && cp <= 0x202e) ||
         (cp >= 0x2066 && cp <= 0x2069);
}

/* sm_log_escape, also saying how much of in was consumed. */
static size_t escape(char *out, size_t len, const char *in, size_t in_len, unsigned flags,
                     size_t *consumed) {
  size_t o = 0, i = 0;
  *consumed = 0;
  if (len == 0) return 0;
  const unsigned char *s = (const unsigned char *)in;
  while (i < in_len) {
    char piece[8];
    size_t plen;
    unsigned cp = 0;
    size_t n = utf8_decode(s + i, in_len - i, &cp);
    if (n == 0) {
      memcpy(piece, "\\ufffd", 6);
      plen = 6;
      n = 1;
    } else if ((cp == '"' || cp == '\\') && (flags & SM_LOG_ESCAPE_QUOTES)) {
      piece[0] = '\\';
      piece[1] = (char)cp;
      plen = 2;
    } else if (cp == '\n' || cp == '\r' || cp == '\t') {
      piece[0] = '\\';
      piece[1] = cp == '\n' ? 'n' : cp == '\r' ? 'r' : 't';
      plen = 2;
    } else if (must_escape(cp)) {
      snprintf(piece, sizeof piece, "\\u%04x", cp);
      plen = 6;
    } else {
      memcpy(piece, s + i, n);
      plen = n;
    }
    if (o + plen > len - 1) break;
    memcpy(out + o, piece, plen);
    o += plen;
    i += n;
  }
  out[o] = '\0';
  *consumed = i;
  return o;
}

size_t sm_log_escape(char *out, size_t len, const char *in, size_t in_len, unsigned flags) {
  size_t consumed;
  return escape(out, len, in, in_len, flags, &consumed);
}

/* ---- formatting ---- */

typedef struct line {
  char *buf;
  size_t len, pos, limit; /* limit: bytes usable before the closing reserve */
  int full;
} line;

static void put(line *l, const char *s, size_t n) {
  if (l->full || l->pos + n > l->limit) {
    l->full = 1;
    return;
  }
  memcpy(l->buf + l->pos, s, n);
  l->pos += n;
  l->buf[l->pos] = '\0';
}

static void puts_(line *l, const char *s) { put(l, s, strlen(s)); }

/* Escaped value; with partial set, as much as fits (a message), else all
 * or nothing. */
static void put_escaped(line *l, const char *s, int partial, unsigned flags) {
  if (l->full) return;
  size_t in_len = strlen(s), consumed;
  size_t n = escape(l->buf + l->pos, l->limit - l->pos + 1, s, in_len, flags, &consumed);
  if (consumed < in_len) {
    l->full = 1;
    if (!partial) {
      l->buf[l->pos] = '\0';
      return;
    }
  }
  l->pos += n;
}

static void format_time(double t, char *out, size_t len) {
  time_t sec = (time_t)t;
  int ms = (int)((t - (double)sec) * 1000.0);
  if (ms < 0) ms = 0;
  if (ms > 999) ms = 999;
  struct tm tm;
  gmtime_r(&sec, &tm);
  char base[32];
  strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(out, len, "%s.%03dZ", base, ms);
}

static void format_number(double d, char *out, size_t len) {
  if (!isfinite(d)) snprintf(out, len, "null");
  else if (d == (double)(int64_t)d && fabs(d) < 1e15) snprintf(out, len, "%lld", (long long)d);
  else snprintf(out, len, "%.3f", d);
  /* "3.140" -> "3.14" */
  char *dot = strchr(out, '.');
  if (dot) {
    char *end = out + strlen(out);
    while (end > dot + 1 && end[-1] == '0') *--end = '\0';
  }
}

/* A text value is written bare when it is plain, else quoted. */
static int plain_value(const char *s) {
  if (*s == '\0') return 0;
  for (const unsigned char *p = (const unsigned char *)s; *p; p++)
    if (*p <= ' ' || *p == '"' || *p == '=' || *p == '\\' || *p >= 0x7f) return 0;
  return 1;
}

static void text_field(line *l, const char *key, const sm_log_field *f) {
  char num[64];
  put(l, " ", 1);
  put_escaped(l, key, 0, SM_LOG_ESCAPE_QUOTES);
  put(l, "=", 1);
  switch (f ? f->type : SM_LOG_FIELD_STR) {
    case SM_LOG_FIELD_STR: {
      const char *s = f ? f->s : "";
      if (plain_value(s)) {
        put_escaped(l, s, 0, SM_LOG_ESCAPE_QUOTES);
      } else {
        put(l, "\"", 1);
        put_escaped(l, s, 0, SM_LOG_ESCAPE_QUOTES);
        put(l, "\"", 1);
      }
      return;
    }
    case SM_LOG_FIELD_INT: snprintf(num, sizeof num, "%lld", (long long)f->i); break;
    case SM_LOG_FIELD_NUM: format_number(f->d, num, sizeof num); break;
    case SM_LOG_FIELD_BOOL: snprintf(num, sizeof num, "%s", f->i ? "true" : "false"); break;
  }
  puts_(l, num);
}

size_t sm_log_format_text(const sm_log_record *r, char *out, size_t len) {
  if (len < 8) {
    if (len) out[0] = '\0';
    return 0;
  }
  line l = {out, len, 0, len - 5, 0};
  out[0] = '\0';
  char when[40];
  format_time(r->time, when, sizeof when);
  puts_(&l, when);
  put(&l, " ", 1);
  char upper[8];
  const char *name = sm_log_level_name(r->level);
  size_t i = 0;
  for (; name[i] && i < sizeof upper - 1; i++) upper[i] = (char)(name[i] - 32);
  upper[i] = '\0';
  puts_(&l, upper);
  if (r->request_id) {
    put(&l, " [", 2);
    put_escaped(&l, r->request_id, 0, SM_LOG_ESCAPE_QUOTES);
    put(&l, "]", 1);
  }
  put(&l, " ", 1);
  put_escaped(&l, r->message ? r->message : "", 1, 0);
  if (r->event) {
    sm_log_field ev = SM_LOG_STR("event", r->event);
    text_field(&l, "event", &ev);
  }
  for (size_t k = 0; k < r->n_fields; k++) {
    const sm_log_field *f = &r->fields[k];
    if (f->type == SM_LOG_FIELD_STR && f->s == NULL) continue;
    text_field(&l, f->key, f);
  }
  if (l.full) {
    memcpy(out + l.pos, "...", 4);
    l.pos += 3;
  }
  return l.pos;
}

static void json_pair(line *l, const char *key, const sm_log_field *f) {
  if (l->full) return;
  size_t mark = l->pos;
  char num[64];
  put(l, ",\"", 2);
  put_escaped(l, key, 0, SM_LOG_ESCAPE_QUOTES);
  put(l, "\":", 2);
  switch (f->type) {
    case SM_LOG_FIELD_STR:
      put(l, "\"", 1);
      put_escaped(l, f->s, 0, SM_LOG_ESCAPE_QUOTES);
      put(l, "\"", 1);
      break;
    case SM_LOG_FIELD_INT:
      snprintf(num, sizeof num, "%lld", (long long)f->i);
      puts_(l, num);
      break;
    case SM_LOG_FIELD_NUM:
      format_number(f->d, num, sizeof num);
      puts_(l, num);
      break;
    case SM_LOG_FIELD_BOOL: puts_(l, f->i ? "true" : "false"); break;
  }
  if (l->full) { /* the pair did not fit: take it back whole */
    l->pos = mark;
    l->buf[mark] = '\0';
  }
}

size_t sm_log_format_json(const sm_log_record *r, char *out, size_t len) {
  static const char closing[] = ",\"truncated\":true}";
  if (len < 96) {
    if (len) out[0] = '\0';
    return 0;
  }
  line l = {out, len, 0, len - sizeof closing - 1, 0};
  char when[40];
  format_time(r->time, when, sizeof when);
  puts_(&l, "{\"time\":\"");
  puts_(&l, when);
  puts_(&l, "\",\"level\":\"");
  puts_(&l, sm_log_level_name(r->level));
  put(&l, "\"", 1);
  if (r->request_id) json_pair(&l, "request_id", &SM_LOG_STR("request_id", r->request_id));
  if (r->event) json_pair(&l, "event", &SM_LOG_STR("event", r->event));
  /* The message may be cut (it stays a valid string); fields are whole or left out. */
  if (!l.full) {
    put(&l, ",\"msg\":\"", 8);
    put_escaped(&l, r->message ? r->message : "", 1, SM_LOG_ESCAPE_QUOTES);
    /* The limit keeps room for this quote and the closing. */
    out[l.pos++] = '"';
    out[l.pos] = '\0';
  }
  for (size_t k = 0; k < r->n_fields && !l.full; k++) {
    const sm_log_field *f = &r->fields[k];
    if (f->type == SM_LOG_FIELD_STR && f->s == NULL) continue;
    json_pair(&l, f->key, f);
  }
  if (l.full) {
    memcpy(out + l.pos, closing, sizeof closing);
    l.pos += sizeof closing - 1;
  } else {
    out[l.pos++] = '}';
    out[l.pos] = '\0';
  }
  return l.pos;
}

/* ---- emitting ---- */

static double now_epoch(void) {
  struct timeval tv;
  gettimeofday(&tv, NULL);
  return (double)tv.tv_sec + tv.tv_usec / 1e6;
}

static void emit(sm_log_level level, const char *event, const sm_log_field *fields, size_t n,
                 const char *fmt, va_list ap) {
  char message[2048];
  vsnprintf(message, sizeof message, fmt, ap);
  sm_log_record rec = {level, now_epoch(), sm_log_request_id(), event, message, fields, n};
  if (g_record_handler) {
    g_record_handler(&rec, g_userdata);
    return;
  }
  if (g_handler == NULL) return;
  /* A plain handler gets the escaped message and the fields as text; it
   * adds the time, level and request id itself. */
  char whole[LINE_MAX_BYTES];
  rec.request_id = NULL;
  sm_log_format_text(&rec, whole, sizeof whole);
  const char *p = strchr(whole, ' ');
  p = p ? strchr(p + 1, ' ') : NULL;
  g_handler(level, sm_log_request_id(), p ? p + 1 : whole, g_userdata);
}

void sm_log(sm_log_level level, const char *fmt, ...) {
  if ((g_handler == NULL && g_record_handler == NULL) || level < g_min_level) return;
  va_list ap;
  va_start(ap, fmt);
  emit(level, NULL, NULL, 0, fmt, ap);
  va_end(ap);
}

void sm_log_event(sm_log_level level, const char *event, const sm_log_field *fields,
                  size_t n_fields, const char *fmt, ...) {
  if ((g_handler == NULL && g_record_handler == NULL) || level < g_min_level) return;
  va_list ap;
  va_start(ap, fmt);
  emit(level, event, fields, n_fields, fmt, ap);
  va_end(ap);
}
