/* The cache of forwarded answers (dns.h): kubeadm's Corefile has `cache 30` in front of
 * `forward`, so a name asked again within 30 s (or its records' TTL, if less) is answered from
 * memory; NXDOMAIN and NODATA answers are kept for their SOA's negative TTL (RFC 2308), capped
 * the same. Errors, truncated answers and negative answers without an SOA are not kept. Packets
 * are read and rewritten with ldns: the id and question of the query being answered, the TTLs
 * counted down. Used by the responder's one thread: no lock. */
#include <ctype.h>
#include <errno.h>
#include "agent/dns/ldns.h"
#include <string.h>

#include "agent/dns/dns.h"
#include "base/base.h"
#include "base/map.h"

struct entry {
    uint8_t *wire;
    size_t len;
    int64_t stored_ms, expires_ms;
};

struct kite_dns_cache {
    struct kite_map map; /* key -> struct entry */
    size_t max;
};

struct kite_dns_cache *kite_dns_cache_new(size_t max) {
    struct kite_dns_cache *c = kite_calloc(1, sizeof *c);
    c->max = max ? max : KITE_DNS_CACHE_MAX;
    return c;
}

static void entry_free(struct entry *e) {
    if (!e) return;
    free(e->wire);
    free(e);
}

void kite_dns_cache_free(struct kite_dns_cache *c) {
    if (!c) return;
    const char *k;
    void *v;
    for (size_t i = 0; kite_map_next(&c->map, &i, &k, &v);) entry_free(v);
    kite_map_release(&c->map);
    free(c);
}

size_t kite_dns_cache_len(struct kite_dns_cache *c) { return c->map.len; }

/* "name/type/class" of a packet's one question, the name lowercased; NULL if it has not one */
static char *key_of(ldns_pkt *p) {
    if (ldns_pkt_qdcount(p) != 1) return NULL;
    ldns_rr *q = ldns_rr_list_rr(ldns_pkt_question(p), 0);
    char *name = ldns_rdf2str(ldns_rr_owner(q));
    if (!name) return NULL;
    for (char *s = name; *s; s++) *s = (char)tolower((unsigned char)*s);
    char *k = kite_asprintf("%s/%u/%u", name, (unsigned)ldns_rr_get_type(q), (unsigned)ldns_rr_get_class(q));
    free(name);
    return k;
}

/* how long an answer may be kept (s), 0 = not at all */
static uint32_t keep_for(ldns_pkt *p) {
    if (ldns_pkt_tc(p) || !ldns_pkt_qr(p)) return 0;
    ldns_pkt_rcode rc = ldns_pkt_get_rcode(p);
    uint32_t ttl = KITE_DNS_CACHE_TTL_MAX;
    if (rc == LDNS_RCODE_NOERROR && ldns_pkt_ancount(p) > 0) {
        ldns_rr_list *an = ldns_pkt_answer(p);
        for (size_t i = 0; i < ldns_rr_list_rr_count(an); i++)
            ttl = KITE_MIN(ttl, ldns_rr_ttl(ldns_rr_list_rr(an, i)));
        return ttl;
    }
    if (rc != LDNS_RCODE_NOERROR && rc != LDNS_RCODE_NXDOMAIN) return 0;
    /* negative: the SOA's own TTL and its minimum field, the smaller (RFC 2308 section 5) */
    ldns_rr_list *au = ldns_pkt_authority(p);
    for (size_t i = 0; i < ldns_rr_list_rr_count(au); i++) {
        ldns_rr *rr = ldns_rr_list_rr(au, i);
        if (ldns_rr_get_type(rr) != LDNS_RR_TYPE_SOA || ldns_rr_rd_count(rr) < 7) continue;
        uint32_t min = ldns_rdf2native_int32(ldns_rr_rdf(rr, 6));
        return KITE_MIN(ttl, KITE_MIN(ldns_rr_ttl(rr), min));
    }
    return 0;
}

