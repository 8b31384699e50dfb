/* The cluster DNS's answers (agent/dns/zone.c), pure: queries built and answers read with ldns,
 * against Services and EndpointSlices given as JSON. */
#include <criterion/criterion.h>
#include <ldns/ldns.h>
#include <string.h>

#include "agent/dns/dns.h"
#include "base/base.h"
#include "base/buf.h"

TestSuite(dns, .timeout = 30);

static json_object *services, *slices;
static struct kite_dns_zone zone;

static void add(json_object *map, const char *key, const char *js) {
    json_object *o = json_tokener_parse(js);
    cr_assert_not_null(o, "bad fixture: %s", js);
    json_object_object_add(map, key, o);
}

static void setup(void) {
    services = json_object_new_object();
    slices = json_object_new_object();
    zone = (struct kite_dns_zone){.domain = "cluster.local", .services = services, .slices = slices};
    add(services, "default/web",
        "{\"metadata\":{\"namespace\":\"default\",\"name\":\"web\"},\"spec\":{\"clusterIP\":\"10.96.0.20\","
        "\"ports\":[{\"name\":\"http\",\"port\":80,\"protocol\":\"TCP\"},{\"port\":81}]}}");
    add(services, "default/db",
        "{\"metadata\":{\"namespace\":\"default\",\"name\":\"db\"},\"spec\":{\"clusterIP\":\"None\","
        "\"ports\":[{\"name\":\"pg\",\"port\":5432,\"protocol\":\"TCP\"}]}}");
    add(services, "other/ext",
        "{\"metadata\":{\"namespace\":\"other\",\"name\":\"ext\"},\"spec\":{\"type\":\"ExternalName\","
        "\"externalName\":\"example.org\"}}");
    add(slices, "default/db-abc",
        "{\"metadata\":{\"namespace\":\"default\",\"name\":\"db-abc\",\"labels\":{\"kubernetes.io/service-name\":\"db\"}},"
        "\"addressType\":\"IPv4\",\"ports\":[{\"name\":\"pg\",\"port\":5433,\"protocol\":\"TCP\"}],\"endpoints\":["
        "{\"addresses\":[\"10.88.0.5\"],\"hostname\":\"db-0\",\"conditions\":{\"ready\":true}},"
        "{\"addresses\":[\"10.88.0.6\"],\"hostname\":\"db-1\",\"conditions\":{\"ready\":true}},"
        "{\"addresses\":[\"10.88.0.7\"],\"conditions\":{\"ready\":true}},"
        "{\"addresses\":[\"10.88.0.8\"],\"hostname\":\"db-3\",\"conditions\":{\"ready\":false}}]}");
}

static void teardown(void) {
    json_object_put(services);
    json_object_put(slices);
}

/* the answer to (name, type), parsed; NULL when the query is to be forwarded */
static ldns_pkt *ask_edns(const char *name, ldns_rr_type t, size_t max, int edns) {
    ldns_pkt *q = NULL;
    cr_assert_eq(ldns_pkt_query_new_frm_str(&q, name, t, LDNS_RR_CLASS_IN, LDNS_RD), LDNS_STATUS_OK);
    ldns_pkt_set_id(q, 4242);
    if (edns) ldns_pkt_set_edns_udp_size(q, (uint16_t)edns);
    uint8_t *w = NULL;
    size_t n = 0;
    cr_assert_eq(ldns_pkt2wire(&w, q, &n), LDNS_STATUS_OK);
    ldns_pkt_free(q);
    uint8_t *a = NULL;
    size_t an = 0;
    int r = kite_dns_answer(&zone, w, n, max, &a, &an);
    free(w);
    if (r == KITE_DNS_FORWARD) return NULL;
    cr_assert_eq(r, KITE_DNS_ANSWERED, "%s: %d", name, r);
    ldns_pkt *p = NULL;
    cr_assert_eq(ldns_wire2pkt(&p, a, an), LDNS_STATUS_OK);
    free(a);
    cr_assert_eq(ldns_pkt_id(p), 4242);
    cr_assert(ldns_pkt_qr(p));
    return p;
}
static ldns_pkt *ask(const char *name, ldns_rr_type t) { return ask_edns(name, t, KITE_DNS_UDP_MAX, 0); }

