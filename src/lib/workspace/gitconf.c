/* Does a git configuration file name a command? A copy out refuses a file
 * named `config` (or `config.worktree`) that does (docs/workspaces.md, "Git
 * directories"): git reads that name as the configuration of a repository
 * wherever a repository is found, and a tool could make one around it
 * later.
 *
 * The text is read as git's own parser reads it (config.c in git: sections
 * `[name]`, `[name "sub"]` and `[name.sub]`, keys of letters, digits and
 * `-`, values with quotes, escapes and backslash-newline continuations,
 * `#` and `;` comments, CRLF line ends, a UTF-8 byte order mark). Where git
 * would stop at a line it cannot parse, this scan goes on at the next line
 * (git refuses such a file, so what follows can only add refusals): no
 * reading of the text can hide a key that git would see.
 *
 * What names a command, or leads git to other code or another repository:
 * every `core.*` key but a list of plain settings; aliases, includes,
 * pagers, hooks, credential helpers, filters, diff and merge tools,
 * browsers, protocols, URL rewrites, gpg; any key named like a command
 * (`command`, `cmd`, `textconv`, `driver`, `program`, `editor`, `path`,
 * `update`...); and any value that starts with `ext::` or `fd::` (remote
 * transports that run programs). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/io.h"
#include "workspace/ws.h"

#define GC_SCAN_MAX ((int64_t)16 << 20) /* past this, a "config" counts as naming commands */
#define GC_NAME_MAX 1024
#define GC_HEAD 8

typedef struct gc_reader {
  int fd;                     /* -1: the text is in mem */
  const unsigned char *mem;
  size_t pos, len;
  unsigned char buf[16384];
  int64_t total;
  int eof, failed, pushed, push_c;
  int last;                   /* the last character next_char gave */
} gc_reader;

typedef struct gc_scan {
  gc_reader r;
  char section[GC_NAME_MAX + 1];
  size_t section_len;
  int runs;                   /* something names a command */
} gc_scan;

static int raw_char(gc_reader *r) {
  if (r->pushed) {
    r->pushed = 0;
    return r->push_c;
  }
  if (r->pos == r->len) {
    if (r->fd < 0) return -1;
    ssize_t n = common_read_retry(r->fd, r->buf, sizeof r->buf);
    if (n < 0) r->failed = 1;
    if (n <= 0) return -1;
    r->pos = 0;
    r->len = (size_t)n;
  }
  const unsigned char *b = r->fd < 0 ? r->mem : r->buf;
  if (++r->total > GC_SCAN_MAX) {
    r->failed = 1;
    return -1;
  }
  return b[r->pos++];
}

/* As git's get_next_char: CRLF reads as LF, the end as LF (eof set). */
static int next_char_of(gc_reader *r) {
  int c = raw_char(r);
  if (c == '\r') {
    int d = raw_char(r);
    if (d == '\n') return '\n';
    if (d >= 0) {
      r->pushed = 1;
      r->push_c = d;
    }
    return '\r';
  }
  if (c < 0) {
    r->eof = 1;
    return '\n';
  }
  return c;
}

static int next_char(gc_reader *r) { return r->last = next_char_of(r); }

