/* Services + EndpointSlices -> the nftables script of the proxy's table (pure). The shape
 * follows kube-proxy's nftables mode:
 *   cluster-ips  map  ip . proto . port -> goto svc-K   (prerouting and output: nat-services)
 *   node-ports   map  proto . port -> goto ext-K        (same, to a local address but 127/8)
 *   no-ep, no-ep-np sets: Services without endpoints, rejected in filter input/forward/output
 *   svc-K: masquerade-mark sources outside the pod network, then goto all-K (or loc-K under
 *          internalTrafficPolicy Local); ext-K: mark, goto all-K (or loc-K without mark under
 *          externalTrafficPolicy Local)
 *   all-K/loc-K: ClientIP affinity lookups (aff-E-TIMEOUT), then numgen random mod N vmap -> ep-E
 *   ep-E: hairpin mark, affinity update, dnat to the endpoint
 * K is a hash of the Service port (namespace, name, protocol, port, port name), E one of K and
 * the endpoint's address: the names stay the same from sync to sync, so a partial sync (as
 * kube-proxy's between its full ones) rewrites only the changed Services' chains and elements,
 * knowing from the state what each Service owned. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/proxy/proxy.h"
#include "api/registry.h"
#include "base/buf.h"
#include "base/map.h"

#define SVC_LABEL "kubernetes.io/service-name"

/* a condition: absent = dflt */
static bool jbool(json_object *o, const char *key, bool dflt) {
    json_object *v = kite_obj_get(o, key);
    return v && json_object_is_type(v, json_type_boolean) ? json_object_get_boolean(v) : dflt;
}

static const char *proto_of(json_object *port) {
    const char *p = kite_obj_path_str(port, "protocol");
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

/* One Service's share of the table: its chains and sets (declarations in body) and the
 * elements it puts in the shared maps and sets ("MAP\tKEY\tVALUE", VALUE empty in a set).
 * The names are stable (hashes of what they stand for), so a partial sync replaces exactly
 * what a Service owned before. */
struct part {
    struct kite_buf body;
    json_object *chains, *sets, *elems; /* arrays of strings */
};

static const char *const SHARED[] = {"cluster-ips", "node-ports", "no-ep", "no-ep-np"};
#define N_SHARED 4

static void part_init(struct part *p) {
    *p = (struct part){0};
    p->chains = json_object_new_array();
    p->sets = json_object_new_array();
    p->elems = json_object_new_array();
}

static void part_release(struct part *p) {
    kite_buf_release(&p->body);
    json_object_put(p->chains);
    json_object_put(p->sets);
    json_object_put(p->elems);
}

static void add_str(json_object *arr, const char *fmt, ...) KITE_PRINTF(2, 3);
static void add_str(json_object *arr, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0) abort();
    va_end(ap);
    json_object_array_add(arr, json_object_new_string(s));
    free(s);
}

static uint64_t hash_of(const char *fmt, ...) KITE_PRINTF(1, 2);
static uint64_t hash_of(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0) abort();
    va_end(ap);
    uint64_t h = kite_hash(s, strlen(s));
    free(s);
    return h;
}

/* a balancing chain over eps[] (those with local set when only_local) */
static bool lb_chain(struct part *p, const char *name, uint64_t k, const struct ep *eps, const uint64_t *eph, size_t n,
                     bool only_local, int affinity) {
    struct kite_buf *b = &p->body;
    size_t m = 0;
    for (size_t j = 0; j < n; j++) m += !only_local || eps[j].local;
    if (!m) return false;
    kite_buf_printf(b, "  chain %s-%016" PRIx64 " {\n", name, k);
    add_str(p->chains, "%s-%016" PRIx64, name, k);
    if (affinity)
        for (size_t j = 0; j < n; j++)
            if (!only_local || eps[j].local)
                kite_buf_printf(b, "    ip saddr @aff-%016" PRIx64 "-%d goto ep-%016" PRIx64 "\n", eph[j], affinity,
                                eph[j]);
    kite_buf_printf(b, "    numgen random mod %zu vmap { ", m);
    size_t i = 0;
    for (size_t j = 0; j < n; j++)
        if (!only_local || eps[j].local)
            kite_buf_printf(b, "%s%zu : goto ep-%016" PRIx64, i ? ", " : "", i, eph[j]), i++;
    kite_buf_puts(b, " }\n  }\n");
    return true;
}