/* the answer section's rdata as text, sorted, joined by "|" */
static char *answers(ldns_pkt *p, ldns_rr_type t) {
    ldns_rr_list *l = ldns_pkt_rr_list_by_type(p, t, LDNS_SECTION_ANSWER);
    if (!l) return kite_strdup("");
    ldns_rr_list_sort(l);
    struct kite_buf b = {0};
    for (size_t i = 0; i < ldns_rr_list_rr_count(l); i++) {
        ldns_rr *rr = ldns_rr_list_rr(l, i);
        cr_assert_eq(ldns_rr_ttl(rr), KITE_DNS_TTL);
        for (size_t j = 0; j < ldns_rr_rd_count(rr); j++) {
            char *s = ldns_rdf2str(ldns_rr_rdf(rr, j));
            kite_buf_printf(&b, "%s%s", j ? " " : (i ? "|" : ""), s);
            free(s);
        }
    }
    ldns_rr_list_deep_free(l);
    return kite_buf_detach(&b, NULL);
}

static void expect(const char *name, ldns_rr_type t, ldns_pkt_rcode rc, const char *want) {
    ldns_pkt *p = ask(name, t);
    cr_assert_not_null(p, "%s was forwarded", name);
    cr_expect_eq(ldns_pkt_get_rcode(p), rc, "%s: rcode %d", name, ldns_pkt_get_rcode(p));
    cr_expect(ldns_pkt_aa(p), "%s: not authoritative", name);
    _cleanup_free_ char *got = answers(p, t);
    cr_expect_str_eq(got, want, "%s: got %s", name, got);
    if (!*want) /* negative answers carry the zone's SOA for negative caching */
        cr_expect_eq(ldns_pkt_nscount(p), 1, "%s: no SOA", name);
    ldns_pkt_free(p);
}

Test(dns, service_a_records, .init = setup, .fini = teardown) {
    expect("web.default.svc.cluster.local.", LDNS_RR_TYPE_A, LDNS_RCODE_NOERROR, "10.96.0.20");
    expect("WEB.Default.SVC.cluster.local.", LDNS_RR_TYPE_A, LDNS_RCODE_NOERROR, "10.96.0.20");
    /* headless: the ready endpoints */
    expect("db.default.svc.cluster.local.", LDNS_RR_TYPE_A, LDNS_RCODE_NOERROR, "10.88.0.5|10.88.0.6|10.88.0.7");
    /* NODATA for an existing name without records of the type */
    expect("web.default.svc.cluster.local.", LDNS_RR_TYPE_AAAA, LDNS_RCODE_NOERROR, "");
    /* unknown names inside the domain (what a search path tries first) */
    expect("nope.default.svc.cluster.local.", LDNS_RR_TYPE_A, LDNS_RCODE_NXDOMAIN, "");
    expect("web.default.svc.cluster.local.default.svc.cluster.local.", LDNS_RR_TYPE_A, LDNS_RCODE_NXDOMAIN, "");
    expect("web.nope.svc.cluster.local.", LDNS_RR_TYPE_A, LDNS_RCODE_NXDOMAIN, "");
    expect("foo.cluster.local.", LDNS_RR_TYPE_A, LDNS_RCODE_NXDOMAIN, "");
    expect("default.svc.cluster.local.", LDNS_RR_TYPE_A, LDNS_RCODE_NOERROR, "");
    expect("nope.svc.cluster.local.", LDNS_RR_TYPE_A, LDNS_RCODE_NXDOMAIN, "");
}