void kite_dns_cache_put(struct kite_dns_cache *c, const uint8_t *answer, size_t len, int64_t now_ms) {
    if (len > KITE_DNS_UDP_MAX) return; /* fits any client: one that sent no EDNS too */
    if (kite_ldns_load(NULL) < 0) return;
    ldns_pkt *p = NULL;
    if (ldns_wire2pkt(&p, answer, len) != LDNS_STATUS_OK) return;
    uint32_t ttl = keep_for(p);
    char *key = ttl ? key_of(p) : NULL;
    ldns_pkt_free(p);
    if (!key) return;
    if (c->map.len >= c->max && !kite_map_get(&c->map, key)) {
        /* full: the expired ones go; if none, one at random (the map's first) */
        const char *k;
        void *v;
        size_t gone = 0;
        for (size_t i = 0; kite_map_next(&c->map, &i, &k, &v);)
            if (((struct entry *)v)->expires_ms <= now_ms) {
                entry_free(kite_map_del(&c->map, k));
                gone++;
            }
        if (!gone) {
            size_t i = 0;
            if (kite_map_next(&c->map, &i, &k, &v)) entry_free(kite_map_del(&c->map, k));
        }
    }
    struct entry *e = kite_calloc(1, sizeof *e);
    e->wire = kite_malloc(len);
    memcpy(e->wire, answer, len);
    e->len = len;
    e->stored_ms = now_ms;
    e->expires_ms = now_ms + (int64_t)ttl * 1000;
    entry_free(kite_map_put(&c->map, key, e));
    free(key);
}

int kite_dns_cache_get(struct kite_dns_cache *c, const uint8_t *query, size_t qlen, int64_t now_ms, uint8_t **ret,
                       size_t *ret_len) {
    if (kite_ldns_load(NULL) < 0) return -ENOENT;
    ldns_pkt *q = NULL;
    if (ldns_wire2pkt(&q, query, qlen) != LDNS_STATUS_OK) return -EBADMSG;
    _cleanup_free_ char *key = key_of(q);
    struct entry *e = key ? kite_map_get(&c->map, key) : NULL;
    if (e && e->expires_ms <= now_ms) {
        entry_free(kite_map_del(&c->map, key));
        e = NULL;
    }
    ldns_pkt *a = NULL;
    if (!e || ldns_wire2pkt(&a, e->wire, e->len) != LDNS_STATUS_OK) {
        ldns_pkt_free(q);
        return -ENOENT;
    }
    /* the query's id and question (its letters' case: a resolver may check them), the TTLs
     * less the time kept and no more than what is left of the entry's */
    ldns_pkt_set_id(a, ldns_pkt_id(q));
    ldns_pkt_set_rd(a, ldns_pkt_rd(q));
    ldns_pkt_set_cd(a, ldns_pkt_cd(q));
    ldns_rr_list_deep_free(ldns_pkt_question(a));
    ldns_pkt_set_question(a, ldns_rr_list_clone(ldns_pkt_question(q)));
    uint32_t elapsed = (uint32_t)((now_ms - e->stored_ms) / 1000);
    uint32_t left = (uint32_t)((e->expires_ms - now_ms + 999) / 1000);
    ldns_rr_list *secs[] = {ldns_pkt_answer(a), ldns_pkt_authority(a), ldns_pkt_additional(a)};
    for (size_t s = 0; s < 3; s++)
        for (size_t i = 0; i < ldns_rr_list_rr_count(secs[s]); i++) {
            ldns_rr *rr = ldns_rr_list_rr(secs[s], i);
            uint32_t t = ldns_rr_ttl(rr);
            t = t > elapsed ? t - elapsed : 0;
            ldns_rr_set_ttl(rr, KITE_MIN(t, left));
        }
    int r = ldns_pkt2wire(ret, a, ret_len) == LDNS_STATUS_OK ? 0 : -ENOMEM;
    ldns_pkt_free(a);
    ldns_pkt_free(q);
    return r;
}
