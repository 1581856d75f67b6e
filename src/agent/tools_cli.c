/* sandman-tools: lists, describes and calls the host tools of the sandbox's
 * agent through the host-tool route (HTTP/1.1 over the unix socket
 * SM_ROUTE_SOCKET; docs/host-tools.md "Route protocol"). It is the agent
 * binary under another name (SM_ROUTE_BIN_DIR/sandman-tools links to it),
 * so it uses nothing but libc.
 *
 * Exit codes: 0 ok, 1 the tool failed (is_error, or it timed out),
 * 2 usage (or arguments the tool's schema refused), 3 refused (403, 404,
 * 429), 4 no route in this sandbox or no active call, 5 the route failed. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <sandman/hostroute.h>

#include "agent/json_mini.h"
#include "agent/route.h"
#include "common/io.h"
#include "common/unconst.h"

enum { EXIT_TOOL = 1, EXIT_USAGE = 2, EXIT_REFUSED = 3, EXIT_NO_ROUTE = 4, EXIT_ROUTE = 5 };

#define ANSWER_MAX (SM_ROUTE_RESPONSE_MAX + (64u << 10))

static const char usage_text[] =
    "usage: sandman-tools list [--json]\n"
    "       sandman-tools describe NAME [--json]\n"
    "       sandman-tools call NAME [key=value | key:=JSON]... [--json]\n"
    "\n"
    "The host tools this sandbox's agent may use, through sandman's host-tool route.\n"
    "key=value passes a string (a number or boolean when the tool's schema says so);\n"
    "key:=JSON passes a JSON value as it is. --json prints the route's answer as it is.\n"
    "Exit: 0 ok, 1 the tool failed, 2 usage, 3 refused, 4 no route or no active call,\n"
    "5 the route failed.\n";

typedef struct answer {
  int status;
  char *data;       /* the whole response */
  size_t len;
  const char *body; /* into data */
  size_t body_len;
} answer;

static void answer_dispose(answer *a) { free(a->data); }

/* The route is always at its fixed place: sandman puts no variable of its
 * own in a tool's environment to say where. */
static const char *socket_path(void) { return SM_ROUTE_SOCKET; }

static int no_route(const char *why) {
  fprintf(stderr, "sandman-tools: no host-tool route in this sandbox (%s: %s)\n", socket_path(),
          why);
  return EXIT_NO_ROUTE;
}

/* The status line and where the body starts (Content-Length, else to the
 * end); -1 when it is no HTTP answer. */
static int parse_answer(answer *a) {
  const char *d = a->data, *end = d + a->len;
  if (a->len < 12 || memcmp(d, "HTTP/1.", 7) != 0 || d[8] != ' ') return -1;
  int st = 0;
  for (int i = 9; i < 12; i++) {
    if (d[i] < '0' || d[i] > '9') return -1;
    st = st * 10 + (d[i] - '0');
  }
  const char *blank = NULL;
  for (const char *p = d; p + 3 < end && blank == NULL; p++)
    if (memcmp(p, "\r\n\r\n", 4) == 0) blank = p;
  if (blank == NULL) return -1;
  a->status = st;
  a->body = blank + 4;
  a->body_len = (size_t)(end - a->body);
  for (const char *line = d; line < blank;) {
    const char *eol = memchr(line, '\r', (size_t)(blank + 2 - line));
    if (eol == NULL) break;
    if ((size_t)(eol - line) > 15 && strncasecmp(line, "content-length:", 15) == 0) {
      size_t n = 0;
      const char *v = line + 15;
      while (v < eol && *v == ' ') v++;
      for (; v < eol && *v >= '0' && *v <= '9'; v++) n = n * 10 + (size_t)(*v - '0');
      if (n < a->body_len) a->body_len = n;
    }
    if ((size_t)(eol - line) > 18 && strncasecmp(line, "transfer-encoding:", 18) == 0) return -1;
    line = eol + 2;
  }
  return 0;
}

/* Writes a then b, each piece with our credentials attached (the kernel
 * checks that they are ours): the relay knows who asks by them, and under
 * gVisor, whose own attaching misses what is written before the relay
 * accepted the connection, only so. -1 with errno on failure. */