Test(dns, headless_endpoint_names, .init = setup, .fini = teardown) {
    expect("db-0.db.default.svc.cluster.local.", LDNS_RR_TYPE_A, LDNS_RCODE_NOERROR, "10.88.0.5");
    expect("db-1.db.default.svc.cluster.local.", LDNS_RR_TYPE_A, LDNS_RCODE_NOERROR, "10.88.0.6");
    expect("10-88-0-7.db.default.svc.cluster.local.", LDNS_RR_TYPE_A, LDNS_RCODE_NOERROR, "10.88.0.7");
    /* not ready: not published */
    expect("db-3.db.default.svc.cluster.local.", LDNS_RR_TYPE_A, LDNS_RCODE_NXDOMAIN, "");
    /* a ClusterIP Service has no per-endpoint names */
    expect("x.web.default.svc.cluster.local.", LDNS_RR_TYPE_A, LDNS_RCODE_NXDOMAIN, "");
}

Test(dns, srv_records, .init = setup, .fini = teardown) {
    expect("_http._tcp.web.default.svc.cluster.local.", LDNS_RR_TYPE_SRV, LDNS_RCODE_NOERROR,
           "0 100 80 web.default.svc.cluster.local.");
    expect("_http._udp.web.default.svc.cluster.local.", LDNS_RR_TYPE_SRV, LDNS_RCODE_NXDOMAIN, "");
    expect("_nope._tcp.web.default.svc.cluster.local.", LDNS_RR_TYPE_SRV, LDNS_RCODE_NXDOMAIN, "");
    /* headless: one per ready endpoint, the endpoint's port, weights shared */
    expect("_pg._tcp.db.default.svc.cluster.local.", LDNS_RR_TYPE_SRV, LDNS_RCODE_NOERROR,
           "0 33 5433 db-0.db.default.svc.cluster.local.|0 33 5433 db-1.db.default.svc.cluster.local.|"
           "0 33 5433 10-88-0-7.db.default.svc.cluster.local."); /* (ldns's canonical order) */
    ldns_pkt *p = ask("_pg._tcp.db.default.svc.cluster.local.", LDNS_RR_TYPE_SRV);
    cr_expect_eq(ldns_pkt_arcount(p), 3, "the targets' A records are additional");
    ldns_pkt_free(p);
}

Test(dns, pods_external_names_and_ptr, .init = setup, .fini = teardown) {
    expect("10-88-1-2.default.pod.cluster.local.", LDNS_RR_TYPE_A, LDNS_RCODE_NOERROR, "10.88.1.2");
    expect("10-88-1-x.default.pod.cluster.local.", LDNS_RR_TYPE_A, LDNS_RCODE_NXDOMAIN, "");
    expect("ext.other.svc.cluster.local.", LDNS_RR_TYPE_CNAME, LDNS_RCODE_NOERROR, "example.org.");
    expect("20.0.96.10.in-addr.arpa.", LDNS_RR_TYPE_PTR, LDNS_RCODE_NOERROR, "web.default.svc.cluster.local.");
    expect("5.0.88.10.in-addr.arpa.", LDNS_RR_TYPE_PTR, LDNS_RCODE_NOERROR, "db-0.db.default.svc.cluster.local.");
    /* another address's PTR is the upstream's */
    cr_expect_null(ask("1.1.168.192.in-addr.arpa.", LDNS_RR_TYPE_PTR));
    expect("cluster.local.", LDNS_RR_TYPE_SOA, LDNS_RCODE_NOERROR,
           "ns.dns.cluster.local. hostmaster.cluster.local. 1 7200 1800 86400 30");
}

Test(dns, other_names_are_forwarded, .init = setup, .fini = teardown) {
    cr_expect_null(ask("example.org.", LDNS_RR_TYPE_A));
    cr_expect_null(ask("cluster.local.example.org.", LDNS_RR_TYPE_A));
    cr_expect_null(ask("xcluster.local.", LDNS_RR_TYPE_A));
}

