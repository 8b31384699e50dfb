/* The agent's ServiceAccount token cache (src/agent/pods/satoken.c) against a fake API: the
 * TokenRequest it sends, caching until 80% of the lifetime, refresh after, a cached token kept
 * through a failed refresh, the kubelet's error text, and a pod's tokens forgotten. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "agent/pods/satoken.h"
#include "api/registry.h"
#include "base/clock.h"
#include "json/parse.h"

#define T0 (1700000000LL * KITE_NS_PER_SEC)

struct fake {
    struct kite_fake_clock clock;
    int calls;
    int fail;             /* answer this HTTP code instead (0: 201) */
    char last_path[256];
    json_object *last_body;
};

static int handler(void *ud, const char *method, const char *path, const char *ct, const char *body, size_t len,
                   struct kite_response *ret) {
    struct fake *f = ud;
    f->calls++;
    snprintf(f->last_path, sizeof f->last_path, "%s %s", method, path);
    json_object_put(f->last_body);
    f->last_body = json_tokener_parse(body);
    if (f->fail) {
        ret->status = f->fail;
        ret->body = strdup("{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"serviceaccounts \\\"sa\\\" "
                           "is forbidden: no relationship found\",\"code\":403}");
        ret->len = strlen(ret->body);
        return 0;
    }
    int64_t exp_s = json_object_get_int64(json_object_object_get(json_object_object_get(f->last_body, "spec"),
                                                                 "expirationSeconds"));
    char ts[21];
    kite_time_format(kite_now_wall(&f->clock.clock) + exp_s * KITE_NS_PER_SEC, ts);
    char *b = NULL;
    if (asprintf(&b, "{\"kind\":\"TokenRequest\",\"status\":{\"token\":\"tok-%d\",\"expirationTimestamp\":\"%s\"}}",
                 f->calls, ts) < 0)
        return -ENOMEM;
    ret->status = 201;
    ret->body = b;
    ret->len = strlen(b);
    return 0;
}

static const struct kite_satoken_req REQ = {.ns = "team", .sa = "builder", .pod_name = "web-1", .pod_uid = "uid-1",
                                            .expiration_s = 3600};

static char *get(struct kite_satokens *t, const struct kite_satoken_req *r, int64_t *refresh) {
    char *tok = NULL, *err = NULL;
    int rc = kite_satokens_get(t, r, &tok, refresh, &err);
    cr_assert_eq(rc, 0, "%s", err ? err : "");
    return tok;
}

Test(pods_satoken, request_cache_refresh) {
    struct fake f = {0};
    kite_fake_clock_init(&f.clock, T0);
    struct kite_client *c = kite_client_fake_new(handler, NULL, &f);
    struct kite_satokens_options o = {.client = c, .clock = &f.clock.clock};
    struct kite_satokens *t = kite_satokens_new(&o);
    int64_t refresh = 0;
    char *tok = get(t, &REQ, &refresh);
    cr_assert_str_eq(tok, "tok-1");
    free(tok);
    cr_assert_str_eq(f.last_path, "POST /api/v1/namespaces/team/serviceaccounts/builder/token");
    json_object *spec = json_object_object_get(f.last_body, "spec"), *ref = json_object_object_get(spec, "boundObjectRef");
    cr_assert_str_eq(json_object_get_string(json_object_object_get(f.last_body, "kind")), "TokenRequest");
    cr_assert_eq(json_object_get_int64(json_object_object_get(spec, "expirationSeconds")), 3600);
    cr_assert_null(json_object_object_get(spec, "audiences"), "no audience: the server's");
    cr_assert_str_eq(json_object_get_string(json_object_object_get(ref, "kind")), "Pod");
    cr_assert_str_eq(json_object_get_string(json_object_object_get(ref, "apiVersion")), "v1");
    cr_assert_str_eq(json_object_get_string(json_object_object_get(ref, "name")), "web-1");
    cr_assert_str_eq(json_object_get_string(json_object_object_get(ref, "uid")), "uid-1");
    /* due at 80% of 3600 s, less at most 10 s of jitter */
    int64_t at80 = T0 + 2880 * KITE_NS_PER_SEC;
    cr_assert(refresh <= at80 && refresh > at80 - KITE_SATOKENS_JITTER_NS - 1, "refresh at %lld", (long long)(refresh - T0));
    /* cached until then */
    kite_fake_clock_advance(&f.clock, 2860 * KITE_NS_PER_SEC);
    tok = get(t, &REQ, &refresh);
    cr_assert_str_eq(tok, "tok-1");
    free(tok);
    cr_assert_eq(f.calls, 1);
    /* another audience or another pod is another token */
    struct kite_satoken_req other = REQ;
    other.audience = "vault";
    tok = get(t, &other, &refresh);
    cr_assert_str_eq(tok, "tok-2");
    free(tok);
    cr_assert_str_eq(json_object_get_string(json_object_array_get_idx(
                         json_object_object_get(json_object_object_get(f.last_body, "spec"), "audiences"), 0)),
                     "vault");
    /* past 80%: a new one */
    kite_fake_clock_advance(&f.clock, 30 * KITE_NS_PER_SEC);
    tok = get(t, &REQ, &refresh);
    cr_assert_str_eq(tok, "tok-3");
    free(tok);
    cr_assert_eq(kite_satokens_count(t), 2);
    kite_satokens_forget_pod(t, "uid-1");
    cr_assert_eq(kite_satokens_count(t), 0);
    kite_satokens_free(t);
    kite_client_free(c);
    json_object_put(f.last_body);
}