static int send_with_creds(int fd, const char *a, size_t alen, const char *b, size_t blen) {
  size_t done = 0, total = alen + blen;
  while (done < total) {
    struct iovec iov[2];
    int n = 0;
    /* iovec's base is not const; sendmsg only reads it. */
    if (done < alen) iov[n++] = (struct iovec){(char *)SM_UNCONST(a) + done, alen - done};
    size_t boff = done > alen ? done - alen : 0;
    if (blen > boff) iov[n++] = (struct iovec){(char *)SM_UNCONST(b) + boff, blen - boff};
    union {
      char buf[CMSG_SPACE(sizeof(struct ucred))];
      struct cmsghdr align;
    } ctl;
    memset(&ctl, 0, sizeof ctl);
    struct msghdr m;
    memset(&m, 0, sizeof m);
    m.msg_iov = iov;
    m.msg_iovlen = (size_t)n;
    m.msg_control = ctl.buf;
    m.msg_controllen = sizeof ctl.buf;
    struct cmsghdr *h = CMSG_FIRSTHDR(&m);
    h->cmsg_level = SOL_SOCKET;
    h->cmsg_type = SCM_CREDENTIALS;
    h->cmsg_len = CMSG_LEN(sizeof(struct ucred));
    struct ucred cr = {getpid(), geteuid(), getegid()};
    memcpy(CMSG_DATA(h), &cr, sizeof cr);
    ssize_t w = sendmsg(fd, &m, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    done += (size_t)w;
  }
  return 0;
}

/* One request over the route; 0 with *a filled, or an exit code. */
static int route_request(const char *method, const char *path, const jm_buf *body, answer *a) {
  memset(a, 0, sizeof *a);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return no_route(strerror(errno));
  struct sockaddr_un addr;
  memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  if (strlen(socket_path()) >= sizeof addr.sun_path) {
    close(fd);
    return no_route("path too long");
  }
  memcpy(addr.sun_path, socket_path(), strlen(socket_path()));
  if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
    int e = errno;
    close(fd);
    return no_route(strerror(e));
  }
  char head[1024];
  int n = snprintf(head, sizeof head,
                   "%s %s HTTP/1.1\r\nHost: sandman\r\nAccept: application/json\r\n"
                   "User-Agent: sandman-tools\r\nConnection: close\r\n",
                   method, path);
  if (n < 0 || (size_t)n >= sizeof head - 96) {
    close(fd);
    fprintf(stderr, "sandman-tools: the tool's name is too long\n");
    return EXIT_USAGE;
  }
  if (body)
    n += snprintf(head + n, sizeof head - (size_t)n,
                  "Content-Type: application/json\r\nContent-Length: %zu\r\n", body->len);
  n += snprintf(head + n, sizeof head - (size_t)n, "\r\n");
  if (send_with_creds(fd, head, (size_t)n, body ? body->data : NULL, body ? body->len : 0) != 0) {
    int e = errno;
    close(fd);
    return no_route(strerror(e));
  }
  size_t cap = 0;
  for (;;) {
    if (a->len == cap) {
      if (cap >= ANSWER_MAX) {
        close(fd);
        fprintf(stderr, "sandman-tools: the route's answer is over %lu bytes\n", (unsigned long)ANSWER_MAX);
        return EXIT_ROUTE;
      }
      cap = cap ? cap * 2 : 65536;
      if (cap > ANSWER_MAX) cap = ANSWER_MAX;
      char *d = realloc(a->data, cap + 1);
      if (d == NULL) {
        close(fd);
        fprintf(stderr, "sandman-tools: out of memory\n");
        return EXIT_ROUTE;
      }
      a->data = d;
    }
    ssize_t r = read(fd, a->data + a->len, cap - a->len);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      int e = errno;
      close(fd);
      fprintf(stderr, "sandman-tools: reading the route's answer: %s\n", strerror(e));
      return EXIT_ROUTE;
    }
    if (r == 0) break;
    a->len += (size_t)r;
  }
  close(fd);
  if (a->data) a->data[a->len] = '\0';
  if (a->data == NULL || parse_answer(a) != 0) {
    fprintf(stderr, "sandman-tools: the route gave no HTTP answer\n");
    return EXIT_ROUTE;
  }
  return 0;
}