Test(dns, large_answers_truncate, .init = setup, .fini = teardown) {
    struct kite_buf b = {0};
    kite_buf_printf(&b, "{\"metadata\":{\"namespace\":\"default\",\"name\":\"big-x\",\"labels\":{\"kubernetes.io/"
                        "service-name\":\"db\"}},\"addressType\":\"IPv4\",\"endpoints\":[");
    for (int i = 0; i < 100; i++) kite_buf_printf(&b, "%s{\"addresses\":[\"10.89.0.%d\"]}", i ? "," : "", i + 1);
    kite_buf_printf(&b, "]}");
    _cleanup_free_ char *js = kite_buf_detach(&b, NULL);
    add(slices, "default/big-x", js);
    ldns_pkt *p = ask("db.default.svc.cluster.local.", LDNS_RR_TYPE_A);
    cr_expect(ldns_pkt_tc(p));
    cr_expect_eq(ldns_pkt_ancount(p), 0);
    ldns_pkt_free(p);
    /* EDNS: up to the client's size, at most KITE_DNS_EDNS_MAX (103 A records ~1.7 KB: still TC) */
    p = ask_edns("db.default.svc.cluster.local.", LDNS_RR_TYPE_A, KITE_DNS_UDP_MAX, 4096);
    cr_expect(ldns_pkt_tc(p));
    ldns_pkt_free(p);
    /* TCP: whole */
    p = ask_edns("db.default.svc.cluster.local.", LDNS_RR_TYPE_A, 65535, 0);
    cr_expect(!ldns_pkt_tc(p));
    cr_expect_eq(ldns_pkt_ancount(p), 103);
    ldns_pkt_free(p);
}

Test(dns, garbage_is_not_answered, .init = setup, .fini = teardown) {
    uint8_t junk[5] = {1, 2, 3, 4, 5}, *a = NULL;
    size_t an = 0;
    cr_expect_eq(kite_dns_answer(&zone, junk, sizeof junk, KITE_DNS_UDP_MAX, &a, &an), -EBADMSG);
    cr_expect_eq(kite_dns_servfail(junk, sizeof junk, &a, &an), -EBADMSG);
}

Test(dns, upstreams_from_resolv_conf) {
    char *up[KITE_DNS_UPSTREAMS_MAX];
    size_t n = kite_dns_upstreams("# x\nsearch a b\nnameserver 10.88.0.1\nnameserver 192.0.2.1 \n"
                                  "nameserver ::1\nnameserver bogus\nnameserver 192.0.2.2\nnameserver 192.0.2.3\n",
                                  "10.88.0.1", up);
    cr_assert_eq(n, 3);
    cr_expect_str_eq(up[0], "192.0.2.1");
    cr_expect_str_eq(up[1], "::1");
    cr_expect_str_eq(up[2], "192.0.2.2");
    for (size_t i = 0; i < n; i++) free(up[i]);
}

/* ---- the cache of forwarded answers ---- */

static uint8_t *wire_of(ldns_pkt *p, size_t *n) {
    uint8_t *w = NULL;
    cr_assert_eq(ldns_pkt2wire(&w, p, n), LDNS_STATUS_OK);
    return w;
}

static uint8_t *query_wire(const char *name, ldns_rr_type t, uint16_t id, size_t *n) {
    ldns_pkt *q = NULL;
    cr_assert_eq(ldns_pkt_query_new_frm_str(&q, name, t, LDNS_RR_CLASS_IN, LDNS_RD), LDNS_STATUS_OK);
    ldns_pkt_set_id(q, id);
    uint8_t *w = wire_of(q, n);
    ldns_pkt_free(q);
    return w;
}

/* an upstream's answer to name: rcode, and records given as zone-file lines (NULL-ended) */
static uint8_t *answer_wire(const char *name, ldns_rr_type t, uint16_t id, ldns_pkt_rcode rc, const char *const answers[],
                            const char *const authority[], size_t *n) {
    ldns_pkt *a = NULL;
    cr_assert_eq(ldns_pkt_query_new_frm_str(&a, name, t, LDNS_RR_CLASS_IN, LDNS_RD), LDNS_STATUS_OK);
    ldns_pkt_set_id(a, id);
    ldns_pkt_set_qr(a, true);
    ldns_pkt_set_ra(a, true);
    ldns_pkt_set_rcode(a, (uint8_t)rc);
    for (size_t i = 0; answers && answers[i]; i++) {
        ldns_rr *rr = NULL;
        cr_assert_eq(ldns_rr_new_frm_str(&rr, answers[i], 0, NULL, NULL), LDNS_STATUS_OK, "%s", answers[i]);
        ldns_pkt_push_rr(a, LDNS_SECTION_ANSWER, rr);
    }
    for (size_t i = 0; authority && authority[i]; i++) {
        ldns_rr *rr = NULL;
        cr_assert_eq(ldns_rr_new_frm_str(&rr, authority[i], 0, NULL, NULL), LDNS_STATUS_OK, "%s", authority[i]);
        ldns_pkt_push_rr(a, LDNS_SECTION_AUTHORITY, rr);
    }
    uint8_t *w = wire_of(a, n);
    ldns_pkt_free(a);
    return w;
}