Test(pods_satoken, failures) {
    struct fake f = {0};
    kite_fake_clock_init(&f.clock, T0);
    struct kite_client *c = kite_client_fake_new(handler, NULL, &f);
    struct kite_satokens_options o = {.client = c, .clock = &f.clock.clock};
    struct kite_satokens *t = kite_satokens_new(&o);
    int64_t refresh = 0;
    /* nothing cached: the kubelet's error */
    f.fail = 403;
    char *tok = NULL, *err = NULL;
    cr_assert_eq(kite_satokens_get(t, &REQ, &tok, &refresh, &err), -EPERM);
    cr_assert_str_eq(err, "failed to fetch token: serviceaccounts \"sa\" is forbidden: no relationship found");
    free(err);
    /* a token due for refresh but still valid is kept through a failed request */
    f.fail = 0;
    free(get(t, &REQ, &refresh));
    kite_fake_clock_advance(&f.clock, 3000 * KITE_NS_PER_SEC);
    f.fail = 503;
    tok = get(t, &REQ, &refresh);
    cr_assert_str_eq(tok, "tok-2");
    free(tok);
    cr_assert_eq(refresh, T0 + 3000 * KITE_NS_PER_SEC + KITE_SATOKENS_JITTER_NS, "retried soon");
    /* ... not once expired */
    kite_fake_clock_advance(&f.clock, 700 * KITE_NS_PER_SEC);
    err = NULL;
    cr_assert_lt(kite_satokens_get(t, &REQ, &tok, &refresh, &err), 0);
    free(err);
    kite_satokens_free(t);
    kite_client_free(c);
    json_object_put(f.last_body);
}

Test(pods_satoken, projected_source) {
    json_object *pod = json_tokener_parse(
        "{\"metadata\":{\"name\":\"web-1\",\"namespace\":\"team\",\"uid\":\"uid-1\"},"
        "\"spec\":{\"serviceAccountName\":\"builder\"}}");
    json_object *src = json_tokener_parse("{\"path\":\"token\",\"expirationSeconds\":3607,\"audience\":\"vault\"}");
    struct kite_satoken_req r;
    const char *path = NULL, *err = NULL;
    unsigned mode = 0;
    cr_assert_eq(kite_satoken_source(pod, src, 0644, &r, &path, &mode, &err), 0);
    cr_assert_str_eq(r.ns, "team");
    cr_assert_str_eq(r.sa, "builder");
    cr_assert_str_eq(r.pod_name, "web-1");
    cr_assert_str_eq(r.pod_uid, "uid-1");
    cr_assert_str_eq(r.audience, "vault");
    cr_assert_eq(r.expiration_s, 3607);
    cr_assert_str_eq(path, "token");
    cr_assert_eq(mode, 0644);
    /* fsGroup: 0600, as the kubelet writes it before SetVolumeOwnership */
    json_object *sc = json_tokener_parse("{\"fsGroup\":2000}");
    json_object_object_add(json_object_object_get(pod, "spec"), "securityContext", sc);
    cr_assert_eq(kite_satoken_source(pod, src, 0644, &r, &path, &mode, &err), 0);
    cr_assert_eq(mode, 0600);
    /* no ServiceAccount, no path */
    json_object_object_del(json_object_object_get(pod, "spec"), "serviceAccountName");
    cr_assert_eq(kite_satoken_source(pod, src, 0644, &r, &path, &mode, &err), -EINVAL);
    cr_assert_str_eq(err, "the pod has no serviceAccountName");
    json_object_put(src);
    json_object_put(pod);
}