/* "namespace/service-name" -> array of the Service's slices (borrowed) */
static json_object *index_slices(json_object *slices) {
    json_object *idx = json_object_new_object();
    json_object_object_foreach(slices, key, sl) {
        (void)key;
        json_object *owner = kite_obj_get(kite_obj_get(kite_obj_get(sl, "metadata"), "labels"), SVC_LABEL); /* a dotted key: no jstr */
        const char *ns = kite_obj_path_str(sl, "metadata.namespace");
        if (!owner || !ns || !name_eq(kite_obj_path_str(sl, "addressType"), "IPv4")) continue;
        _cleanup_free_ char *k = kite_asprintf("%s/%s", ns, json_object_get_string(owner));
        json_object *arr = kite_obj_get(idx, k);
        if (!arr) json_object_object_add(idx, k, arr = json_object_new_array());
        json_object_array_add(arr, json_object_get(sl));
    }
    return idx;
}

/* the endpoints of one Service port: ready ones, or serving-terminating ones when none is ready */
static size_t endpoints_of(json_object *svc, json_object *sport, json_object *index, struct ep **ret,
                           const char *node) {
    const char *pname = kite_obj_path_str(sport, "name"), *proto = kite_obj_path_str(sport, "protocol");
    struct ep *ready = NULL, *term = NULL;
    size_t nr = 0, nt = 0;
    _cleanup_free_ char *k = kite_asprintf("%s/%s", kite_obj_path_str(svc, "metadata.namespace"), kite_obj_path_str(svc, "metadata.name"));
    json_object *mine = kite_obj_get(index, k);
    for (size_t si = 0; mine && si < json_object_array_length(mine); si++) {
        json_object *sl = json_object_array_get_idx(mine, si);
        int port = 0;
        json_object *ports = kite_obj_get(sl, "ports");
        for (size_t i = 0; ports && i < json_object_array_length(ports); i++) {
            json_object *p = json_object_array_get_idx(ports, i);
            if (name_eq(kite_obj_path_str(p, "name"), pname) && name_eq(kite_obj_path_str(p, "protocol") ? kite_obj_path_str(p, "protocol") : "TCP",
                                                           proto ? proto : "TCP"))
                port = json_object_get_int(kite_obj_get(p, "port"));
        }
        if (port <= 0 || port > 65535) continue;
        json_object *eps = kite_obj_get(sl, "endpoints");
        for (size_t i = 0; eps && i < json_object_array_length(eps); i++) {
            json_object *e = json_object_array_get_idx(eps, i), *cond = kite_obj_get(e, "conditions");
            json_object *addrs = kite_obj_get(e, "addresses");
            const char *ip = addrs && json_object_array_length(addrs)
                                 ? json_object_get_string(json_object_array_get_idx(addrs, 0)) : NULL;
            if (!plain_ipv4(ip)) continue;
            bool r = jbool(cond, "ready", true), s = jbool(cond, "serving", r), t = jbool(cond, "terminating", false);
            struct ep x = {.ip = ip, .port = port, .local = node && name_eq(kite_obj_path_str(e, "nodeName"), node)};
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

/* A Service's part: chains named by hashes of the Service port (svc-, ext-, all-, loc-) and of
 * the endpoint (ep-, with its affinity set aff-HASH-TIMEOUT). */
static void service_rules(struct part *out, const struct kite_proxy_ruleset_options *o, json_object *svc,
                          json_object *index) {
    struct kite_buf *b = &out->body;
    json_object *spec = kite_obj_get(svc, "spec");
    const char *cip = kite_obj_path_str(spec, "clusterIP"), *type = kite_obj_path_str(spec, "type");
    const char *ns = kite_obj_path_str(svc, "metadata.namespace"), *name = kite_obj_path_str(svc, "metadata.name");
    if (type && strcmp(type, "ExternalName") == 0) return;
    if (!plain_ipv4(cip)) return; /* headless ("None") or not yet allocated */
    bool itp_local = name_eq(kite_obj_path_str(spec, "internalTrafficPolicy"), "Local");
    bool etp_local = name_eq(kite_obj_path_str(spec, "externalTrafficPolicy"), "Local");
    int affinity = 0;
    if (name_eq(kite_obj_path_str(spec, "sessionAffinity"), "ClientIP")) {
        json_object *t = kite_obj_get(kite_obj_get(kite_obj_get(spec, "sessionAffinityConfig"), "clientIP"), "timeoutSeconds");
        affinity = t ? json_object_get_int(t) : KITE_PROXY_AFFINITY_TIMEOUT_DEFAULT;
        if (affinity <= 0) affinity = KITE_PROXY_AFFINITY_TIMEOUT_DEFAULT;
    }
    json_object *ports = kite_obj_get(spec, "ports");
    for (size_t i = 0; ports && i < json_object_array_length(ports); i++) {
        json_object *sp = json_object_array_get_idx(ports, i);
        const char *proto = proto_of(sp), *pname = kite_obj_path_str(sp, "name");
        int port = json_object_get_int(kite_obj_get(sp, "port")), np = json_object_get_int(kite_obj_get(sp, "nodePort"));
        if (!proto || port <= 0 || port > 65535) continue;
        if (np <= 0 || np > 65535) np = 0;
        uint64_t K = hash_of("%s/%s/%s/%d/%s", ns, name, proto, port, pname ? pname : "");
        struct ep *eps = NULL;
        size_t n = endpoints_of(svc, sp, index, &eps, o->node_name);
        /* the cluster DNS Service without DNS pods: this node's responder, on its port 53 */
        if (!n && o->local_dns && plain_ipv4(o->local_dns) && name_eq(ns, "kube-system") && name_eq(name, "kube-dns") &&
            port == 53 && strcmp(proto, "sctp") != 0) {
            eps = kite_calloc(1, sizeof *eps);
            eps[0] = (struct ep){.ip = o->local_dns, .port = 53, .local = true};
            n = 1;
        }
        uint64_t *eph = kite_calloc(n ? n : 1, sizeof *eph);
        kite_buf_printf(b, "  # %s/%s:%d\n", ns, name, port);
        for (size_t j = 0; j < n; j++) {
            eph[j] = hash_of("%016" PRIx64 "/%s:%d", K, eps[j].ip, eps[j].port);
            if (affinity) {
                kite_buf_printf(b, "  set aff-%016" PRIx64 "-%d { type ipv4_addr; flags dynamic,timeout; timeout %ds; }\n",
                                eph[j], affinity, affinity);
                add_str(out->sets, "aff-%016" PRIx64 "-%d", eph[j], affinity);
            }
            kite_buf_printf(b, "  chain ep-%016" PRIx64 " {\n    ip saddr %s meta mark set meta mark | 0x%x\n", eph[j],
                            eps[j].ip, KITE_PROXY_MASQ_MARK);
            add_str(out->chains, "ep-%016" PRIx64, eph[j]);
            if (affinity) kite_buf_printf(b, "    update @aff-%016" PRIx64 "-%d { ip saddr }\n", eph[j], affinity);
            kite_buf_printf(b, "    meta l4proto %s dnat to %s:%d\n  }\n", proto, eps[j].ip, eps[j].port);
        }
        bool all = lb_chain(out, "all", K, eps, eph, n, false, affinity);
        bool loc = lb_chain(out, "loc", K, eps, eph, n, true, affinity);
        if (itp_local ? loc : all) {
            kite_buf_printf(b, "  chain svc-%016" PRIx64 " {\n", K);
            add_str(out->chains, "svc-%016" PRIx64, K);
            if (o->pod_cidr) kite_buf_printf(b, "    ip saddr != %s meta mark set meta mark | 0x%x\n", o->pod_cidr,
                                             KITE_PROXY_MASQ_MARK);
            kite_buf_printf(b, "    goto %s-%016" PRIx64 "\n  }\n", itp_local ? "loc" : "all", K);
            add_str(out->elems, "cluster-ips\t%s . %s . %d\tgoto svc-%016" PRIx64, cip, proto, port, K);
        } else {
            add_str(out->elems, "no-ep\t%s . %s . %d\t", cip, proto, port);
        }
        if (np) {
            if (etp_local ? loc : all) {
                kite_buf_printf(b, "  chain ext-%016" PRIx64 " {\n", K);
                add_str(out->chains, "ext-%016" PRIx64, K);
                if (!etp_local) kite_buf_printf(b, "    meta mark set meta mark | 0x%x\n", KITE_PROXY_MASQ_MARK);
                kite_buf_printf(b, "    goto %s-%016" PRIx64 "\n  }\n", etp_local ? "loc" : "all", K);
                add_str(out->elems, "node-ports\t%s . %d\tgoto ext-%016" PRIx64, proto, np, K);
            } else {
                add_str(out->elems, "no-ep-np\t%s . %d\t", proto, np);
            }
        }
        free(eph);
        free(eps);
    }
}

/* The part of the Service under key (absent: an empty part) as a state entry. */
static json_object *build_part(struct part *p, const struct kite_proxy_ruleset_options *o, json_object *services,
                               const char *key, json_object *index) {
    part_init(p);
    json_object *svc = kite_obj_get(services, key);
    if (svc && kite_obj_path_str(svc, "metadata.namespace") && kite_obj_path_str(svc, "metadata.name")) service_rules(p, o, svc, index);
    json_object *st = json_object_new_object();
    json_object_object_add(st, "chains", json_object_get(p->chains));
    json_object_object_add(st, "sets", json_object_get(p->sets));
    json_object_object_add(st, "elems", json_object_get(p->elems));
    return st;
}

/* "MAP\tKEY\tVALUE" -> its map's index in SHARED, *key and *value (pointers into a copy) */
static int split_elem(const char *e, char **ret_copy, const char **key, const char **value) {
    char *c = kite_strdup(e), *t1 = strchr(c, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
    *ret_copy = c;
    if (!t2) return -1;
    *t1 = *t2 = 0;
    *key = t1 + 1;
    *value = t2 + 1;
    for (int i = 0; i < N_SHARED; i++)
        if (!strcmp(c, SHARED[i])) return i;
    return -1;
}

/* appends "KEY[ : VALUE]" to lists[map] */
static void elem_to(struct kite_buf lists[N_SHARED], const char *e, bool with_value) {
    _cleanup_free_ char *c = NULL;
    const char *k, *v;
    int m = split_elem(e, &c, &k, &v);
    if (m < 0) return;
    if (lists[m].len) kite_buf_puts(&lists[m], ", ");
    kite_buf_puts(&lists[m], k);
    if (with_value && *v) kite_buf_printf(&lists[m], " : %s", v);
}

static bool arr_has(json_object *arr, const char *s) {
    for (size_t i = 0; arr && i < json_object_array_length(arr); i++)
        if (!strcmp(json_object_get_string(json_object_array_get_idx(arr, i)), s)) return true;
    return false;
}

static void release_lists(struct kite_buf lists[N_SHARED]) {
    for (int i = 0; i < N_SHARED; i++) kite_buf_release(&lists[i]);
}

char *kite_proxy_ruleset(const struct kite_proxy_ruleset_options *o, json_object *services, json_object *slices,
                         json_object *state) {
    struct kite_buf b = {0}, lists[N_SHARED] = {0};
    const char *t = o->table;
    kite_buf_printf(&b, "table ip %s\ndelete table ip %s\ntable ip %s {\n", t, t, t);
    json_object *index = index_slices(slices);
    if (state) {
        json_object_object_foreach(state, sk, sv) {
            (void)sv;
            json_object_object_del(state, sk); /* json-c's foreach allows deleting the current key */
        }
    }
    json_object_object_foreach(services, key, svc) {
        (void)svc;
        struct part p;
        json_object *st = build_part(&p, o, services, key, index);
        kite_buf_append(&b, p.body.p ? p.body.p : "", p.body.len);
        for (size_t i = 0; i < json_object_array_length(p.elems); i++)
            elem_to(lists, json_object_get_string(json_object_array_get_idx(p.elems, i)), true);
        if (state) json_object_object_add(state, key, st);
        else json_object_put(st);
        part_release(&p);
    }
    json_object_put(index);
    static const char *const types[N_SHARED] = {"ipv4_addr . inet_proto . inet_service : verdict",
                                                "inet_proto . inet_service : verdict",
                                                "ipv4_addr . inet_proto . inet_service", "inet_proto . inet_service"};
    for (int i = 0; i < N_SHARED; i++) {
        kite_buf_printf(&b, "  %s %s { type %s;", i < 2 ? "map" : "set", SHARED[i], types[i]);
        if (lists[i].len) kite_buf_printf(&b, " elements = { %s };", lists[i].p);
        kite_buf_puts(&b, " }\n");
    }
    release_lists(lists);
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
    return kite_buf_detach(&b, NULL);
}

char *kite_proxy_ruleset_partial(const struct kite_proxy_ruleset_options *o, json_object *services,
                                 json_object *slices, json_object *changed, json_object *state) {
    const char *t = o->table;
    struct kite_buf flush = {0}, gone = {0}, body = {0}, dels[N_SHARED] = {0}, adds[N_SHARED] = {0};
    json_object *index = index_slices(slices);
    bool any = false;
    json_object_object_foreach(changed, key, unused) {
        (void)unused;
        any = true;
        struct part p;
        json_object *st = build_part(&p, o, services, key, index);
        json_object *old = kite_obj_get(state, key);
        json_object *oc = kite_obj_get(old, "chains"), *os = kite_obj_get(old, "sets"), *oe = kite_obj_get(old, "elems");
        /* elements: those that left or changed go, those that came or changed are added */
        for (size_t i = 0; oe && i < json_object_array_length(oe); i++) {
            const char *e = json_object_get_string(json_object_array_get_idx(oe, i));
            if (!arr_has(p.elems, e)) elem_to(dels, e, false);
        }
        for (size_t i = 0; i < json_object_array_length(p.elems); i++) {
            const char *e = json_object_get_string(json_object_array_get_idx(p.elems, i));
            if (!arr_has(oe, e)) elem_to(adds, e, true);
        }
        /* every chain it had is emptied (the ones kept are filled again below), the ones
         * gone then deleted with the sets gone, once no rule refers to them */
        for (size_t i = 0; oc && i < json_object_array_length(oc); i++) {
            const char *c = json_object_get_string(json_object_array_get_idx(oc, i));
            kite_buf_printf(&flush, "flush chain ip %s %s\n", t, c);
            if (!arr_has(p.chains, c)) kite_buf_printf(&gone, "delete chain ip %s %s\n", t, c);
        }
        for (size_t i = 0; os && i < json_object_array_length(os); i++) {
            const char *s = json_object_get_string(json_object_array_get_idx(os, i));
            if (!arr_has(p.sets, s)) kite_buf_printf(&gone, "delete set ip %s %s\n", t, s);
        }
        kite_buf_append(&body, p.body.p ? p.body.p : "", p.body.len);
        if (kite_obj_get(services, key)) json_object_object_add(state, key, st);
        else {
            json_object_object_del(state, key);
            json_object_put(st);
        }
        part_release(&p);
    }
    json_object_put(index);
    struct kite_buf b = {0};
    for (int i = 0; i < N_SHARED; i++)
        if (dels[i].len) kite_buf_printf(&b, "delete element ip %s %s { %s }\n", t, SHARED[i], dels[i].p);
    kite_buf_append(&b, flush.p ? flush.p : "", flush.len);
    kite_buf_append(&b, gone.p ? gone.p : "", gone.len);
    if (body.len) kite_buf_printf(&b, "table ip %s {\n%s}\n", t, body.p);
    for (int i = 0; i < N_SHARED; i++)
        if (adds[i].len) kite_buf_printf(&b, "add element ip %s %s { %s }\n", t, SHARED[i], adds[i].p);
    kite_buf_release(&flush);
    kite_buf_release(&gone);
    kite_buf_release(&body);
    release_lists(dels);
    release_lists(adds);
    if (!any || !b.len) {
        kite_buf_release(&b);
        return NULL;
    }
    return kite_buf_detach(&b, NULL);
}

char *kite_proxy_cleanup_script(const char *table) {
    return kite_asprintf("table ip %s\ndelete table ip %s\n", table, table);
}