static void print_body(const answer *a) {
  fwrite(a->body, 1, a->body_len, stdout);
  if (a->body_len == 0 || a->body[a->body_len - 1] != '\n') putchar('\n');
}

static int contains(const char *s, const char *what) { return s && strstr(s, what) != NULL; }

/* A refusal or failure of the route: says why on stderr (the body too with
 * --json) and gives its exit code. */
static int failed_answer(const answer *a, int json) {
  jm_node *doc = agent_json_parse(a->body, a->body_len);
  const char *error = agent_json_get_str(doc, "error"), *reason = agent_json_get_str(doc, "reason"),
             *rule = agent_json_get_str(doc, "rule");
  int code = a->status == 400 ? EXIT_USAGE
             : a->status == 403 || a->status == 404 || a->status == 429 ? EXIT_REFUSED
             : a->status == 504 ? EXIT_TOOL
                                : EXIT_ROUTE;
  if (a->status == 403 && (contains(error, "no active call") || contains(reason, "no active call")))
    code = EXIT_NO_ROUTE;
  if (json) print_body(a);
  fprintf(stderr, "sandman-tools: %s", error ? error : "the route refused the request");
  if (reason && (error == NULL || strcmp(reason, error) != 0)) fprintf(stderr, " (%s)", reason);
  if (rule && *rule) fprintf(stderr, " [rule: %s]", rule);
  fprintf(stderr, " (HTTP %d)\n", a->status);
  agent_json_free(doc);
  return code;
}

/* /v1/tools/NAME with NAME percent-encoded. */
static int tool_path(const char *name, const char *suffix, char *out, size_t cap) {
  static const char hex[] = "0123456789ABCDEF";
  size_t n = (size_t)snprintf(out, cap, "/v1/tools/");
  for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
    if (n + 4 >= cap) return -1;
    if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
        *p == '-' || *p == '_' || *p == '.' || *p == '~') {
      out[n++] = (char)*p;
    } else {
      out[n++] = '%';
      out[n++] = hex[*p >> 4];
      out[n++] = hex[*p & 15];
    }
  }
  int m = snprintf(out + n, cap - n, "%s", suffix);
  return m < 0 || (size_t)m >= cap - n ? -1 : 0;
}

static void first_line(const char *s, int width) {
  size_t n = s ? strcspn(s, "\r\n") : 0;
  if (width > 0) printf("%-*.*s", width, (int)n, s ? s : "");
  else printf("%.*s", (int)n, s ? s : "");
}

static int cmd_list(int json) {
  answer a;
  int rc = route_request("GET", "/v1/tools", NULL, &a);
  if (rc) return rc;
  if (a.status != 200) {
    rc = failed_answer(&a, json);
  } else if (json) {
    print_body(&a);
  } else {
    jm_node *doc = agent_json_parse(a.body, a.body_len);
    const jm_node *tools = doc && doc->type == JM_ARR ? doc : agent_json_get(doc, "tools");
    if (tools == NULL || tools->type != JM_ARR) {
      fprintf(stderr, "sandman-tools: the route's list is not a list of tools\n");
      rc = EXIT_ROUTE;
    } else {
      int width = 4;
      for (const jm_node *t = tools->child; t; t = t->next) {
        const char *name = agent_json_get_str(t, "name");
        int w = name ? (int)strlen(name) : 0;
        if (w > width) width = w > 40 ? 40 : w;
      }
      printf("%-*s  DESCRIPTION\n", width, "NAME");
      for (const jm_node *t = tools->child; t; t = t->next) {
        first_line(agent_json_get_str(t, "name"), width);
        printf("  ");
        first_line(agent_json_get_str(t, "description"), 0);
        putchar('\n');
      }
    }
    agent_json_free(doc);
  }
  answer_dispose(&a);
  return rc;
}

static const jm_node *input_schema(const jm_node *tool) {
  const jm_node *s = agent_json_get(tool, "inputSchema");
  return s ? s : agent_json_get(tool, "input_schema");
}

