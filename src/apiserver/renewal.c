/* Lease renewals spliced into the stored text: the full update's answer, without a parse.
 *
 * The write a cluster makes most is a node agent renewing its Lease: a PUT of the object as the
 * server last answered it, with a new spec.renewTime. The full update decodes the body and the
 * stored object, checks the schema, finds that only renewTime changed, runs admission and the
 * kind's validation on what it checked before, moves the time of the renewer's managedFields
 * entry (managed.c's update_in_place) and encodes the result: about half the HTTP worker's time
 * for a renewal (BENCHMARKS.md, "Lease renewals spliced"). When the body is, member for member
 * and byte for byte, the stored text but for metadata.resourceVersion (the current revision:
 * the write's precondition), spec.renewTime (a MicroTime in canonical form) and the metadata
 * the update keeps from the stored object when the body leaves it out (uid, creationTimestamp,
 * managedFields: the agent leaves them out), that result is the stored text with renewTime and
 * that entry's time replaced. Anything else takes the full path: another change, the same object
 * written in another form, other managers' entries, a renewTime left as it was. The e2e test
 * test_leases.py checks that both paths store the same text. */
#include "apiserver/internal.h"

#include "base/clock.h"
#include "base/gotime.h"
#include "json/scan.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* The JSON string v[0..vn) is want, written without escapes (want has none to write). */
static bool json_str_is(const char *v, size_t vn, const char *want) {
    size_t n = strlen(want);
    return vn == n + 2 && v[0] == '"' && v[vn - 1] == '"' && memcmp(v + 1, want, n) == 0;
}

/* want is written as itself in JSON: printable ASCII, no quote or backslash, none of the bytes
 * an encoder may escape for HTML. */
static bool plain(const char *want) {
    for (const unsigned char *p = (const unsigned char *)want; *p; p++)
        if (*p < 0x20 || *p > 0x7e || strchr("\"\\<>&", *p)) return false;
    return true;
}

static bool same_bytes(const char *a, const char *a_end, const char *b, const char *b_end) {
    return a_end - a == b_end - b && memcmp(a, b, (size_t)(a_end - a)) == 0;
}

/* The single entry of the stored managedFields mf: the renewer's Update entry of api_version
 * that owns spec.renewTime. Its "time" value's span into *time. */
static bool renewer_entry(const char *mf, size_t mfn, const char *manager, const char *api_version, const char **time,
                          size_t *time_n) {
    const char *e;
    size_t en;
    if (!mf || kite_json_array_only(mf, mfn, &e, &en) != 1) return false;
    static const char *const names[] = {"manager", "operation", "apiVersion", "fieldsType", "subresource", "time", "fieldsV1"};
    const char *v[KITE_ARRAY_SIZE(names)];
    size_t vn[KITE_ARRAY_SIZE(names)];
    if (kite_json_members(e, en, KITE_ARRAY_SIZE(names), names, v, vn) < 0) return false;
    if (!v[0] || !json_str_is(v[0], vn[0], manager) || !v[1] || !json_str_is(v[1], vn[1], "Update") || !v[2] ||
        !json_str_is(v[2], vn[2], api_version) || !v[3] || !json_str_is(v[3], vn[3], "FieldsV1") || v[4] || !v[5] ||
        *v[5] != '"' || !v[6])
        return false;
    const char *fs, *rt;
    size_t fsn, rtn;
    if (kite_json_member(v[6], vn[6], "f:spec", &fs, &fsn) != 1 || kite_json_member(fs, fsn, "f:renewTime", &rt, &rtn) != 1)
        return false;
    *time = v[5];
    *time_n = vn[5];
    return true;
}

/* rt[0..n) is a MicroTime string as the server writes it ("2006-01-02T15:04:05.000000Z"). */
static bool canonical_microtime(const char *rt, size_t n) {
    char in[32], again[32];
    if (n != 29 || rt[0] != '"' || rt[n - 1] != '"') return false;
    memcpy(in, rt + 1, n - 2);
    in[n - 2] = 0;
    int64_t sec;
    int32_t nsec;
    return kite_gotime_parse(in, true, &sec, &nsec, NULL) == 0 && kite_gotime_format(sec, nsec, true, again) == 0 &&
           strcmp(in, again) == 0;
}