/* the cached answer to (name, t) at now_ms, parsed, or NULL */
static ldns_pkt *cached(struct kite_dns_cache *c, const char *name, ldns_rr_type t, uint16_t id, int64_t now) {
    size_t qn = 0, an = 0;
    _cleanup_free_ uint8_t *q = query_wire(name, t, id, &qn);
    uint8_t *a = NULL;
    if (kite_dns_cache_get(c, q, qn, now, &a, &an) < 0) return NULL;
    ldns_pkt *p = NULL;
    cr_assert_eq(ldns_wire2pkt(&p, a, an), LDNS_STATUS_OK);
    free(a);
    return p;
}

Test(dns, cache_keeps_answers_for_their_ttl_capped_at_30_s) {
    struct kite_dns_cache *c = kite_dns_cache_new(0);
    size_t n = 0;
    _cleanup_free_ uint8_t *a = answer_wire("Host.Example.", LDNS_RR_TYPE_A, 7, LDNS_RCODE_NOERROR,
                                            (const char *[]){"host.example. 300 IN A 192.0.2.1", NULL}, NULL, &n);
    kite_dns_cache_put(c, a, n, 1000);
    cr_assert_eq(kite_dns_cache_len(c), 1);
    /* 10 s later, another client, other letters' case: its id and question, TTL 30 - 10 */
    ldns_pkt *p = cached(c, "hOST.example.", LDNS_RR_TYPE_A, 99, 11000);
    cr_assert_not_null(p);
    cr_assert_eq(ldns_pkt_id(p), 99);
    cr_assert_eq(ldns_pkt_get_rcode(p), LDNS_RCODE_NOERROR);
    char *qn = ldns_rdf2str(ldns_rr_owner(ldns_rr_list_rr(ldns_pkt_question(p), 0)));
    cr_assert_str_eq(qn, "hOST.example.");
    free(qn);
    cr_assert_eq(ldns_pkt_ancount(p), 1);
    cr_assert_eq(ldns_rr_ttl(ldns_rr_list_rr(ldns_pkt_answer(p), 0)), 20);
    ldns_pkt_free(p);
    /* another type is another entry */
    cr_assert_null(cached(c, "host.example.", LDNS_RR_TYPE_AAAA, 1, 11000));
    /* past 30 s: gone */
    cr_assert_null(cached(c, "host.example.", LDNS_RR_TYPE_A, 1, 31001));
    cr_assert_eq(kite_dns_cache_len(c), 0);
    /* a record's TTL below 30 s bounds the entry, and counts down */
    _cleanup_free_ uint8_t *b = answer_wire("short.example.", LDNS_RR_TYPE_A, 8, LDNS_RCODE_NOERROR,
                                            (const char *[]){"short.example. 5 IN A 192.0.2.2", NULL}, NULL, &n);
    kite_dns_cache_put(c, b, n, 0);
    p = cached(c, "short.example.", LDNS_RR_TYPE_A, 2, 3000);
    cr_assert_not_null(p);
    cr_assert_eq(ldns_rr_ttl(ldns_rr_list_rr(ldns_pkt_answer(p), 0)), 2);
    ldns_pkt_free(p);
    cr_assert_null(cached(c, "short.example.", LDNS_RR_TYPE_A, 2, 5000));
    kite_dns_cache_free(c);
}

