/* The node agent's ServiceAccount token cache (satoken.h). Keyed as the kubelet's keyFunc: the
 * ServiceAccount, namespace, audience, lifetime and bound pod; each entry remembers when its
 * token was issued and expires, and the jittered moment it is due for a refresh. */
#include "agent/pods/satoken.h"
#include "api/registry.h"
#include "base/map.h"

#include <pthread.h>
#include <stdio.h>

struct entry {
    char *token;
    char *pod_uid;
    int64_t issued, expires, refresh_at; /* wall ns */
};

struct kite_satokens {
    struct kite_satokens_options o;
    pthread_mutex_t lock;
    struct kite_map cache; /* key -> struct entry */
};

struct kite_satokens *kite_satokens_new(const struct kite_satokens_options *o) {
    struct kite_satokens *t = kite_calloc(1, sizeof *t);
    t->o = *o;
    if (!t->o.clock) t->o.clock = kite_clock_real();
    pthread_mutex_init(&t->lock, NULL);
    return t;
}

static void entry_free(struct entry *e) {
    if (!e) return;
    if (e->token) explicit_bzero(e->token, strlen(e->token));
    free(e->token);
    free(e->pod_uid);
    free(e);
}

void kite_satokens_free(struct kite_satokens *t) {
    if (!t) return;
    const char *k;
    void *v;
    for (size_t i = 0; kite_map_next(&t->cache, &i, &k, &v);) entry_free(v);
    kite_map_release(&t->cache);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

size_t kite_satokens_count(struct kite_satokens *t) {
    pthread_mutex_lock(&t->lock);
    size_t n = 0;
    const char *k;
    void *v;
    for (size_t i = 0; kite_map_next(&t->cache, &i, &k, &v);) n++;
    pthread_mutex_unlock(&t->lock);
    return n;
}

/* requiresRefresh: 80% of the lifetime, or 24 h, less a jitter of up to 10 s */
static int64_t refresh_at(int64_t issued, int64_t expires) {
    uint32_t r;
    kite_random_bytes(&r, sizeof r);
    int64_t jitter = (int64_t)((double)r / 4294967296.0 * (double)KITE_SATOKENS_JITTER_NS);
    int64_t at = expires - (expires - issued) * (100 - KITE_SATOKENS_REFRESH_PERCENT) / 100;
    return KITE_MIN(at, issued + KITE_SATOKENS_MAX_TTL_NS) - jitter;
}

/* The oldest entry goes when the cache is full (under the lock). */
static void make_room(struct kite_satokens *t) {
    size_t n = 0;
    const char *k, *oldest = NULL;
    void *v;
    int64_t at = INT64_MAX;
    for (size_t i = 0; kite_map_next(&t->cache, &i, &k, &v);) {
        n++;
        if (((struct entry *)v)->issued < at) at = ((struct entry *)v)->issued, oldest = k;
    }
    if (n >= KITE_SATOKENS_CACHE_MAX && oldest) {
        _cleanup_free_ char *key = kite_strdup(oldest);
        entry_free(kite_map_del(&t->cache, key));
    }
}

static json_object *request_body(const struct kite_satoken_req *r, int64_t exp_s) {
    json_object *tr = json_object_new_object(), *spec = json_object_new_object(), *ref = json_object_new_object();
    kite_obj_set(tr, "apiVersion", json_object_new_string("authentication.k8s.io/v1"));
    kite_obj_set(tr, "kind", json_object_new_string("TokenRequest"));
    if (r->audience && *r->audience) {
        json_object *auds = json_object_new_array();
        json_object_array_add(auds, json_object_new_string(r->audience));
        kite_obj_set(spec, "audiences", auds);
    }
    kite_obj_set(spec, "expirationSeconds", json_object_new_int64(exp_s));
    kite_obj_set(ref, "apiVersion", json_object_new_string("v1"));
    kite_obj_set(ref, "kind", json_object_new_string("Pod"));
    kite_obj_set(ref, "name", json_object_new_string(r->pod_name));
    kite_obj_set(ref, "uid", json_object_new_string(r->pod_uid));
    kite_obj_set(spec, "boundObjectRef", ref);
    kite_obj_set(tr, "spec", spec);
    return tr;
}

/* The Status message of a refused request, or the errno's text. */
static char *failure(int e, json_object *answer) {
    const char *msg = kite_obj_str(answer, "message");
    return kite_asprintf("failed to fetch token: %s", msg && *msg ? msg : strerror(-e));
}

int kite_satokens_get(struct kite_satokens *t, const struct kite_satoken_req *r, char **ret_token,
                      int64_t *ret_refresh_at, char **ret_err) {
    int64_t exp_s = r->expiration_s > 0 ? r->expiration_s : KITE_SATOKENS_DEFAULT_EXPIRATION_S;
    _cleanup_free_ char *key = kite_asprintf("%s/%s/%s/%lld/%s/%s", r->ns, r->sa, r->audience ? r->audience : "",
                                             (long long)exp_s, r->pod_name, r->pod_uid);
    int64_t now = kite_now_wall(t->o.clock);
    pthread_mutex_lock(&t->lock);
    struct entry *e = kite_map_get(&t->cache, key);
    if (e && now < e->refresh_at) {
        *ret_token = kite_strdup(e->token);
        *ret_refresh_at = e->refresh_at;
        pthread_mutex_unlock(&t->lock);
        return 0;
    }
    pthread_mutex_unlock(&t->lock);

    json_object *body = request_body(r, exp_s), *answer = NULL;
    _cleanup_free_ char *path = kite_asprintf("/api/v1/namespaces/%s/serviceaccounts/%s/token", r->ns, r->sa);
    int rc = kite_client_json(t->o.client, "POST", path, "application/json", body, NULL, &answer);
    json_object_put(body);
    json_object *st = kite_obj_get(answer, "status");
    const char *tok = rc == 0 ? kite_obj_str(st, "token") : NULL, *exp_ts = kite_obj_str(st, "expirationTimestamp");
    int64_t expires = 0;
    if (rc == 0 && (!tok || !*tok || !exp_ts || kite_time_parse(exp_ts, &expires) < 0)) rc = -EPROTO;

    pthread_mutex_lock(&t->lock);
    if (rc < 0) {
        /* the kubelet keeps serving a cached token that is still valid */
        e = kite_map_get(&t->cache, key);
        if (e && now < e->expires) {
            *ret_token = kite_strdup(e->token);
            /* asked again soon: the next sync retries the request */
            *ret_refresh_at = now + KITE_SATOKENS_JITTER_NS;
            pthread_mutex_unlock(&t->lock);
            json_object_put(answer);
            return 0;
        }
        pthread_mutex_unlock(&t->lock);
        *ret_err = failure(rc, answer);
        json_object_put(answer);
        return rc;
    }
    struct entry *n = kite_calloc(1, sizeof *n);
    n->token = kite_strdup(tok);
    n->pod_uid = kite_strdup(r->pod_uid);
    /* issued = expiration less the lifetime asked for (the server may have capped it: the
     * kubelet judges by what it asked, as here) */
    n->issued = expires - exp_s * KITE_NS_PER_SEC;
    n->expires = expires;
    n->refresh_at = refresh_at(n->issued, n->expires);
    if (!kite_map_get(&t->cache, key)) make_room(t);
    entry_free(kite_map_put(&t->cache, key, n));
    *ret_token = kite_strdup(n->token);
    *ret_refresh_at = n->refresh_at;
    pthread_mutex_unlock(&t->lock);
    json_object_put(answer);
    return 0;
}

void kite_satokens_forget_pod(struct kite_satokens *t, const char *pod_uid) {
    pthread_mutex_lock(&t->lock);
    const char *k;
    void *v;
    for (size_t i = 0; kite_map_next(&t->cache, &i, &k, &v);) {
        if (!kite_streq(((struct entry *)v)->pod_uid, pod_uid)) continue;
        _cleanup_free_ char *key = kite_strdup(k);
        entry_free(kite_map_del(&t->cache, key));
        i = 0; /* the map changed under the iteration: start over */
    }
    pthread_mutex_unlock(&t->lock);
}

int kite_satoken_source(json_object *pod, json_object *src, unsigned default_mode, struct kite_satoken_req *ret,
                        const char **ret_path, unsigned *ret_mode, const char **ret_err) {
    json_object *spec = kite_obj_get(pod, "spec"), *exp = kite_obj_get(src, "expirationSeconds");
    struct kite_satoken_req r = {.ns = kite_meta_str(pod, "namespace"), .sa = kite_obj_str(spec, "serviceAccountName"),
                                 .pod_name = kite_meta_str(pod, "name"), .pod_uid = kite_meta_str(pod, "uid"),
                                 .audience = kite_obj_str(src, "audience")};
    if (exp && json_object_is_type(exp, json_type_int)) r.expiration_s = json_object_get_int64(exp);
    const char *path = kite_obj_str(src, "path");
    if (!r.ns || !*r.ns || !r.pod_name || !r.pod_uid || !*r.pod_uid) {
        *ret_err = "the pod has no namespace, name or uid to bind a token to";
        return -EINVAL;
    }
    if (!r.sa || !*r.sa) {
        *ret_err = "the pod has no serviceAccountName";
        return -EINVAL;
    }
    if (!path || !*path) {
        *ret_err = "serviceAccountToken.path is empty";
        return -EINVAL;
    }
    bool fs_group = kite_obj_get(kite_obj_get(spec, "securityContext"), "fsGroup") != NULL;
    *ret = r;
    *ret_path = path;
    *ret_mode = fs_group ? 0600 : default_mode;
    return 0;
}
