/* Services + EndpointSlices -> the nftables script of the proxy's table (pure). The shape
 * follows kube-proxy's nftables mode:
 *   cluster-ips  map  ip . proto . port -> goto cip-K   (prerouting and output: nat-services)
 *   node-ports   map  proto . port -> goto np-K         (same, to a local address but 127/8)
 *   no-ep, no-ep-np sets: Services without endpoints, rejected in filter input/forward/output
 *   cip-K: masquerade-mark sources outside the pod network, then goto all-K (or loc-K under
 *          internalTrafficPolicy Local); np-K: mark, goto all-K (or loc-K without mark under
 *          externalTrafficPolicy Local)
 *   all-K/loc-K: ClientIP affinity lookups, then numgen random mod N vmap -> ep-K-J
 *   ep-K-J: hairpin mark, affinity update, dnat to the endpoint
 * K numbers a Service port, J an endpoint of it. */
#include <string.h>

#include "agent/proxy/proxy.h"
#include "api/registry.h"
#include "base/buf.h"

#define SVC_LABEL "kubernetes.io/service-name"

static const char *jstr(json_object *o, const char *path) { return kite_obj_path_str(o, path); }

static json_object *jget(json_object *o, const char *key) {
    json_object *v = NULL;
    return o && json_object_object_get_ex(o, key, &v) ? v : NULL;
}

/* a condition: absent = dflt */
static bool jbool(json_object *o, const char *key, bool dflt) {
    json_object *v = jget(o, key);
    return v && json_object_is_type(v, json_type_boolean) ? json_object_get_boolean(v) : dflt;
}

static const char *proto_of(json_object *port) {
    const char *p = jstr(port, "protocol");
    if (!p || strcmp(p, "TCP") == 0) return "tcp";
    if (strcmp(p, "UDP") == 0) return "udp";
    if (strcmp(p, "SCTP") == 0) return "sctp";
    return NULL;
}

static bool name_eq(const char *a, const char *b) { return strcmp(a ? a : "", b ? b : "") == 0; }

/* only what an nft script may carry unquoted: digits and dots */
static bool plain_ipv4(const char *s) {
    if (!s || !*s || strlen(s) > 15) return false;
    for (const char *c = s; *c; c++)
        if (!(*c >= '0' && *c <= '9') && *c != '.') return false;
    return true;
}

struct ep {
    const char *ip;
    int port;
    bool local;
};

struct sets {
    struct kite_buf cips, nps, noep, noepnp;
};

static void add_elem(struct kite_buf *b, const char *fmt, const char *a, const char *proto, int port, int k) {
    if (b->len) kite_buf_puts(b, ", ");
    if (a) kite_buf_printf(b, fmt, a, proto, port, k);
    else kite_buf_printf(b, fmt, proto, port, k);
}

/* a balancing chain over eps[] (those with local set when only_local) */
static bool lb_chain(struct kite_buf *b, const char *name, int k, const struct ep *eps, size_t n, bool only_local,
                     int affinity) {
    size_t m = 0;
    for (size_t j = 0; j < n; j++) m += !only_local || eps[j].local;
    if (!m) return false;
    kite_buf_printf(b, "  chain %s-%d {\n", name, k);
    if (affinity)
        for (size_t j = 0; j < n; j++)
            if (!only_local || eps[j].local) kite_buf_printf(b, "    ip saddr @aff-%d-%zu goto ep-%d-%zu\n", k, j, k, j);
    kite_buf_printf(b, "    numgen random mod %zu vmap { ", m);
    size_t i = 0;
    for (size_t j = 0; j < n; j++)
        if (!only_local || eps[j].local) kite_buf_printf(b, "%s%zu : goto ep-%d-%zu", i ? ", " : "", i, k, j), i++;
    kite_buf_puts(b, " }\n  }\n");
    return true;
}

/* the endpoints of one Service port: ready ones, or serving-terminating ones when none is ready */
/* "namespace/service-name" -> array of the Service's slices (borrowed) */
static json_object *index_slices(json_object *slices) {
    json_object *idx = json_object_new_object();
    json_object_object_foreach(slices, key, sl) {
        (void)key;
        json_object *owner = jget(jget(jget(sl, "metadata"), "labels"), SVC_LABEL); /* a dotted key: no jstr */
        const char *ns = jstr(sl, "metadata.namespace");
        if (!owner || !ns || !name_eq(jstr(sl, "addressType"), "IPv4")) continue;
        _cleanup_free_ char *k = kite_asprintf("%s/%s", ns, json_object_get_string(owner));
        json_object *arr = jget(idx, k);
        if (!arr) json_object_object_add(idx, k, arr = json_object_new_array());
        json_object_array_add(arr, json_object_get(sl));
    }
    return idx;
}