/* git's sane_ctype: ASCII only. */
static int gc_space(int c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
static int gc_alpha(int c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
static int gc_keychar(int c) { return gc_alpha(c) || (c >= '0' && c <= '9') || c == '-'; }
static int gc_lower(int c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

static int in_list(const char *s, const char *const *list) {
  for (; *list; list++)
    if (strcmp(s, *list) == 0) return 1;
  return 0;
}

/* core.* keys that only set how git stores and compares files. */
static const char *const core_plain[] = {
    "repositoryformatversion", "filemode", "bare", "logallrefupdates", "ignorecase",
    "precomposeunicode", "symlinks", "autocrlf", "eol", "safecrlf", "quotepath", "compression",
    "loosecompression", "untrackedcache", "splitindex", "preloadindex", "checkstat", "trustctime",
    "sharedrepository", "abbrev", "warnambiguousrefs", "whitespace", "commentchar",
    "commentstring", "fscache", "longpaths", "multipackindex", "commitgraph", "packedrefstimeout",
    "filesreflocktimeout", "deltabasecachelimit", "bigfilethreshold", "packedgitwindowsize",
    "packedgitlimit", "fsync", "fsyncmethod", "fsyncobjectfiles", "createobject", "notesref",
    "sparsecheckout", "sparsecheckoutcone", "protecthfs", "protectntfs",
    "checkroundtripencoding", "maxtreedepth", NULL};

/* Sections whose keys name programs, other files of configuration, or
 * other places to fetch from. */
static const char *const command_sections[] = {
    "alias", "include", "includeif", "pager", "hook", "protocol", "credential", "filter",
    "difftool", "mergetool", "guitool", "browser", "man", "sendemail", "imap", "web",
    "instaweb", "uploadpack", "url", "gpg", NULL};

/* Key names that name a program (or a file or folder git takes code or
 * configuration from) in whatever section they are. */
static const char *const command_keys[] = {
    "command", "cmd", "textconv", "driver", "clean", "smudge", "process", "helper", "program",
    "editor", "pager", "external", "sshcommand", "receivepack", "uploadpack", "tunnel",
    "sendmailcmd", "smtpserver", "difffilter", "askpass", "hookspath", "fsmonitor", "gitproxy",
    "path", "update", "packobjectshook", "alternaterefscommand", "defaultkeycommand", "tool",
    "worktree", "insteadof", "pushinsteadof", "attributesfile", "templatedir", NULL};

static void classify(gc_scan *s, const char *key, const char *value_head) {
  char first[GC_NAME_MAX + 1];
  size_t n = strcspn(s->section, ".");
  memcpy(first, s->section, n);
  first[n] = '\0';
  if (strcmp(first, "core") == 0 && !in_list(key, core_plain)) s->runs = 1;
  if (in_list(first, command_sections) || in_list(key, command_keys)) s->runs = 1;
  if (value_head && (strncmp(value_head, "ext::", 5) == 0 || strncmp(value_head, "fd::", 4) == 0))
    s->runs = 1;
}

/* After '[': "name]", "name.sub]" or 'name "sub"]'. 0, or -1 as git's
 * error. A name longer than we keep counts as naming commands. */
static int section_header(gc_scan *s) {
  gc_reader *r = &s->r;
  s->section_len = 0;
  int c;
  for (;;) {
    c = next_char(r);
    if (r->eof) return -1;
    if (c == ']') goto done;
    if (gc_space(c)) break;
    if (!gc_keychar(c) && c != '.') return -1;
    if (s->section_len < GC_NAME_MAX) s->section[s->section_len++] = (char)gc_lower(c);
    else s->runs = 1;
  }
  do {
    if (c == '\n') return -1;
    c = next_char(r);
  } while (gc_space(c));
  if (c != '"') return -1;
  if (s->section_len < GC_NAME_MAX) s->section[s->section_len++] = '.';
  for (;;) {
    c = next_char(r);
    if (c == '\n') return -1;
    if (c == '"') break;
    if (c == '\\') {
      c = next_char(r);
      if (c == '\n') return -1;
    }
    if (s->section_len < GC_NAME_MAX) s->section[s->section_len++] = (char)gc_lower(c);
    else s->runs = 1;
  }
  if (next_char(r) != ']') return -1;
done:
  s->section[s->section_len] = '\0';
  return s->section_len > 0 ? 0 : -1;
}

/* After '=': the value up to its line's end, as git's parse_value; its
 * first bytes into head. -1 as git's error. */
static int value(gc_scan *s, char head[GC_HEAD + 1]) {
  gc_reader *r = &s->r;
  int quote = 0, comment = 0;
  size_t len = 0, spaces = 0, total = 0;
  for (;;) {
    int c = next_char(r);
    if (c == '\n') {
      head[len] = '\0';
      return quote ? -1 : 0;
    }
    if (comment) continue;
    if (gc_space(c) && !quote) {
      if (total) spaces++;
      continue;
    }
    if (!quote && (c == ';' || c == '#')) {
      comment = 1;
      continue;
    }
    if (c == '\\') {
      c = next_char(r);
      if (c == '\n') continue;
      if (c == 't') c = '\t';
      else if (c == 'b') c = '\b';
      else if (c == 'n') c = '\n';
      else if (c != '\\' && c != '"') return -1;
    } else if (c == '"') {
      quote = !quote;
      continue;
    }
    for (; spaces; spaces--, total++)
      if (len > 0 && len < GC_HEAD) head[len++] = ' ';
    /* The head is what a value starts with once blanks are skipped, even
     * quoted ones (a URL is taken with them trimmed). */
    if (len < GC_HEAD && !(len == 0 && (c == ' ' || c == '\t'))) head[len++] = (char)c;
    total++;
  }
}

/* A key starting with c: its name, then "= value" or the line's end. */
static int entry(gc_scan *s, int c) {
  gc_reader *r = &s->r;
  char key[GC_NAME_MAX + 1];
  size_t n = 0;
  key[n++] = (char)gc_lower(c);
  for (;;) {
    c = next_char(r);
    if (r->eof || !gc_keychar(c)) break;
    if (n < GC_NAME_MAX) key[n++] = (char)gc_lower(c);
    else s->runs = 1;
  }
  key[n] = '\0';
  while (c == ' ' || c == '\t') c = next_char(r);
  char head[GC_HEAD + 1] = "";
  if (c != '\n') {
    if (c != '=') {
      classify(s, key, NULL);
      return -1;
    }
    if (value(s, head) != 0) {
      classify(s, key, NULL);
      return -1;
    }
  }
  classify(s, key, head);
  return 0;
}

/* After a line git would not parse: on at the next line. */
static void skip_line(gc_reader *r) {
  while (r->last != '\n') next_char(r);
}

static int scan(gc_scan *s) {
  gc_reader *r = &s->r;
  static const unsigned char bom[] = {0xef, 0xbb, 0xbf};
  size_t bom_at = 0;
  int comment = 0;
  for (;;) {
    int c = next_char(r);
    if (bom_at < 3 && !r->eof && c == bom[bom_at] && r->total == (int64_t)bom_at + 1) {
      bom_at++;
      continue;
    }
    bom_at = 3;
    if (c == '\n') {
      if (r->eof) break;
      comment = 0;
      continue;
    }
    if (comment || gc_space(c)) continue;
    if (c == '#' || c == ';') {
      comment = 1;
      continue;
    }
    int bad;
    if (c == '[') {
      bad = section_header(s) != 0;
      if (bad) s->section[s->section_len] = '\0';
    } else {
      bad = !gc_alpha(c) || entry(s, c) != 0;
    }
    if (bad) skip_line(r);
  }
  /* A file that could not be read to its end may hold anything. */
  return s->runs || r->failed;
}

int workspace_gitconf_runs_text(const char *data, size_t len) {
  gc_scan *s = calloc(1, sizeof *s);
  if (s == NULL) return 1;
  s->r.fd = -1;
  s->r.mem = (const unsigned char *)data;
  s->r.len = len;
  int runs = scan(s);
  free(s);
  return runs;
}

int workspace_gitconf_runs_fd(int fd) {
  gc_scan *s = calloc(1, sizeof *s);
  if (s == NULL) return 1;
  s->r.fd = fd;
  if (lseek(fd, 0, SEEK_SET) != 0) s->r.failed = 1;
  int runs = s->r.failed ? 1 : scan(s);
  free(s);
  return runs;
}