static bool json_ws(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

static bool name_is(const char *k, size_t kn, const char *want) { return kn == strlen(want) && memcmp(k, want, kn) == 0; }

/* What a walk found: the body's resourceVersion and renewTime, the stored renewTime and
 * managedFields. */
struct found {
    const char *rv, *rt, *old_rt, *mf;
    size_t rv_n, rt_n, old_rt_n, mf_n;
};

/* The object s (stored) against b (the body), member by member in order, at level
 * (0: the object, 1: metadata, 2: spec): equal bytes but for the values found, and the stored
 * members the body may leave out. */
static bool walk(const char *s, size_t sn, const char *b, size_t bn, int level, struct found *f, size_t *b_end) {
    size_t i = 1, j = 1;
    if (sn < 2 || bn < 2 || *s != '{' || *b != '{') return false;
    for (;;) {
        const char *sk, *sv, *bk, *bv;
        size_t skn, svn, bkn, bvn, j0 = j;
        int rs = kite_json_next(s, sn, &i, true, &sk, &skn, &sv, &svn);
        int rb = kite_json_next(b, bn, &j, true, &bk, &bkn, &bv, &bvn);
        if (rs < 0 || rb < 0) return false;
        if (rs == 0) {
            *b_end = j;
            return rb == 0;
        }
        bool same_name = rb == 1 && bkn == skn && memcmp(bk, sk, skn) == 0;
        if (level == 1 && name_is(sk, skn, "managedFields")) f->mf = sv, f->mf_n = svn;
        if (!same_name && level == 1 &&
            (name_is(sk, skn, "uid") || name_is(sk, skn, "creationTimestamp") || name_is(sk, skn, "managedFields"))) {
            j = j0; /* the body left it out: the stored one stays */
            continue;
        }
        size_t end;
        if (!same_name) return false;
        if (level == 0 && name_is(sk, skn, "metadata")) {
            if (!walk(sv, svn, bv, bvn, 1, f, &end) || end != bvn) return false;
        } else if (level == 0 && name_is(sk, skn, "spec")) {
            if (!walk(sv, svn, bv, bvn, 2, f, &end) || end != bvn) return false;
        } else if (level == 1 && name_is(sk, skn, "resourceVersion")) {
            f->rv = bv, f->rv_n = bvn;
        } else if (level == 2 && name_is(sk, skn, "renewTime")) {
            f->rt = bv, f->rt_n = bvn, f->old_rt = sv, f->old_rt_n = svn;
        } else if (svn != bvn || memcmp(sv, bv, svn) != 0) {
            return false;
        }
    }
}

int kite_apiserver_renewal_splice(const char *s, size_t sn, const char *b, size_t bn, int64_t rev, const char *manager,
                                  const char *api_version, int64_t now_wall_ns, struct kite_buf *out) {
    if (!manager || !plain(manager) || !plain(api_version)) return -1;
    while (bn && json_ws(b[bn - 1])) bn--; /* around the object */
    while (bn && json_ws(*b)) b++, bn--;
    struct found f = {0};
    size_t end;
    if (!walk(s, sn, b, bn, 0, &f, &end) || end != bn || !f.rv || !f.rt) return -1;
    char want_rv[32];
    snprintf(want_rv, sizeof want_rv, "%" PRId64, rev);
    if (!json_str_is(f.rv, f.rv_n, want_rv)) return -1; /* a stale or missing precondition: the full path answers it */
    if (!canonical_microtime(f.rt, f.rt_n) || same_bytes(f.old_rt, f.old_rt + f.old_rt_n, f.rt, f.rt + f.rt_n)) return -1;
    const char *tm;
    size_t tmn;
    if (!renewer_entry(f.mf, f.mf_n, manager, api_version, &tm, &tmn) || tm > f.old_rt) return -1;
    char now[21];
    kite_time_format(now_wall_ns, now);
    kite_buf_reserve(out, sn + 32); /* the stored text's length, give or take the two values */
    const char *rt = f.old_rt, *rt_end = f.old_rt + f.old_rt_n;
    kite_buf_append(out, s, (size_t)(tm - s));
    kite_buf_putc(out, '"');
    kite_buf_puts(out, now);
    kite_buf_putc(out, '"');
    kite_buf_append(out, tm + tmn, (size_t)(rt - (tm + tmn)));
    kite_buf_append(out, f.rt, f.rt_n);
    kite_buf_append(out, rt_end, (size_t)(s + sn - rt_end));
    return 0;
}
