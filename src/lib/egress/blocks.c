/* What a sandbox's policy refuses unless an allow pattern names it by
 * address: the engine host's own addresses and the ranges of the engine's
 * networks (other sandboxes, other containers), learnt from the engine. */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <sandman/log.h>

#include "egress/egress_internal.h"
#include "egress/egress_policy.h"

/* What the engine host and its networks are: refused unless listed by
 * address. A local engine shares this host's addresses; a remote one is
 * the address it is reached at. */
size_t egress_engine_blocks(sm_engine *e, eg_block_in *out, size_t cap) {
  size_t n = 0;
  const char *host = sm_engine_host(e);
  if (host && strncmp(host, "unix://", 7) == 0) {
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) == 0) {
      for (struct ifaddrs *i = ifs; i && n < cap; i = i->ifa_next) {
        if (i->ifa_addr == NULL || (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6))
          continue;
        char a[64];
        const void *src = i->ifa_addr->sa_family == AF_INET
                              ? (const void *)&((struct sockaddr_in *)i->ifa_addr)->sin_addr
                              : (const void *)&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr;
        if (inet_ntop(i->ifa_addr->sa_family, src, a, sizeof a) == NULL || strchr(a, '%')) continue;
        /* Loopback and link-local say more by their own names. */
        eg_addr ea;
        const char *what = egress_addr_parse(a, &ea) == 0 ? egress_addr_special(&ea) : NULL;
        if (what && (strcmp(what, "loopback") == 0 || strncmp(what, "link-local", 10) == 0)) continue;
        snprintf(out[n].cidr, sizeof out[n].cidr, "%s/%d", a, i->ifa_addr->sa_family == AF_INET ? 32 : 128);
        snprintf(out[n].why, sizeof out[n].why, "engine host");
        n++;
      }
      freeifaddrs(ifs);
    }
  } else if (host && (strncmp(host, "tcp://", 6) == 0 || strncmp(host, "https://", 8) == 0 ||
                      strncmp(host, "http://", 7) == 0)) {
    char name[256];
    const char *h = strstr(host, "://") + 3;
    size_t hl = strcspn(h, ":/");
    if (*h == '[') {
      h++;
      hl = strcspn(h, "]");
    }
    snprintf(name, sizeof name, "%.*s", (int)hl, h);
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(name, NULL, &hints, &res) == 0) {
      for (struct addrinfo *ai = res; ai && n < cap; ai = ai->ai_next) {
        char a[64];
        const void *src = ai->ai_family == AF_INET ? (const void *)&((struct sockaddr_in *)ai->ai_addr)->sin_addr
                                                   : (const void *)&((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr;
        if (inet_ntop(ai->ai_family, src, a, sizeof a) == NULL) continue;
        snprintf(out[n].cidr, sizeof out[n].cidr, "%s/%d", a, ai->ai_family == AF_INET ? 32 : 128);
        snprintf(out[n].why, sizeof out[n].why, "engine host");
        n++;
      }
      freeaddrinfo(res);
    }
  }
  /* Every network of the engine: other sandboxes, other containers. */
  json_object *nets = NULL;
  sm_error lerr = SM_ERROR_INIT;
  if (sm_engine_network_list(e, NULL, 0, &nets, &lerr) == 0) {
    for (size_t i = 0; i < json_object_array_length(nets) && n < cap; i++) {
      json_object *ipam = NULL, *cfgs = NULL;
      json_object *net = json_object_array_get_idx(nets, i);
      if (!json_object_object_get_ex(net, "IPAM", &ipam) || !json_object_object_get_ex(ipam, "Config", &cfgs) ||
          !json_object_is_type(cfgs, json_type_array))
        continue;
      for (size_t j = 0; j < json_object_array_length(cfgs) && n < cap; j++) {
        const char *sub = egress_jstr(json_object_array_get_idx(cfgs, j), "Subnet", NULL, NULL);
        eg_pattern p;
        char why[EG_WHY_MAX], tmp[80];
        if (sub == NULL) continue;
        snprintf(tmp, sizeof tmp, strchr(sub, ':') ? "[%s]" : "%s", sub);
        if (egress_pattern_parse(tmp, &p, why, sizeof why) != 0 || p.kind != EG_PAT_ADDR) continue;
        snprintf(out[n].cidr, sizeof out[n].cidr, "%s", sub);
        snprintf(out[n].why, sizeof out[n].why, "engine network");
        n++;
      }
    }
    json_object_put(nets);
  } else {
    sm_log(SM_LOG_WARN, "egress: listing the engine's networks: %s (their ranges are refused as private anyway)",
           lerr.message);
  }
  return n;
}
