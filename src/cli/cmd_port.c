/* sandman sandbox port [--run-id ID | --worker-id ID | SANDBOX] PORT
 * [--listen ADDR:N]: a local TCP port forwarded to PORT on a keyed
 * sandbox's own loopback through sandman's agent (docs/ports.md), so it
 * works with network none: the sandbox gains no network.
 *
 * The relay's call (sandman/ports.h) runs on a thread of its own, as
 * `sandman exec` runs its command; this thread accepts connections on the
 * listening socket and drives them. It listens on a loopback address only,
 * and prints that address once the relay runs in the sandbox; it runs
 * until interrupted (exit 0), or until the sandbox side ends (125). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sandman/audit.h>
#include <sandman/ports.h>

#include "cli.h"

typedef struct port_args {
  cli_keyed k;
  const char *listen;
  unsigned port;
} port_args;

static int parse_port(const char *s, unsigned *out) {
  char *end = NULL;
  errno = 0;
  unsigned long v = strtoul(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < 1 || v > 65535 || s[0] == '-' || s[0] == '+')
    return -1;
  *out = (unsigned)v;
  return 0;
}

static int parse_args(const cli_call *call, port_args *a) {
  memset(a, 0, sizeof *a);
  cli_keyed_flags(call, &a->k);
  a->listen = cli_str(call, "listen");
  size_t n = (size_t)call->n_args;
  if (a->k.run_id && a->k.worker_id)
    return cli_usage_error(call->cmd, 0, "--run-id and --worker-id name two sandboxes: give one");
  size_t want = a->k.run_id || a->k.worker_id ? 1 : 2;
  if (n != want)
    return cli_usage_error(call->cmd, 0, want == 2 ? "give SANDBOX and PORT (or --run-id or "
                                                     "--worker-id and PORT)"
                                                   : "give PORT only (the sandbox is named)");
  if (want == 2) a->k.sandbox = call->args[0];
  if (parse_port(call->args[n - 1], &a->port) != 0)
    return cli_usage_error(call->cmd, 0, "PORT must be a number from 1 to 65535");
  if (a->k.mode && a->k.run_id && strcmp(a->k.mode, "per_run") != 0)
    return cli_usage_error(call->cmd, 0, "--run-id names a per_run sandbox");
  if (a->k.mode && a->k.worker_id && strcmp(a->k.mode, "per_worker") != 0)
    return cli_usage_error(call->cmd, 0, "--worker-id names a per_worker sandbox");
  return 0;
}

/* --listen: a loopback address (127.0.0.0/8 or [::1]) and a port (0: any
 * free one), so that nothing but this host reaches the sandbox's port.
 * The default is 127.0.0.1:0. */
static int parse_listen(const cli_call *call, const char *spec, struct sockaddr_storage *ss,
                        socklen_t *sl) {
  char host[64];
  const char *colon = spec ? strrchr(spec, ':') : NULL;
  unsigned port = 0;
  if (spec == NULL) spec = "127.0.0.1:0", colon = spec + 9;
  size_t hl = colon ? (size_t)(colon - spec) : 0;
  if (colon == NULL || hl == 0 || hl >= sizeof host ||
      (strcmp(colon + 1, "0") != 0 && parse_port(colon + 1, &port) != 0))
    return cli_usage_error(call->cmd, 0, "--listen takes ADDRESS:PORT (127.0.0.1:8080, [::1]:0)");
  memcpy(host, spec, hl);
  host[hl] = '\0';
  memset(ss, 0, sizeof *ss);
  struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
  struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
  if (inet_pton(AF_INET, host, &v4->sin_addr) == 1 &&
      (ntohl(v4->sin_addr.s_addr) >> 24) == 127) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons((uint16_t)port);
    *sl = sizeof *v4;
    return 0;
  }
  if (hl > 2 && host[0] == '[' && host[hl - 1] == ']') {
    host[hl - 1] = '\0';
    if (inet_pton(AF_INET6, host + 1, &v6->sin6_addr) == 1 &&
        IN6_IS_ADDR_LOOPBACK(&v6->sin6_addr)) {
      v6->sin6_family = AF_INET6;
      v6->sin6_port = htons((uint16_t)port);
      *sl = sizeof *v6;
      return 0;
    }
  }
  return cli_usage_error(call->cmd, 0,
                         "--listen %s: only a loopback address (127.0.0.0/8 or [::1]): a "
                         "forwarded port is this host's alone",
                         spec);
}

