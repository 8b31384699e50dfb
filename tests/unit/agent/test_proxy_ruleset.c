/* The Service proxy's ruleset (agent/proxy/ruleset.c), pure: Services and EndpointSlices in,
 * nftables script out. Checks its shape (which endpoints, which chains, which maps) and, as
 * root, that the kernel accepts it (libnftables dry run). */
#include <criterion/criterion.h>
#include <nftables/libnftables.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/proxy/proxy.h"
#include "base/base.h"
#include "base/buf.h"

static int strcmp_p(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

TestSuite(proxy_ruleset, .timeout = 30);

static const struct kite_proxy_ruleset_options OPTS = {
    .table = "kite-proxy-unit", .node_name = "n1", .pod_cidr = "10.88.0.0/16", .masquerade_pod_traffic = true};

static json_object *parse(const char *s) {
    json_object *o = json_tokener_parse(s);
    cr_assert_not_null(o, "bad fixture: %s", s);
    return o;
}

static json_object *svc(const char *name, const char *spec) {
    _cleanup_free_ char *s = kite_asprintf("{\"metadata\":{\"namespace\":\"default\",\"name\":\"%s\"},\"spec\":%s}", name, spec);
    return parse(s);
}

/* a slice of svc with port 8080 and endpoints given as JSON */
static json_object *slice(const char *svcname, const char *endpoints) {
    _cleanup_free_ char *s = kite_asprintf(
        "{\"metadata\":{\"namespace\":\"default\",\"name\":\"%s-x\",\"labels\":{\"kubernetes.io/service-name\":\"%s\"}},"
        "\"addressType\":\"IPv4\",\"ports\":[{\"name\":\"\",\"port\":8080,\"protocol\":\"TCP\"}],\"endpoints\":%s}",
        svcname, svcname, endpoints);
    return parse(s);
}

static char *build(json_object *svcs, json_object *slices) {
    char *s = kite_proxy_ruleset(&OPTS, svcs, slices, NULL);
    if (geteuid() == 0) {
        char *err = NULL;
        cr_expect_eq(kite_proxy_nft_run(s, true, &err), 0, "nftables refused:\n%s\n%s", err ? err : "", s);
        free(err);
    }
    json_object_put(svcs);
    json_object_put(slices);
    return s;
}

static json_object *one(const char *key, json_object *v) {
    json_object *m = json_object_new_object();
    if (v) json_object_object_add(m, key, v);
    return m;
}

#define EP(ip, ready, extra) "{\"addresses\":[\"" ip "\"],\"conditions\":{\"ready\":" ready "}" extra "}"

Test(proxy_ruleset, cluster_ip_to_ready_endpoints_at_random) {
    _cleanup_free_ char *s = build(
        one("default/web", svc("web", "{\"clusterIP\":\"10.96.0.20\",\"ports\":[{\"port\":80,\"protocol\":\"TCP\"}]}")),
        one("default/web-x", slice("web", "[" EP("10.88.0.5", "true", ",\"nodeName\":\"n1\"") ","
                                          EP("10.88.0.6", "false", "") "," EP("10.88.0.7", "true", "") "]")));
    cr_assert(strstr(s, "table ip kite-proxy-unit\ndelete table ip kite-proxy-unit\ntable ip kite-proxy-unit {\n"), "%s", s);
    cr_assert(strstr(s, "10.96.0.20 . tcp . 80 : goto svc-"), "%s", s);
    cr_assert(strstr(s, "numgen random mod 2 vmap { 0 : goto ep-"), "%s", s);
    cr_assert(strstr(s, "dnat to 10.88.0.5:8080"), "%s", s);
    cr_assert(strstr(s, "dnat to 10.88.0.7:8080"), "%s", s);
    cr_assert_null(strstr(s, "10.88.0.6"), "a not-ready endpoint is not used:\n%s", s);
    /* hairpin: an endpoint reaching itself is masqueraded */
    cr_assert(strstr(s, "ip saddr 10.88.0.5 meta mark set meta mark | 0x4000"), "%s", s);
    /* sources outside the pod network are masqueraded */
    cr_assert(strstr(s, "ip saddr != 10.88.0.0/16 meta mark set meta mark | 0x4000\n    goto all-"), "%s", s);
    cr_assert(strstr(s, "ip saddr 10.88.0.0/16 ip daddr != 10.88.0.0/16 masquerade"), "%s", s);
    cr_assert_null(strstr(s, "aff-"), "no affinity unless asked:\n%s", s);
}

Test(proxy_ruleset, terminating_serving_endpoints_when_none_is_ready) {
    _cleanup_free_ char *s = build(
        one("default/web", svc("web", "{\"clusterIP\":\"10.96.0.20\",\"ports\":[{\"port\":80}]}")),
        one("default/web-x",
            slice("web", "[{\"addresses\":[\"10.88.0.6\"],\"conditions\":{\"ready\":false,\"serving\":true,"
                         "\"terminating\":true}},{\"addresses\":[\"10.88.0.8\"],\"conditions\":{\"ready\":false,"
                         "\"serving\":false,\"terminating\":true}}]")));
    cr_assert(strstr(s, "dnat to 10.88.0.6:8080"), "%s", s);
    cr_assert_null(strstr(s, "10.88.0.8"), "%s", s);
    cr_assert(strstr(s, "numgen random mod 1 "), "%s", s);
}

Test(proxy_ruleset, no_endpoints_rejects) {
    _cleanup_free_ char *s = build(
        one("default/web", svc("web", "{\"clusterIP\":\"10.96.0.20\",\"type\":\"NodePort\",\"ports\":[{\"port\":80,"
                                      "\"nodePort\":30080}]}")),
        one("default/web-x", slice("web", "[]")));
    cr_assert(strstr(s, "set no-ep { type ipv4_addr . inet_proto . inet_service; elements = { 10.96.0.20 . tcp . 80 }; }"),
              "%s", s);
    cr_assert(strstr(s, "set no-ep-np { type inet_proto . inet_service; elements = { tcp . 30080 }; }"), "%s", s);
    cr_assert(strstr(s, "meta l4proto tcp reject with tcp reset\n    reject\n"), "%s", s);
    cr_assert(strstr(s, "map cluster-ips { type ipv4_addr . inet_proto . inet_service : verdict; }"), "%s", s);
    cr_assert_null(strstr(s, "chain svc-"), "%s", s);
}

Test(proxy_ruleset, session_affinity_sets_with_timeout) {
    _cleanup_free_ char *s = build(
        one("default/web", svc("web", "{\"clusterIP\":\"10.96.0.20\",\"sessionAffinity\":\"ClientIP\","
                                      "\"sessionAffinityConfig\":{\"clientIP\":{\"timeoutSeconds\":60}},"
                                      "\"ports\":[{\"port\":80}]}")),
        one("default/web-x", slice("web", "[" EP("10.88.0.5", "true", "") "]")));
    cr_assert(strstr(s, "-60 { type ipv4_addr; flags dynamic,timeout; timeout 60s; }"), "%s", s);
    cr_assert(strstr(s, "ip saddr @aff-"), "%s", s);
    cr_assert(strstr(s, "-60 { ip saddr }"), "%s", s);
}

Test(proxy_ruleset, nodeport_and_traffic_policies) {
    json_object *svcs = json_object_new_object();
    json_object_object_add(svcs, "default/c",
                           svc("c", "{\"clusterIP\":\"10.96.0.30\",\"type\":\"NodePort\",\"ports\":[{\"port\":80,"
                                    "\"nodePort\":30080}]}"));
    json_object_object_add(svcs, "default/l",
                           svc("l", "{\"clusterIP\":\"10.96.0.31\",\"type\":\"NodePort\",\"externalTrafficPolicy\":"
                                    "\"Local\",\"internalTrafficPolicy\":\"Local\",\"ports\":[{\"port\":80,"
                                    "\"nodePort\":30081}]}"));
    json_object *slices = json_object_new_object();
    json_object_object_add(slices, "default/c-x", slice("c", "[" EP("10.88.0.5", "true", ",\"nodeName\":\"n2\"") "]"));
    json_object_object_add(slices, "default/l-x",
                           slice("l", "[" EP("10.88.0.6", "true", ",\"nodeName\":\"n1\"") ","
                                      EP("10.88.0.7", "true", ",\"nodeName\":\"n2\"") "]"));
    _cleanup_free_ char *s = build(svcs, slices);
    /* Cluster: the NodePort is masqueraded and reaches every endpoint */
    cr_assert(strstr(s, "tcp . 30080 : goto ext-"), "%s", s);
    cr_assert(strstr(s, "{\n    meta mark set meta mark | 0x4000\n    goto all-"), "%s", s);
    /* Local: this node's endpoints only, the client's address kept */
    cr_assert(strstr(s, " {\n    goto loc-"), "%s", s);
    cr_assert(strstr(s, " {\n    numgen random mod 1 vmap { 0 : goto ep-"), "%s", s);
        cr_assert(strstr(s, "10.96.0.31 . tcp . 80 : goto svc-"), "%s", s);
    /* node ports on local addresses but loopback, as kube-proxy's nftables mode */
    cr_assert(strstr(s, "ip daddr != 127.0.0.0/8 fib daddr type local meta l4proto . th dport vmap @node-ports"), "%s", s);
}

Test(proxy_ruleset, headless_external_name_and_no_masquerade_flag) {
    json_object *svcs = json_object_new_object();
    json_object_object_add(svcs, "default/h", svc("h", "{\"clusterIP\":\"None\",\"ports\":[{\"port\":80}]}"));
    json_object_object_add(svcs, "default/e", svc("e", "{\"type\":\"ExternalName\",\"externalName\":\"x.example\"}"));
    struct kite_proxy_ruleset_options o = OPTS;
    o.masquerade_pod_traffic = false;
    json_object *none = json_object_new_object();
    _cleanup_free_ char *s = kite_proxy_ruleset(&o, svcs, none, NULL);
    json_object_put(none);
    cr_assert_null(strstr(s, "chain svc-"), "%s", s);
    cr_assert_null(strstr(s, "ip daddr != 10.88.0.0/16 masquerade"), "%s", s);
    json_object_put(svcs);
}

Test(proxy_ruleset, cleanup_script_removes_only_its_table) {
    _cleanup_free_ char *s = kite_proxy_cleanup_script("kite-proxy-unit");
    cr_assert_str_eq(s, "table ip kite-proxy-unit\ndelete table ip kite-proxy-unit\n");
}

/* ---- partial syncs ---- */

static json_object *svc_ep(const char *name, const char *ip, const char *extra_spec) {
    _cleanup_free_ char *spec = kite_asprintf("{\"clusterIP\":\"%s\",\"ports\":[{\"port\":80%s}]%s}", ip,
                                              strstr(extra_spec, "nodePort") ? ",\"nodePort\":30090" : "",
                                              strstr(extra_spec, "nodePort") ? ",\"type\":\"NodePort\"" : extra_spec);
    return svc(name, spec);
}

Test(proxy_ruleset, partial_sync_rewrites_only_the_changed_service) {
    json_object *svcs = json_object_new_object(), *slices = json_object_new_object(), *state = json_object_new_object();
    json_object_object_add(svcs, "default/a", svc_ep("a", "10.96.0.20", ""));
    json_object_object_add(svcs, "default/b", svc_ep("b", "10.96.0.21", ""));
    json_object_object_add(slices, "default/a-x", slice("a", "[" EP("10.88.0.5", "true", "") "," EP("10.88.0.6", "true", "") "]"));
    json_object_object_add(slices, "default/b-x", slice("b", "[" EP("10.88.0.7", "true", "") "]"));
    free(kite_proxy_ruleset(&OPTS, svcs, slices, state));
    cr_assert_eq(json_object_object_length(state), 2);
    /* nothing changed: nothing to write */
    json_object *changed = json_object_new_object();
    cr_assert_null(kite_proxy_ruleset_partial(&OPTS, svcs, slices, changed, state));
    /* a loses every endpoint */
    json_object_object_add(slices, "default/a-x", slice("a", "[" EP("10.88.0.5", "false", "") "]"));
    json_object_object_add(changed, "default/a", NULL);
    _cleanup_free_ char *s = kite_proxy_ruleset_partial(&OPTS, svcs, slices, changed, state);
    cr_assert_not_null(s);
    cr_assert_null(strstr(s, "delete table"), "a partial sync keeps the table:\n%s", s);
    cr_assert_null(strstr(s, "10.96.0.21"), "b is not touched:\n%s", s);
    cr_assert_null(strstr(s, "10.88.0.7"), "b is not touched:\n%s", s);
    cr_assert(strstr(s, "delete element ip kite-proxy-unit cluster-ips { 10.96.0.20 . tcp . 80 }\n"), "%s", s);
    cr_assert(strstr(s, "add element ip kite-proxy-unit no-ep { 10.96.0.20 . tcp . 80 }\n"), "%s", s);
    cr_assert(strstr(s, "flush chain ip kite-proxy-unit ep-"), "%s", s);
    cr_assert(strstr(s, "delete chain ip kite-proxy-unit ep-"), "%s", s);
    cr_assert(strstr(s, "delete chain ip kite-proxy-unit svc-"), "%s", s);
    cr_assert_null(strstr(s, "dnat"), "no endpoint left:\n%s", s);
    /* the elements are deleted before the chains they point at, those flushed before deleted */
    cr_assert(strstr(s, "delete element") < strstr(s, "flush chain"), "%s", s);
    cr_assert(strstr(s, "flush chain") < strstr(s, "delete chain"), "%s", s);
    json_object *a = json_object_object_get(state, "default/a");
    cr_assert_eq(json_object_array_length(json_object_object_get(a, "chains")), 0);
    cr_assert_str_eq(json_object_get_string(json_object_array_get_idx(json_object_object_get(a, "elems"), 0)),
                     "no-ep\t10.96.0.20 . tcp . 80\t");
    /* b deleted: its element and chains go, its state too */
    json_object_object_del(svcs, "default/b");
    json_object_put(changed);
    changed = json_object_new_object();
    json_object_object_add(changed, "default/b", NULL);
    _cleanup_free_ char *d = kite_proxy_ruleset_partial(&OPTS, svcs, slices, changed, state);
    cr_assert(strstr(d, "delete element ip kite-proxy-unit cluster-ips { 10.96.0.21 . tcp . 80 }\n"), "%s", d);
    cr_assert_null(strstr(d, "table ip kite-proxy-unit {"), "nothing declared:\n%s", d);
    cr_assert_null(json_object_object_get(state, "default/b"));
    json_object_put(changed);
    json_object_put(svcs);
    json_object_put(slices);
    json_object_put(state);
}

/* the table as the kernel lists it, as a sorted multiset of its items (chains and elements
 * come back in creation order, which partial and full syncs do not share) */
static char *listed(const char *table) {
    struct nft_ctx *nft = nft_ctx_new(NFT_CTX_DEFAULT);
    nft_ctx_buffer_output(nft);
    nft_ctx_buffer_error(nft);
    _cleanup_free_ char *cmd = kite_asprintf("list table ip %s", table);
    cr_assert_eq(nft_run_cmd_from_buffer(nft, cmd), 0, "%s", nft_ctx_get_error_buffer(nft));
    char *out = kite_strdup(nft_ctx_get_output_buffer(nft));
    nft_ctx_free(nft);
    char **items = NULL;
    size_t n = 0;
    for (char *save = NULL, *t = strtok_r(out, "\n\t,{}", &save); t; t = strtok_r(NULL, "\n\t,{}", &save)) {
        while (*t == ' ') t++;
        if (!*t) continue;
        items = kite_realloc(items, (n + 1) * sizeof *items);
        items[n++] = t;
    }
    qsort(items, n, sizeof *items, strcmp_p);
    struct kite_buf b = {0};
    for (size_t i = 0; i < n; i++) kite_buf_printf(&b, "%s\n", items[i]);
    free(items);
    free(out);
    return kite_buf_detach(&b, NULL);
}

static void apply(const char *script) {
    char *err = NULL;
    cr_assert_eq(kite_proxy_nft_run(script, false, &err), 0, "nftables refused:\n%s\n%s", err ? err : "", script);
    free(err);
}

static json_object *state; /* the sequence's */

/* a step of the sequence below: the objects as they are now, keys[] the changed Services
 * (NULL: the first, full sync) */
static void step(json_object *svcs, json_object *slices, const char *const keys[]) {
    struct kite_proxy_ruleset_options o = OPTS;
    _cleanup_free_ char *table = kite_asprintf("kite-proxy-unit-%d", (int)getpid());
    o.table = table;
    if (!keys) {
        state = json_object_new_object();
        _cleanup_free_ char *full = kite_proxy_ruleset(&o, svcs, slices, state);
        apply(full);
        return;
    }
    json_object *changed = json_object_new_object();
    for (size_t i = 0; keys[i]; i++) json_object_object_add(changed, keys[i], NULL);
    _cleanup_free_ char *part = kite_proxy_ruleset_partial(&o, svcs, slices, changed, state);
    json_object_put(changed);
    if (part) apply(part);
    _cleanup_free_ char *after_partial = listed(table);
    /* the same objects written whole */
    json_object *state2 = json_object_new_object();
    _cleanup_free_ char *full = kite_proxy_ruleset(&o, svcs, slices, state2);
    apply(full);
    _cleanup_free_ char *after_full = listed(table);
    cr_assert_str_eq(after_partial, after_full, "partial:\n%s\nfull:\n%s\nscript:\n%s", after_partial, after_full,
                     part ? part : "(none)");
    cr_assert_eq(json_object_object_length(state), json_object_object_length(state2));
    json_object_object_foreach(state2, k, v) {
        json_object *mine = json_object_object_get(state, k);
        cr_assert_not_null(mine, "%s", k);
        cr_assert_str_eq(json_object_to_json_string(mine), json_object_to_json_string(v), "%s", k);
    }
    json_object_put(state2);
}

Test(proxy_ruleset, partial_syncs_leave_the_kernel_as_a_full_sync) {
    if (geteuid() != 0) cr_skip_test("needs root (nftables)");
    json_object *svcs = json_object_new_object(), *slices = json_object_new_object();
    json_object_object_add(svcs, "default/a", svc_ep("a", "10.96.0.20", ""));
    json_object_object_add(svcs, "default/b", svc_ep("b", "10.96.0.21", "nodePort"));
    json_object_object_add(slices, "default/a-x", slice("a", "[" EP("10.88.0.5", "true", "") "," EP("10.88.0.6", "true", "") "]"));
    json_object_object_add(slices, "default/b-x", slice("b", "[" EP("10.88.0.7", "true", "") "]"));
    step(svcs, slices, NULL);
    /* an endpoint leaves a */
    json_object_object_add(slices, "default/a-x", slice("a", "[" EP("10.88.0.5", "true", "") "]"));
    step(svcs, slices, (const char *[]){"default/a", NULL});
    /* b has no endpoint: rejected, the node port too */
    json_object_object_add(slices, "default/b-x", slice("b", "[" EP("10.88.0.7", "false", "") "]"));
    step(svcs, slices, (const char *[]){"default/b", NULL});
    /* a gains session affinity (sets) and two endpoints; c comes */
    json_object_object_add(svcs, "default/a", svc_ep("a", "10.96.0.20", ",\"sessionAffinity\":\"ClientIP\""));
    json_object_object_add(slices, "default/a-x", slice("a", "[" EP("10.88.0.5", "true", "") "," EP("10.88.0.8", "true", "") ","
                                                            EP("10.88.0.9", "true", "") "]"));
    json_object_object_add(svcs, "default/c", svc_ep("c", "10.96.0.22", ""));
    json_object_object_add(slices, "default/c-x", slice("c", "[" EP("10.88.0.5", "true", "") "]"));
    step(svcs, slices, (const char *[]){"default/a", "default/c", NULL});
    /* b ready again, a loses affinity, c deleted; a key that names nothing */
    json_object_object_add(slices, "default/b-x", slice("b", "[" EP("10.88.0.7", "true", "") "]"));
    json_object_object_add(svcs, "default/a", svc_ep("a", "10.96.0.20", ""));
    json_object_object_del(svcs, "default/c");
    json_object_object_del(slices, "default/c-x");
    step(svcs, slices, (const char *[]){"default/a", "default/b", "default/c", "default/nothing", NULL});
    _cleanup_free_ char *table = kite_asprintf("kite-proxy-unit-%d", (int)getpid());
    _cleanup_free_ char *cleanup = kite_proxy_cleanup_script(table);
    apply(cleanup);
    json_object_put(state);
    json_object_put(svcs);
    json_object_put(slices);
}

Test(proxy_ruleset, kube_dns_goes_to_the_node_responder_without_dns_pods) {
    struct kite_proxy_ruleset_options o = OPTS;
    o.local_dns = "10.88.0.1";
    const char *spec = "{\"clusterIP\":\"10.96.0.10\",\"ports\":[{\"name\":\"dns\",\"port\":53,\"protocol\":\"UDP\"},"
                       "{\"name\":\"dns-tcp\",\"port\":53,\"protocol\":\"TCP\"}]}";
    json_object *svcs = json_object_new_object();
    _cleanup_free_ char *t = kite_asprintf("{\"metadata\":{\"namespace\":\"kube-system\",\"name\":\"kube-dns\"},\"spec\":%s}", spec);
    json_object_object_add(svcs, "kube-system/kube-dns", parse(t));
    json_object_object_add(svcs, "default/kube-dns", svc("kube-dns", spec)); /* another namespace's: not */
    json_object *slices = json_object_new_object();
    _cleanup_free_ char *s = kite_proxy_ruleset(&o, svcs, slices, NULL);
    if (geteuid() == 0) {
        char *err = NULL;
        cr_expect_eq(kite_proxy_nft_run(s, true, &err), 0, "nftables refused:\n%s\n%s", err ? err : "", s);
        free(err);
    }
    cr_assert(strstr(s, "10.96.0.10 . udp . 53 : goto svc-"), "%s", s);
    cr_assert(strstr(s, "10.96.0.10 . tcp . 53 : goto svc-"), "%s", s);
    cr_assert(strstr(s, "meta l4proto udp dnat to 10.88.0.1:53"), "%s", s);
    cr_assert(strstr(s, "meta l4proto tcp dnat to 10.88.0.1:53"), "%s", s);
    cr_assert(strstr(s, "set no-ep { type ipv4_addr . inet_proto . inet_service; elements = { 10.96.0.10 . udp . 53, "
                        "10.96.0.10 . tcp . 53 }; }"), "default/kube-dns has no endpoints:\n%s", s);
    /* DNS pods of its own (endpoints): those, not the node's responder */
    json_object_object_add(slices, "kube-system/kube-dns-x",
                           parse("{\"metadata\":{\"namespace\":\"kube-system\",\"name\":\"kube-dns-x\",\"labels\":"
                                 "{\"kubernetes.io/service-name\":\"kube-dns\"}},\"addressType\":\"IPv4\",\"ports\":"
                                 "[{\"name\":\"dns\",\"port\":5353,\"protocol\":\"UDP\"}],\"endpoints\":"
                                 "[{\"addresses\":[\"10.88.0.9\"],\"conditions\":{\"ready\":true}}]}"));
    _cleanup_free_ char *s2 = kite_proxy_ruleset(&o, svcs, slices, NULL);
    cr_assert(strstr(s2, "meta l4proto udp dnat to 10.88.0.9:5353"), "%s", s2);
    cr_assert_null(strstr(s2, "meta l4proto udp dnat to 10.88.0.1:53"), "%s", s2);
    cr_assert(strstr(s2, "meta l4proto tcp dnat to 10.88.0.1:53"), "the TCP port has no endpoint of its own:\n%s", s2);
    json_object_put(svcs);
    json_object_put(slices);
}