static size_t endpoints_of(json_object *svc, json_object *sport, json_object *index, struct ep **ret,
                           const char *node) {
    const char *pname = jstr(sport, "name"), *proto = jstr(sport, "protocol");
    struct ep *ready = NULL, *term = NULL;
    size_t nr = 0, nt = 0;
    _cleanup_free_ char *k = kite_asprintf("%s/%s", jstr(svc, "metadata.namespace"), jstr(svc, "metadata.name"));
    json_object *mine = jget(index, k);
    for (size_t si = 0; mine && si < json_object_array_length(mine); si++) {
        json_object *sl = json_object_array_get_idx(mine, si);
        int port = 0;
        json_object *ports = jget(sl, "ports");
        for (size_t i = 0; ports && i < json_object_array_length(ports); i++) {
            json_object *p = json_object_array_get_idx(ports, i);
            if (name_eq(jstr(p, "name"), pname) && name_eq(jstr(p, "protocol") ? jstr(p, "protocol") : "TCP",
                                                           proto ? proto : "TCP"))
                port = json_object_get_int(jget(p, "port"));
        }
        if (port <= 0 || port > 65535) continue;
        json_object *eps = jget(sl, "endpoints");
        for (size_t i = 0; eps && i < json_object_array_length(eps); i++) {
            json_object *e = json_object_array_get_idx(eps, i), *cond = jget(e, "conditions");
            json_object *addrs = jget(e, "addresses");
            const char *ip = addrs && json_object_array_length(addrs)
                                 ? json_object_get_string(json_object_array_get_idx(addrs, 0)) : NULL;
            if (!plain_ipv4(ip)) continue;
            bool r = jbool(cond, "ready", true), s = jbool(cond, "serving", r), t = jbool(cond, "terminating", false);
            struct ep x = {.ip = ip, .port = port, .local = node && name_eq(jstr(e, "nodeName"), node)};
            if (r) {
                ready = kite_realloc(ready, (nr + 1) * sizeof *ready);
                ready[nr++] = x;
            } else if (s && t) {
                term = kite_realloc(term, (nt + 1) * sizeof *term);
                term[nt++] = x;
            }
        }
    }
    if (nr) {
        free(term);
        *ret = ready;
        return nr;
    }
    free(ready);
    *ret = term;
    return nt;
}

static void service_rules(struct kite_buf *b, struct sets *s, const struct kite_proxy_ruleset_options *o,
                          json_object *svc, json_object *slices, int *k) {
    json_object *spec = jget(svc, "spec");
    const char *cip = jstr(spec, "clusterIP"), *type = jstr(spec, "type");
    if (type && strcmp(type, "ExternalName") == 0) return;
    if (!plain_ipv4(cip)) return; /* headless ("None") or not yet allocated */
    bool itp_local = name_eq(jstr(spec, "internalTrafficPolicy"), "Local");
    bool etp_local = name_eq(jstr(spec, "externalTrafficPolicy"), "Local");
    int affinity = 0;
    if (name_eq(jstr(spec, "sessionAffinity"), "ClientIP")) {
        json_object *t = jget(jget(jget(spec, "sessionAffinityConfig"), "clientIP"), "timeoutSeconds");
        affinity = t ? json_object_get_int(t) : KITE_PROXY_AFFINITY_TIMEOUT_DEFAULT;
        if (affinity <= 0) affinity = KITE_PROXY_AFFINITY_TIMEOUT_DEFAULT;
    }
    json_object *ports = jget(spec, "ports");
    for (size_t i = 0; ports && i < json_object_array_length(ports); i++) {
        json_object *sp = json_object_array_get_idx(ports, i);
        const char *proto = proto_of(sp);
        int port = json_object_get_int(jget(sp, "port")), np = json_object_get_int(jget(sp, "nodePort"));
        if (!proto || port <= 0 || port > 65535) continue;
        if (np <= 0 || np > 65535) np = 0;
        int K = (*k)++;
        struct ep *eps = NULL;
        size_t n = endpoints_of(svc, sp, slices, &eps, o->node_name);
        kite_buf_printf(b, "  # %s/%s:%d\n", jstr(svc, "metadata.namespace"), jstr(svc, "metadata.name"), port);
        for (size_t j = 0; j < n; j++) {
            if (affinity)
                kite_buf_printf(b, "  set aff-%d-%zu { type ipv4_addr; flags dynamic,timeout; timeout %ds; }\n", K, j,
                                affinity);
            kite_buf_printf(b, "  chain ep-%d-%zu {\n    ip saddr %s meta mark set meta mark | 0x%x\n", K, j, eps[j].ip,
                            KITE_PROXY_MASQ_MARK);
            if (affinity) kite_buf_printf(b, "    update @aff-%d-%zu { ip saddr }\n", K, j);
            kite_buf_printf(b, "    meta l4proto %s dnat to %s:%d\n  }\n", proto, eps[j].ip, eps[j].port);
        }
        bool all = lb_chain(b, "all", K, eps, n, false, affinity);
        bool loc = lb_chain(b, "loc", K, eps, n, true, affinity);
        bool cip_ok = itp_local ? loc : all;
        if (cip_ok) {
            kite_buf_printf(b, "  chain cip-%d {\n", K);
            if (o->pod_cidr) kite_buf_printf(b, "    ip saddr != %s meta mark set meta mark | 0x%x\n", o->pod_cidr,
                                             KITE_PROXY_MASQ_MARK);
            kite_buf_printf(b, "    goto %s-%d\n  }\n", itp_local ? "loc" : "all", K);
            add_elem(&s->cips, "%s . %s . %d : goto cip-%d", cip, proto, port, K);
        } else {
            add_elem(&s->noep, "%s . %s . %d", cip, proto, port, K);
        }
        if (np) {
            if (etp_local ? loc : all) {
                kite_buf_printf(b, "  chain np-%d {\n", K);
                if (!etp_local) kite_buf_printf(b, "    meta mark set meta mark | 0x%x\n", KITE_PROXY_MASQ_MARK);
                kite_buf_printf(b, "    goto %s-%d\n  }\n", etp_local ? "loc" : "all", K);
                add_elem(&s->nps, "%s . %d : goto np-%d", NULL, proto, np, K);
            } else {
                add_elem(&s->noepnp, "%s . %d", NULL, proto, np, K);
            }
        }
        free(eps);
    }
}