/* The listening socket and its address as text into addr. -1 (reported). */
static int listen_on(const struct sockaddr_storage *ss, socklen_t sl, char *addr, size_t len) {
  int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  int one = 1;
  if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_storage got;
  socklen_t gl = sizeof got;
  if (fd < 0 || bind(fd, (const struct sockaddr *)ss, sl) != 0 || listen(fd, 64) != 0 ||
      getsockname(fd, (struct sockaddr *)&got, &gl) != 0) {
    cli_error("cannot listen: %s", strerror(errno));
    if (fd >= 0) close(fd);
    return -1;
  }
  char ip[INET6_ADDRSTRLEN];
  if (got.ss_family == AF_INET) {
    const struct sockaddr_in *v4 = (const struct sockaddr_in *)&got;
    inet_ntop(AF_INET, &v4->sin_addr, ip, sizeof ip);
    snprintf(addr, len, "%s:%u", ip, ntohs(v4->sin_port));
  } else {
    const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)&got;
    inet_ntop(AF_INET6, &v6->sin6_addr, ip, sizeof ip);
    snprintf(addr, len, "[%s]:%u", ip, ntohs(v6->sin6_port));
  }
  return fd;
}

/* ---- the relay ---- */

/* What a connection's audit row names: the forward's call and address. */
typedef struct port_audit {
  sm_audit *audit; /* NULL: the configuration keeps no trail */
  const sm_run_request *req;
  const char *listen;
} port_audit;

/* A port.opened or port.failed row for one accepted connection
 * (docs/audit.md), when the configuration keeps a trail. */
static void audit_conn(const port_audit *pa, int opened, unsigned port, const char *error) {
  if (pa == NULL || pa->audit == NULL) return;
  const sm_run_request *q = pa->req;
  sm_audit_event ev = SM_AUDIT_EVENT_INIT;
  ev.name = opened ? "port.opened" : "port.failed";
  ev.message = opened ? "a connection to a sandbox's port was opened"
                      : "a connection to a sandbox's port failed";
  ev.agent = q->agent;
  ev.project = q->project;
  ev.run_id = q->run_id;
  ev.worker = q->worker_id;
  ev.user = q->user;
  ev.tool = "port";
  ev.sandbox = q->sandbox;
  ev.mode = sm_mode_name(q->settings.mode);
  ev.dst_port = (int)port;
  json_object *d = json_object_new_object();
  json_object_object_add(d, "via", json_object_new_string("forward"));
  json_object_object_add(d, "listen", json_object_new_string(pa->listen));
  if (error) json_object_object_add(d, "error", json_object_new_string(error));
  ev.detail = d;
  sm_error err = SM_ERROR_INIT;
  if (sm_audit_record(pa->audit, &ev, &err) != 0) cli_note("audit: %s", err.message);
  json_object_put(d);
}

static void on_event(void *ud, sm_port_event ev, unsigned port, int err_no,
                     unsigned long long bytes_in, unsigned long long bytes_out) {
  (void)bytes_in, (void)bytes_out;
  if (ev == SM_PORT_REFUSED)
    cli_warn("a connection to port %u in the sandbox failed: %s", port, strerror(err_no));
  if (ev != SM_PORT_CLOSED)
    audit_conn(ud, ev == SM_PORT_OPENED, port, ev == SM_PORT_REFUSED ? strerror(err_no) : NULL);
}

/* Accepts what waits on the listener and hands it to the relay. */
static void accept_all(sm_port_relay *relay, int lfd, unsigned port, const port_audit *pa) {
  for (;;) {
    int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) return;
    sm_error err = SM_ERROR_INIT;
    if (sm_port_relay_add(relay, fd, port, &err) != 0) {
      cli_warn("%s", err.message);
      audit_conn(pa, 0, port, err.message);
    }
  }
}

/* Drives the relay until its call ends or a signal stops it. 0, or -1 when
 * the relay broke (reported). */