static void print_tool(const jm_node *tool) {
  printf("%s\n", agent_json_get_str(tool, "name") ? agent_json_get_str(tool, "name") : "?");
  const char *d = agent_json_get_str(tool, "description");
  if (d && *d) printf("  %s\n", d);
  const jm_node *schema = input_schema(tool);
  const jm_node *props = agent_json_get(schema, "properties"),
                *req = agent_json_get(schema, "required");
  if (props == NULL || props->type != JM_OBJ || props->child == NULL) return;
  printf("\nArguments:\n");
  for (const jm_node *p = props->child; p; p = p->next) {
    int required = 0;
    for (const jm_node *r = req && req->type == JM_ARR ? req->child : NULL; r; r = r->next)
      required |= r->type == JM_STR && strcmp(r->str, p->key) == 0;
    const char *type = agent_json_get_str(p, "type"), *pd = agent_json_get_str(p, "description");
    printf("  %s (%s%s)", p->key, type ? type : "any", required ? ", required" : "");
    if (pd && *pd) {
      printf("  ");
      first_line(pd, 0);
    }
    putchar('\n');
  }
}

/* GET /v1/tools/NAME: 0 with *doc (the tool) or an exit code. */
static int describe(const char *name, int json, int print, jm_node **doc) {
  *doc = NULL;
  char path[1024];
  if (tool_path(name, "", path, sizeof path) != 0) {
    fprintf(stderr, "sandman-tools: the tool's name is too long\n");
    return EXIT_USAGE;
  }
  answer a;
  int rc = route_request("GET", path, NULL, &a);
  if (rc) return rc;
  if (a.status != 200) {
    rc = failed_answer(&a, json && print);
  } else {
    *doc = agent_json_parse(a.body, a.body_len);
    if (*doc == NULL || (*doc)->type != JM_OBJ) {
      fprintf(stderr, "sandman-tools: the route's description of '%s' is not JSON\n", name);
      rc = EXIT_ROUTE;
    } else if (print && json) {
      print_body(&a);
    } else if (print) {
      print_tool(*doc);
    }
  }
  answer_dispose(&a);
  return rc;
}

static int is_number(const char *s, int integer) {
  jm_node *n = agent_json_parse(s, strlen(s));
  int ok = n && n->type == JM_NUM && (!integer || strpbrk(s, ".eE") == NULL);
  agent_json_free(n);
  return ok;
}

/* One key=value or key:=JSON into the arguments object. */
static int add_argument(jm_buf *b, const char *arg, const jm_node *props, int *first) {
  const char *eq = strchr(arg, '=');
  if (eq == NULL || eq == arg || (eq == arg + 1 && arg[0] == ':')) {
    fprintf(stderr, "sandman-tools: '%s' is not key=value or key:=JSON\n", arg);
    return EXIT_USAGE;
  }
  int raw = eq[-1] == ':';
  size_t klen = (size_t)(eq - arg) - (size_t)raw;
  const char *value = eq + 1;
  char key[256];
  if (klen >= sizeof key) {
    fprintf(stderr, "sandman-tools: argument name too long\n");
    return EXIT_USAGE;
  }
  memcpy(key, arg, klen);
  key[klen] = '\0';
  agent_json_buf_str(b, *first ? "" : ", ");
  *first = 0;
  agent_json_buf_json_string(b, key, klen);
  agent_json_buf_str(b, ": ");
  if (raw) {
    jm_node *v = agent_json_parse(value, strlen(value));
    agent_json_free(v);
    if (v == NULL) {
      fprintf(stderr, "sandman-tools: %s:= takes JSON, and '%s' is not\n", key, value);
      return EXIT_USAGE;
    }
    agent_json_buf_str(b, value);
    return 0;
  }
  const char *type = agent_json_get_str(agent_json_get(props, key), "type");
  if (type && (strcmp(type, "number") == 0 || strcmp(type, "integer") == 0)) {
    if (!is_number(value, strcmp(type, "integer") == 0)) {
      fprintf(stderr, "sandman-tools: %s takes %s %s, and '%s' is not one\n", key,
              type[0] == 'i' ? "an" : "a", type, value);
      return EXIT_USAGE;
    }
    agent_json_buf_str(b, value);
  } else if (type && strcmp(type, "boolean") == 0) {
    if (strcmp(value, "true") != 0 && strcmp(value, "false") != 0) {
      fprintf(stderr, "sandman-tools: %s takes true or false, not '%s'\n", key, value);
      return EXIT_USAGE;
    }
    agent_json_buf_str(b, value);
  } else {
    agent_json_buf_json_string(b, value, strlen(value));
  }
  return 0;
}