static void decl(struct kite_buf *b, const char *kind, const char *name, const char *type, struct kite_buf *elems) {
    kite_buf_printf(b, "  %s %s { type %s;", kind, name, type);
    if (elems->len) kite_buf_printf(b, " elements = { %s };", elems->p);
    kite_buf_puts(b, " }\n");
}

char *kite_proxy_ruleset(const struct kite_proxy_ruleset_options *o, json_object *services, json_object *slices) {
    struct kite_buf b = {0};
    struct sets s = {0};
    const char *t = o->table;
    kite_buf_printf(&b, "table ip %s\ndelete table ip %s\ntable ip %s {\n", t, t, t);
    int k = 0;
    json_object *index = index_slices(slices);
    json_object_object_foreach(services, key, svc) {
        (void)key;
        if (jstr(svc, "metadata.namespace") && jstr(svc, "metadata.name")) service_rules(&b, &s, o, svc, index, &k);
    }
    json_object_put(index);
    decl(&b, "map", "cluster-ips", "ipv4_addr . inet_proto . inet_service : verdict", &s.cips);
    decl(&b, "map", "node-ports", "inet_proto . inet_service : verdict", &s.nps);
    decl(&b, "set", "no-ep", "ipv4_addr . inet_proto . inet_service", &s.noep);
    decl(&b, "set", "no-ep-np", "inet_proto . inet_service", &s.noepnp);
    kite_buf_puts(&b,
                  "  chain services {\n"
                  "    ip daddr . meta l4proto . th dport vmap @cluster-ips\n"
                  "    ip daddr != 127.0.0.0/8 fib daddr type local meta l4proto . th dport vmap @node-ports\n"
                  "  }\n"
                  "  chain nat-prerouting {\n    type nat hook prerouting priority dstnat; policy accept;\n"
                  "    jump services\n  }\n"
                  "  chain nat-output {\n    type nat hook output priority -100; policy accept;\n"
                  "    jump services\n  }\n");
    kite_buf_printf(&b,
                    "  chain nat-postrouting {\n    type nat hook postrouting priority srcnat; policy accept;\n"
                    "    meta mark & 0x%x == 0x%x meta mark set meta mark & 0x%x masquerade fully-random\n",
                    KITE_PROXY_MASQ_MARK, KITE_PROXY_MASQ_MARK, ~KITE_PROXY_MASQ_MARK);
    if (o->masquerade_pod_traffic && o->pod_cidr)
        kite_buf_printf(&b, "    ip saddr %s ip daddr != %s masquerade\n", o->pod_cidr, o->pod_cidr);
    kite_buf_puts(&b,
                  "  }\n"
                  "  chain no-endpoints {\n"
                  "    ip daddr . meta l4proto . th dport @no-ep goto reject-it\n"
                  "    ip daddr != 127.0.0.0/8 fib daddr type local meta l4proto . th dport @no-ep-np goto reject-it\n"
                  "  }\n"
                  "  chain reject-it {\n    meta l4proto tcp reject with tcp reset\n    reject\n  }\n");
    const char *hooks[] = {"input", "forward", "output"};
    for (size_t i = 0; i < 3; i++)
        kite_buf_printf(&b, "  chain filter-%s {\n    type filter hook %s priority -110; policy accept;\n"
                            "    ct state new jump no-endpoints\n  }\n", hooks[i], hooks[i]);
    kite_buf_puts(&b, "}\n");
    kite_buf_release(&s.cips);
    kite_buf_release(&s.nps);
    kite_buf_release(&s.noep);
    kite_buf_release(&s.noepnp);
    return kite_buf_detach(&b, NULL);
}

char *kite_proxy_cleanup_script(const char *table) {
    return kite_asprintf("table ip %s\ndelete table ip %s\n", table, table);
}