static int serve(cli_run_thread *r, sm_port_relay *relay, int lfd, const port_args *a,
                 const char *addr, const port_audit *pa, volatile int *stop) {
  int announced = 0;
  while (!*stop) {
    struct pollfd ex[2] = {{r->done_pipe[0], POLLIN, 0}, {lfd, announced ? POLLIN : 0, 0}};
    sm_error err = SM_ERROR_INIT;
    if (sm_port_relay_step(relay, ex, 2, 200, &err) != 0) {
      cli_error("%s", err.message);
      return -1;
    }
    if (ex[0].revents) return 0;
    if (!announced && sm_port_relay_ready(relay)) {
      announced = 1;
      printf("%s\n", addr);
      fflush(stdout);
      cli_note("forwarding %s to port %u of %s (Ctrl-C stops)", addr, a->port,
               a->k.sandbox ? a->k.sandbox : a->k.run_id ? a->k.run_id : a->k.worker_id);
    }
    if (ex[1].revents & POLLIN) accept_all(relay, lfd, a->port, pa);
  }
  return 0;
}

/* The relay's call in the sandbox (the request exec would make for it),
 * served on lfd until interrupted. */
static int forward(port_args *a, sm_config *cfg, const sm_resolved *res, sm_runner *runner, int lfd,
                   const char *addr) {
  sm_broker *broker = NULL;
  int code = cli_broker_new(cfg, NULL, 0, &broker);
  if (code != CLI_EXIT_OK) return code;
  sm_port_relay *relay = NULL;
  sm_error err = SM_ERROR_INIT;
  if (sm_port_relay_new(&relay, &err) != 0) {
    sm_broker_free(broker);
    return cli_fail(&err);
  }
  sm_run_request req;
  sm_config_egress eg;
  cli_keyed_request(&a->k, &req, &eg, cfg, res, broker);
  /* Every connection accepted is a row when the configuration keeps a
   * trail (audit.enabled: off by default on the command line). */
  port_audit pa = {NULL, &req, addr};
  if (cli_audit_open(cfg, 0, &pa.audit) != CLI_EXIT_OK) pa.audit = NULL;
  sm_port_relay_on_event(relay, on_event, &pa);
  sm_port_relay_request(relay, &req);
  volatile int *stop = cli_catch_stop_signals();
  signal(SIGPIPE, SIG_IGN);
  req.cancel = stop;
  cli_run_thread r;
  int started = cli_run_thread_start(&r, runner, &req) == 0;
  if (!started) {
    cli_error("could not start the relay's thread");
    code = CLI_EXIT_FAILURE;
  } else {
    int broke = serve(&r, relay, lfd, a, addr, &pa, stop);
    sm_port_relay_end(relay);
    if (broke) *stop = 1;
    cli_run_thread_join(&r);
    code = CLI_EXIT_OK;
    if (broke) {
      code = CLI_EXIT_FAILURE;
    } else if (!*stop) {
      /* It ended by itself: the sandbox stopped, went away, or the relay
       * could not start there. */
      cli_error("the port relay in the sandbox ended%s%s",
                r.rc != 0 || r.result.error[0] ? ": " : "",
                r.result.error[0] ? r.result.error : r.rc != 0 ? r.err.message : "");
      code = r.rc == SM_EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAILURE;
    }
    sm_run_result_dispose(&r.result);
  }
  sm_port_relay_free(relay);
  sm_audit_close(pa.audit);
  sm_broker_free(broker);
  return code;
}

int cmd_sandbox_port(const cli_call *call) {
  port_args a;
  int rc = parse_args(call, &a);
  struct sockaddr_storage ss;
  socklen_t sl = 0;
  if (rc == 0) rc = parse_listen(call, a.listen, &ss, &sl);
  if (rc) return rc;
  const cli_globals *g = call->g;
  sm_config *cfg = NULL;
  sm_resolved res;
  sm_config_flags flags;
  memset(&flags, 0, sizeof flags);
  flags.mode = a.k.run_id ? "per_run" : a.k.worker_id ? "per_worker" : NULL;
  rc = cli_load_resolve(g, a.k.agent, NULL, a.k.user, &flags, &cfg, &res);
  sm_runner *runner = NULL;
  if (rc == 0) rc = cli_runner_new(g, cfg, NULL, &runner);
  if (rc == 0 && a.k.sandbox) rc = cli_keyed_resolve(runner, &a.k, "port");
  char addr[96];
  int lfd = rc == 0 ? listen_on(&ss, sl, addr, sizeof addr) : -1;
  if (rc == 0 && lfd < 0) rc = CLI_EXIT_FAILURE;
  if (rc == 0) rc = forward(&a, cfg, &res, runner, lfd, addr);
  if (lfd >= 0) close(lfd);
  sm_runner_free(runner);
  sm_config_free(cfg);
  return rc;
}