Test(dns, cache_keeps_negative_answers_by_their_soa) {
    struct kite_dns_cache *c = kite_dns_cache_new(0);
    size_t n = 0;
    static const char *const soa[] = {"example. 3600 IN SOA ns.example. host.example. 1 7200 900 1209600 10", NULL};
    _cleanup_free_ uint8_t *nx = answer_wire("nope.example.", LDNS_RR_TYPE_A, 7, LDNS_RCODE_NXDOMAIN, NULL, soa, &n);
    kite_dns_cache_put(c, nx, n, 0);
    ldns_pkt *p = cached(c, "nope.example.", LDNS_RR_TYPE_A, 3, 4000);
    cr_assert_not_null(p);
    cr_assert_eq(ldns_pkt_get_rcode(p), LDNS_RCODE_NXDOMAIN);
    cr_assert_eq(ldns_pkt_nscount(p), 1);
    ldns_pkt_free(p);
    /* the SOA's minimum (10 s) bounds it, not its TTL */
    cr_assert_null(cached(c, "nope.example.", LDNS_RR_TYPE_A, 3, 10000));
    /* NODATA likewise */
    _cleanup_free_ uint8_t *nd = answer_wire("host.example.", LDNS_RR_TYPE_AAAA, 7, LDNS_RCODE_NOERROR, NULL, soa, &n);
    kite_dns_cache_put(c, nd, n, 0);
    p = cached(c, "host.example.", LDNS_RR_TYPE_AAAA, 3, 1000);
    cr_assert_not_null(p);
    cr_assert_eq(ldns_pkt_ancount(p), 0);
    ldns_pkt_free(p);
    /* not kept: a negative answer without SOA, SERVFAIL, REFUSED, a truncated answer */
    _cleanup_free_ uint8_t *bare = answer_wire("bare.example.", LDNS_RR_TYPE_A, 7, LDNS_RCODE_NXDOMAIN, NULL, NULL, &n);
    kite_dns_cache_put(c, bare, n, 0);
    _cleanup_free_ uint8_t *sf = answer_wire("sf.example.", LDNS_RR_TYPE_A, 7, LDNS_RCODE_SERVFAIL, NULL, soa, &n);
    kite_dns_cache_put(c, sf, n, 0);
    _cleanup_free_ uint8_t *rf = answer_wire("rf.example.", LDNS_RR_TYPE_A, 7, LDNS_RCODE_REFUSED, NULL, soa, &n);
    kite_dns_cache_put(c, rf, n, 0);
    _cleanup_free_ uint8_t *tc = answer_wire("tc.example.", LDNS_RR_TYPE_A, 7, LDNS_RCODE_NOERROR,
                                             (const char *[]){"tc.example. 300 IN A 192.0.2.3", NULL}, NULL, &n);
    tc[2] |= 0x02; /* TC */
    kite_dns_cache_put(c, tc, n, 0);
    /* (the expired NXDOMAIN went when it was asked for) */
    cr_assert_eq(kite_dns_cache_len(c), 1, "only the NODATA with an SOA is kept: %zu", kite_dns_cache_len(c));
    kite_dns_cache_free(c);
}

Test(dns, cache_is_bounded) {
    struct kite_dns_cache *c = kite_dns_cache_new(3);
    size_t n = 0;
    for (int i = 0; i < 5; i++) {
        _cleanup_free_ char *name = kite_asprintf("h%d.example.", i);
        _cleanup_free_ char *rr = kite_asprintf("%s 300 IN A 192.0.2.%d", name, i + 1);
        _cleanup_free_ uint8_t *a = answer_wire(name, LDNS_RR_TYPE_A, 7, LDNS_RCODE_NOERROR,
                                                (const char *[]){rr, NULL}, NULL, &n);
        kite_dns_cache_put(c, a, n, i);
        cr_assert_leq(kite_dns_cache_len(c), 3);
    }
    /* the newest is there */
    ldns_pkt *p = cached(c, "h4.example.", LDNS_RR_TYPE_A, 1, 10);
    cr_assert_not_null(p);
    ldns_pkt_free(p);
    kite_dns_cache_free(c);
}