static int print_result(const answer *a, int json) {
  jm_node *doc = agent_json_parse(a->body, a->body_len);
  if (doc == NULL || doc->type != JM_OBJ) {
    agent_json_free(doc);
    fprintf(stderr, "sandman-tools: the route's answer is not JSON\n");
    return EXIT_ROUTE;
  }
  const jm_node *ie = agent_json_get(doc, "is_error");
  if (ie == NULL) ie = agent_json_get(doc, "isError");
  int is_error = ie && ie->type == JM_BOOL && ie->boolean;
  if (json) {
    print_body(a);
  } else {
    FILE *to = is_error ? stderr : stdout;
    const jm_node *content = agent_json_get(doc, "content");
    int printed = 0;
    for (const jm_node *c = content && content->type == JM_ARR ? content->child : NULL; c;
         c = c->next) {
      const char *type = agent_json_get_str(c, "type");
      const jm_node *text = agent_json_get(c, "text");
      if (type && strcmp(type, "text") == 0 && text && text->type == JM_STR) {
        fwrite(text->str, 1, text->str_len, to);
        if (text->str_len && text->str[text->str_len - 1] != '\n') fputc('\n', to);
      } else {
        fprintf(to, "[%s content: use --json]\n", type ? type : "other");
      }
      printed = 1;
    }
    const jm_node *st = agent_json_get(doc, "structured");
    if (!printed && st && st->type != JM_NULL) {
      fwrite(st->raw, 1, st->raw_len, to);
      fputc('\n', to);
    }
  }
  agent_json_free(doc);
  return is_error ? EXIT_TOOL : 0;
}

static int cmd_call(const char *name, char **args, int nargs, int json) {
  jm_node *tool = NULL;
  int need_schema = 0;
  for (int i = 0; i < nargs; i++) {
    const char *eq = strchr(args[i], '=');
    need_schema |= eq && eq > args[i] && eq[-1] != ':';
  }
  /* key=value takes its type from the tool's schema. */
  if (need_schema) {
    int rc = describe(name, json, 0, &tool);
    if (rc) return rc;
  }
  const jm_node *props = agent_json_get(input_schema(tool), "properties");
  jm_buf body = {.max = SM_ROUTE_REQUEST_MAX - 4096};
  agent_json_buf_str(&body, "{\"arguments\": {");
  int first = 1, rc = 0;
  for (int i = 0; i < nargs && rc == 0; i++) rc = add_argument(&body, args[i], props, &first);
  agent_json_buf_str(&body, "}}");
  agent_json_free(tool);
  if (rc == 0 && body.failed) {
    fprintf(stderr, "sandman-tools: the arguments are over the route's limit\n");
    rc = EXIT_USAGE;
  }
  char path[1024];
  if (rc == 0 && tool_path(name, "/call", path, sizeof path) != 0) {
    fprintf(stderr, "sandman-tools: the tool's name is too long\n");
    rc = EXIT_USAGE;
  }
  answer a = {0};
  if (rc == 0) rc = route_request("POST", path, &body, &a);
  free(body.data);
  if (rc) return rc;
  rc = a.status == 200 ? print_result(&a, json) : failed_answer(&a, json);
  answer_dispose(&a);
  return rc;
}

int agent_tools_main(int argc, char **argv) {
  int json = 0, n = 0;
  char **words = calloc((size_t)argc + 1, sizeof *words);
  if (words == NULL) return EXIT_ROUTE;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0) json = 1;
    else words[n++] = argv[i];
  }
  int rc;
  const char *cmd = n > 0 ? words[0] : "";
  if (n == 1 && (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0)) {
    fputs(usage_text, stdout);
    rc = 0;
  } else if (strcmp(cmd, "list") == 0 && n == 1) {
    rc = cmd_list(json);
  } else if (strcmp(cmd, "describe") == 0 && n == 2) {
    jm_node *tool = NULL;
    rc = describe(words[1], json, 1, &tool);
    agent_json_free(tool);
  } else if (strcmp(cmd, "call") == 0 && n >= 2) {
    rc = cmd_call(words[1], words + 2, n - 2, json);
  } else {
    fputs(usage_text, stderr);
    rc = EXIT_USAGE;
  }
  free(words);
  fflush(stdout);
  return rc;
}
