/* ServiceAccount tokens, as kube-apiserver's TokenRequest API (pkg/registry/core/serviceaccount/
 * storage/token.go) and its service-account JWT authenticator (pkg/serviceaccount/jwt.go,
 * claims.go):
 *
 * - POST serviceaccounts/NAME/token with an authentication.k8s.io/v1 TokenRequest issues a JWT
 *   signed by the key in DATA_DIR/pki/sa.key (made on first start), with upstream's claims:
 *   iss, sub system:serviceaccount:NS:NAME, aud, exp, iat, nbf, jti and `kubernetes.io`
 *   {namespace, serviceaccount {name, uid}, pod|secret {name, uid}, node {name, uid}}.
 * - A bearer token the static file and the bootstrap tokens did not know is tried as such a
 *   JWT: signature, exp/nbf (go-jose's one minute of leeway), issuer, audience (one of the
 *   server's), then the ServiceAccount and the bound Pod or Secret must still exist with the
 *   uids of the claims (deleted more than the leeway ago counts as gone); a token bound to a
 *   Node (ServiceAccountTokenNodeBinding) needs that Node. The user is
 *   system:serviceaccount:NS:NAME in system:serviceaccounts and system:serviceaccounts:NS.
 *
 * The key is parsed once; the objects are read from the watch cache's parsed records, so an
 * authentication costs one signature check and a few map lookups, and a deleted pod's token
 * stops working the moment the delete is committed. */
#include "apiserver/internal.h"
#include "api/status.h"
#include "base/base64.h"
#include "json/parse.h"
#include "pki/pki.h"

#include <stdarg.h>
#include <stdio.h>
#include <strings.h>

#define LEEWAY_S 60                  /* go-jose's jwt.DefaultLeeway */
#define SA_USER_PREFIX "system:serviceaccount:"
#define EXTRA_PREFIX "authentication.kubernetes.io/"

struct kite_satoken {
    struct kite_pki_signer *signer;
    char *issuer;
    char **audiences;
    size_t n_audiences;
    int64_t max_expiration_s; /* --service-account-max-token-expiration; 0 = none */
    bool extend_expiration;   /* --service-account-extend-token-expiration */
    _Atomic int64_t stale_logged_s; /* when a stale token's use was last logged */
    _Atomic uint64_t stale_uses;    /* stale uses since then */
};

void kite_apiserver_satoken_set_extend(struct kite_satoken *t, bool on) {
    if (t) t->extend_expiration = on;
}

/* isKubeAudiences: every audience asked is one of the server's */
static bool kube_audiences(const struct kite_satoken *t, json_object *auds) {
    for (size_t i = 0; i < json_object_array_length(auds); i++) {
        const char *a = json_object_get_string(json_object_array_get_idx(auds, i));
        bool found = false;
        for (size_t j = 0; j < t->n_audiences && !found; j++) found = kite_streq(a, t->audiences[j]);
        if (!found) return false;
    }
    return true;
}

/* ---- JWS compact serialization ---------------------------------------------------------- */

static void put_part(struct kite_buf *b, json_object *o) {
    size_t n;
    const char *s = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &n);
    kite_base64_append(b, s, n, true);
}

char *kite_jwt_sign(const struct kite_pki_signer *k, json_object *claims) {
    json_object *h = json_object_new_object();
    kite_obj_set(h, "alg", json_object_new_string(kite_pki_signer_alg(k)));
    kite_obj_set(h, "kid", json_object_new_string(kite_pki_signer_kid(k)));
    struct kite_buf b = {0};
    put_part(&b, h);
    json_object_put(h);
    kite_buf_putc(&b, '.');
    put_part(&b, claims);
    unsigned char *sig = NULL;
    size_t sig_len = 0;
    if (kite_pki_sign(k, b.p, b.len, &sig, &sig_len) < 0) {
        kite_buf_release(&b);
        return NULL;
    }
    kite_buf_putc(&b, '.');
    kite_base64_append(&b, sig, sig_len, true);
    free(sig);
    return kite_buf_detach(&b, NULL);
}

/* A JWT part (RawURLEncoding, as go-jose reads it): its JSON object, NULL when undecodable. */
static json_object *decode_part(const char *s, size_t n) {
    struct kite_buf raw = {0};
    json_object *o = NULL;
    if (n && kite_base64_decode_rawurl(s, n, &raw, NULL) == 0 && raw.len) {
        enum json_tokener_error e;
        size_t used;
        o = kite_json_parse(raw.p, raw.len, KITE_JSON_MAX_DEPTH, &e, &used);
    }
    kite_buf_release(&raw);
    if (o && !json_object_is_type(o, json_type_object)) {
        json_object_put(o);
        return NULL;
    }
    return o;
}

int kite_jwt_verify(const struct kite_pki_signer *k, const char *tok, json_object **ret_claims) {
    size_t n = strlen(tok);
    if (n > KITE_SATOKEN_MAX_BYTES) return -EINVAL;
    const char *d1 = strchr(tok, '.'), *d2 = d1 ? strchr(d1 + 1, '.') : NULL;
    if (!d2 || strchr(d2 + 1, '.')) return -EINVAL;
    if (d1 == tok || d2 == d1 + 1 || !d2[1] || strpbrk(tok, "\r\n")) return -EINVAL; /* three parts, none empty */
    json_object *h = decode_part(tok, (size_t)(d1 - tok));
    if (!h) return -EINVAL;
    /* the key decides the algorithm: "none" or another one is refused before anything else */
    bool alg_ok = kite_streq(kite_obj_str(h, "alg"), kite_pki_signer_alg(k));
    json_object_put(h);
    if (!alg_ok) return -EBADMSG;
    struct kite_buf sig = {0};
    if (kite_base64_decode_rawurl(d2 + 1, strlen(d2 + 1), &sig, NULL) < 0) {
        kite_buf_release(&sig);
        return -EINVAL;
    }
    int vr = kite_pki_verify(k, tok, (size_t)(d2 - tok), (unsigned char *)sig.p, sig.len);
    kite_buf_release(&sig);
    if (vr < 0) return -EBADMSG;
    json_object *claims = decode_part(d1 + 1, (size_t)(d2 - d1 - 1));
    if (!claims) return -EINVAL;
    *ret_claims = claims;
    return 0;
}

/* ---- claims --------------------------------------------------------------------------------- */

json_object *kite_satoken_claims(const struct kite_satoken_subject *sub, const char *issuer, json_object *audiences,
                                 int64_t now_s, int64_t expiration_s) {
    json_object *c = json_object_new_object();
    json_object_get(audiences);
    kite_obj_set(c, "aud", audiences);
    kite_obj_set(c, "exp", json_object_new_int64(now_s + expiration_s));
    kite_obj_set(c, "iat", json_object_new_int64(now_s));
    kite_obj_set(c, "iss", json_object_new_string(issuer));
    char jti[37];
    kite_uuid4(jti);
    kite_obj_set(c, "jti", json_object_new_string(jti));
    json_object *k = json_object_new_object(), *sa = json_object_new_object();
    kite_obj_set(k, "namespace", json_object_new_string(sub->ns));
    static const char *const kinds[] = {"node", "pod", "secret"};
    const char *const names[] = {sub->node_name, sub->pod_name, sub->secret_name};
    const char *const uids[] = {sub->node_uid, sub->pod_uid, sub->secret_uid};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(kinds); i++) {
        if (!names[i] || !*names[i]) continue;
        json_object *ref = json_object_new_object();
        kite_obj_set(ref, "name", json_object_new_string(names[i]));
        if (uids[i] && *uids[i]) kite_obj_set(ref, "uid", json_object_new_string(uids[i]));
        kite_obj_set(k, kinds[i], ref);
    }
    kite_obj_set(sa, "name", json_object_new_string(sub->name));
    kite_obj_set(sa, "uid", json_object_new_string(sub->uid));
    kite_obj_set(k, "serviceaccount", sa);
    kite_obj_set(c, "kubernetes.io", k);
    kite_obj_set(c, "nbf", json_object_new_int64(now_s));
    _cleanup_free_ char *subject = kite_asprintf(SA_USER_PREFIX "%s:%s", sub->ns, sub->name);
    kite_obj_set(c, "sub", json_object_new_string(subject));
    return c;
}

static bool num_claim(json_object *c, const char *k, int64_t *ret) {
    json_object *v = kite_obj_get(c, k);
    if (!v || !(json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_double))) return false;
    *ret = json_object_is_type(v, json_type_int) ? json_object_get_int64(v) : (int64_t)json_object_get_double(v);
    return true;
}

/* a claim's {name, uid} */
static void ref_claim(json_object *k, const char *kind, const char **name, const char **uid) {
    json_object *r = kite_obj_get(k, kind);
    *name = r ? kite_obj_str(r, "name") : NULL;
    *uid = r ? kite_obj_str(r, "uid") : NULL;
}

int kite_satoken_check_claims(json_object *c, const char *issuer, const char *const *audiences, size_t n_aud,
                              int64_t now_s, struct kite_satoken_subject *ret) {
    if (!kite_streq(kite_obj_str(c, "iss"), issuer)) return -ENOENT;
    int64_t exp, nbf, iat;
    /* go-jose: a missing exp or nbf is not checked; kube-apiserver's tokens always have both */
    if (num_claim(c, "exp", &exp) && now_s > exp + LEEWAY_S) return -ETIME;
    if ((num_claim(c, "nbf", &nbf) && now_s + LEEWAY_S < nbf) || (num_claim(c, "iat", &iat) && now_s + LEEWAY_S < iat))
        return -EAGAIN;
    /* aud: a string or an array of them; one must be the server's */
    json_object *aud = kite_obj_get(c, "aud");
    bool aud_ok = false;
    size_t na = aud && json_object_is_type(aud, json_type_array) ? json_object_array_length(aud) : 0;
    for (size_t i = 0; i < n_aud && !aud_ok; i++) {
        if (aud && json_object_is_type(aud, json_type_string)) aud_ok = kite_streq(json_object_get_string(aud), audiences[i]);
        for (size_t j = 0; j < na && !aud_ok; j++) {
            json_object *a = json_object_array_get_idx(aud, j);
            aud_ok = json_object_is_type(a, json_type_string) && kite_streq(json_object_get_string(a), audiences[i]);
        }
    }
    if (!aud_ok) return -EACCES;
    json_object *k = kite_obj_get(c, "kubernetes.io");
    struct kite_satoken_subject s = {.ns = kite_obj_str(k, "namespace"), .jti = kite_obj_str(c, "jti")};
    ref_claim(k, "serviceaccount", &s.name, &s.uid);
    ref_claim(k, "pod", &s.pod_name, &s.pod_uid);
    ref_claim(k, "secret", &s.secret_name, &s.secret_uid);
    ref_claim(k, "node", &s.node_name, &s.node_uid);
    if (!s.ns || !*s.ns || !s.name || !*s.name || !s.uid) return -EINVAL;
    /* the subject must be the one the private claims name */
    _cleanup_free_ char *want = kite_asprintf(SA_USER_PREFIX "%s:%s", s.ns, s.name);
    if (!kite_streq(kite_obj_str(c, "sub"), want)) return -EINVAL;
    *ret = s;
    return 0;
}

/* ---- the signer ------------------------------------------------------------------------------ */

int kite_apiserver_satoken_start(struct kite_apiserver *s, const char *pki_dir, const char *issuer, const char *audiences,
                            int64_t max_expiration_s, char **ret_error) {
    _cleanup_free_ char *path = kite_asprintf("%s/sa.key", pki_dir), *pem = NULL;
    int r = kite_pki_sa_key_ensure(path, &pem);
    if (r < 0) {
        *ret_error = kite_asprintf("cannot read or create the service-account key %s: %s", path, strerror(-r));
        return r;
    }
    struct kite_satoken *t = kite_calloc(1, sizeof *t);
    r = kite_pki_signer_new(pem, &t->signer);
    explicit_bzero(pem, strlen(pem));
    if (r < 0) {
        free(t);
        *ret_error = kite_asprintf("the service-account key %s: %s", path,
                                   r == -EOPNOTSUPP ? "not an RSA or ECDSA P-256 key" : "not a PEM private key");
        return r;
    }
    t->issuer = kite_strdup(issuer && *issuer ? issuer : KITE_SATOKEN_ISSUER_DEFAULT);
    t->max_expiration_s = max_expiration_s;
    /* --api-audiences defaults to the issuer, as kube-apiserver's */
    _cleanup_free_ char *list = kite_strdup(audiences && *audiences ? audiences : t->issuer);
    char *save = NULL;
    for (char *a = strtok_r(list, ",", &save); a; a = strtok_r(NULL, ",", &save)) {
        while (*a == ' ') a++;
        if (!*a) continue;
        t->audiences = kite_realloc(t->audiences, (t->n_audiences + 1) * sizeof *t->audiences);
        t->audiences[t->n_audiences++] = kite_strdup(a);
    }
    s->satoken = t;
    return 0;
}

void kite_apiserver_satoken_free(struct kite_satoken *t) {
    if (!t) return;
    kite_pki_signer_free(t->signer);
    for (size_t i = 0; i < t->n_audiences; i++) free(t->audiences[i]);
    free(t->audiences);
    free(t->issuer);
    free(t);
}

/* ---- authentication --------------------------------------------------------------------------- */

enum obj_state { OBJ_MISSING, OBJ_PRESENT, OBJ_GONE };

/* ns/name of r in the watch cache: OBJ_PRESENT with its uid (copied to uid_out), OBJ_GONE when
 * it was deleted more than the leeway ago (a graceful delete's deletionTimestamp), else
 * OBJ_MISSING. */
static enum obj_state cached(struct kite_apiserver *s, const char *plural, const char *ns, const char *name,
                             int64_t now_s, char uid_out[64]) {
    const struct kite_resource *r = kite_registry_find("", "v1", plural);
    if (!r || !name || !*name) return OBJ_MISSING;
    _cleanup_free_ char *key = kite_object_key(r, ns, name);
    struct kite_record *rec = kite_wcache_get(kite_apiserver_storage_cache(s, r), key);
    if (!rec) return OBJ_MISSING;
    json_object *o = kite_apiserver_record_object(rec);
    const char *del = kite_meta_str(o, "deletionTimestamp"), *uid = kite_meta_str(o, "uid");
    int64_t del_ns;
    enum obj_state st = OBJ_PRESENT;
    if (del && kite_time_parse(del, &del_ns) == 0 && del_ns / KITE_NS_PER_SEC < now_s - LEEWAY_S) st = OBJ_GONE;
    snprintf(uid_out, 64, "%s", uid ? uid : "");
    kite_record_unref(rec);
    return st;
}

static bool same_uid(struct kite_apiserver *s, const char *plural, const char *ns, const char *name, const char *uid,
                     int64_t now_s) {
    char have[64];
    return cached(s, plural, ns, name, now_s, have) == OBJ_PRESENT && kite_streq(have, uid ? uid : "");
}

static void mem_str(struct kite_buf *b, size_t *at, const char *fmt, ...) KITE_PRINTF(3, 4);
static void mem_str(struct kite_buf *b, size_t *at, const char *fmt, ...) {
    *at = b->len;
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0) s = NULL;
    va_end(ap);
    kite_buf_puts(b, s ? s : "");
    free(s);
    kite_buf_putc(b, 0);
}

bool kite_apiserver_satoken_authenticate(struct req *rq) {
    struct kite_satoken *t = rq->srv->satoken;
    const char *auth = kite_http_header(rq->http, "Authorization");
    if (!t || !auth || strncasecmp(auth, "Bearer ", 7) != 0) return false;
    const char *tok = auth + 7;
    while (*tok == ' ') tok++;
    if (!strchr(tok, '.')) return false;
    json_object *claims = NULL;
    if (kite_jwt_verify(t->signer, tok, &claims) < 0) return false;
    int64_t now_s = kite_now_wall(rq->srv->clock) / KITE_NS_PER_SEC;
    struct kite_satoken_subject sub;
    bool ok = kite_satoken_check_claims(claims, t->issuer, (const char *const *)t->audiences, t->n_audiences, now_s,
                                        &sub) == 0;
    /* the ServiceAccount, and the object the token is bound to, still there */
    ok = ok && same_uid(rq->srv, "serviceaccounts", sub.ns, sub.name, sub.uid, now_s);
    ok = ok && (!sub.secret_name || same_uid(rq->srv, "secrets", sub.ns, sub.secret_name, sub.secret_uid, now_s));
    ok = ok && (!sub.pod_name || same_uid(rq->srv, "pods", sub.ns, sub.pod_name, sub.pod_uid, now_s));
    /* a node claim beside a pod one only informs; alone it binds the token to the Node */
    ok = ok && (sub.pod_name || !sub.node_name || same_uid(rq->srv, "nodes", NULL, sub.node_name, sub.node_uid, now_s));
    if (!ok) {
        json_object_put(claims);
        return false;
    }
    /* a token used past its warnafter (an extended one): accepted, and logged as stale (at most
     * once a minute, with how many such uses there were) */
    json_object *wa = kite_obj_get(kite_obj_get(claims, "kubernetes.io"), "warnafter");
    if (wa && json_object_is_type(wa, json_type_int) && now_s > json_object_get_int64(wa)) {
        uint64_t uses = ++t->stale_uses;
        int64_t last = t->stale_logged_s;
        if (now_s - last >= 60 && __atomic_compare_exchange_n(&t->stale_logged_s, &last, now_s, false, __ATOMIC_RELAXED,
                                                               __ATOMIC_RELAXED)) {
            t->stale_uses = 0;
            log_warn("apiserver", "stale service account token: subject: " SA_USER_PREFIX "%s:%s, seconds after warning "
                     "threshold: %lld (%llu stale uses in the last minute)", sub.ns, sub.name,
                     (long long)(now_s - json_object_get_int64(wa)), (unsigned long long)uses);
        }
    }
    /* one buffer owns the user's strings (rq->authn_mem); offsets until it stops growing */
    struct kite_buf mem = {0};
    size_t name_at, uid_at, g1, g2, ex[12];
    size_t n_ex = 0;
    mem_str(&mem, &name_at, SA_USER_PREFIX "%s:%s", sub.ns, sub.name);
    mem_str(&mem, &uid_at, "%s", sub.uid);
    mem_str(&mem, &g1, "system:serviceaccounts");
    mem_str(&mem, &g2, "system:serviceaccounts:%s", sub.ns);
    /* the extras kube-apiserver 1.32 gives a bound token's user */
    if (sub.jti && *sub.jti) {
        mem_str(&mem, &ex[n_ex++], EXTRA_PREFIX "credential-id");
        mem_str(&mem, &ex[n_ex++], "JTI=%s", sub.jti);
    }
    if (sub.node_name && *sub.node_name) {
        mem_str(&mem, &ex[n_ex++], EXTRA_PREFIX "node-name");
        mem_str(&mem, &ex[n_ex++], "%s", sub.node_name);
        if (sub.node_uid && *sub.node_uid) {
            mem_str(&mem, &ex[n_ex++], EXTRA_PREFIX "node-uid");
            mem_str(&mem, &ex[n_ex++], "%s", sub.node_uid);
        }
    }
    if (sub.pod_name) {
        mem_str(&mem, &ex[n_ex++], EXTRA_PREFIX "pod-name");
        mem_str(&mem, &ex[n_ex++], "%s", sub.pod_name);
        mem_str(&mem, &ex[n_ex++], EXTRA_PREFIX "pod-uid");
        mem_str(&mem, &ex[n_ex++], "%s", sub.pod_uid ? sub.pod_uid : "");
    }
    json_object_put(claims);
    free(rq->authn_mem);
    rq->authn_mem = kite_buf_detach(&mem, NULL);
    rq->user.name = rq->authn_mem + name_at;
    rq->user.uid = rq->authn_mem + uid_at;
    rq->user.groups[rq->user.n_groups++] = rq->authn_mem + g1;
    rq->user.groups[rq->user.n_groups++] = rq->authn_mem + g2;
    for (size_t i = 0; i + 1 < n_ex && 2 * rq->user.n_extra + 1 < KITE_ARRAY_SIZE(rq->user.extra); i += 2) {
        rq->user.extra[2 * rq->user.n_extra] = rq->authn_mem + ex[i];
        rq->user.extra[2 * rq->user.n_extra++ + 1] = rq->authn_mem + ex[i + 1];
    }
    return true;
}

/* ---- TokenRequest ------------------------------------------------------------------------------- */

static void invalid(struct req *rq, const char *name, struct kite_causes *causes) {
    char *body = kite_status_invalid("authentication.k8s.io", "TokenRequest", name, causes);
    kite_apiserver_reply(rq, 422, "application/json", body, strlen(body));
    kite_causes_release(causes);
}

/* The object ns/name of plural (a new parse, or NULL after answering 404 as a GET would). */
static json_object *must_get(struct req *rq, const char *plural, const char *name) {
    const struct kite_resource *r = kite_registry_find("", "v1", plural);
    json_object *o = r && name && *name ? kite_apiserver_lookup(rq->srv, r, r->namespaced ? rq->ns : NULL, name) : NULL;
    if (!o) {
        struct status_details d = {.name = name, .kind = plural};
        kite_apiserver_reply_error_about(rq, 404, "NotFound", &d, "%s \"%s\" not found", plural, name ? name : "");
    }
    return o;
}

/* NodeRestriction's admitServiceAccount: a node's token must be bound to a pod (with its uid)
 * scheduled on that node. 0, or -EPERM after answering 403. */
static int node_restriction(struct req *rq, const char *node, json_object *ref, json_object *pod) {
    const char *why = NULL;
    _cleanup_free_ char *msg = NULL;
    if (!ref || !kite_streq(kite_obj_str(ref, "apiVersion"), "v1") || !kite_streq(kite_obj_str(ref, "kind"), "Pod") ||
        !kite_obj_str(ref, "name") || !*kite_obj_str(ref, "name"))
        why = "node requested token not bound to a pod";
    else if (!kite_obj_str(ref, "uid") || !*kite_obj_str(ref, "uid"))
        why = "node requested token with a pod binding without a uid";
    else if (pod && !kite_streq(kite_obj_str(kite_obj_get(pod, "spec"), "nodeName"), node))
        why = "node requested token bound to a pod scheduled on a different node";
    if (!why) return 0;
    struct status_details d = {.name = rq->name, .kind = "serviceaccounts"};
    kite_apiserver_reply_error_about(rq, 403, "Forbidden", &d, "serviceaccounts \"%s\" is forbidden: %s", rq->name, why);
    return -EPERM;
}

void kite_apiserver_satoken_issue(struct req *rq, json_object *body) {
    struct kite_satoken *t = rq->srv->satoken;
    if (!t) {
        kite_apiserver_reply_error(rq, 500, "InternalError", "the server has no service-account signing key");
        json_object_put(body);
        return;
    }
    json_object *spec = kite_obj_ensure(body, "spec");
    struct kite_causes causes = {0};
    const char *bname = kite_meta_str(body, "name"), *bns = kite_meta_str(body, "namespace");
    if (bname && *bname && strcmp(bname, rq->name) != 0)
        kite_causes_add(&causes, "FieldValueInvalid", "metadata.name",
                        "Invalid value: \"%s\": must match the service account name if specified", bname);
    if (bns && *bns && strcmp(bns, rq->ns) != 0)
        kite_causes_add(&causes, "FieldValueInvalid", "metadata.namespace",
                        "Invalid value: \"%s\": must match the service account namespace if specified", bns);
    /* SetDefaults_TokenRequestSpec, ValidateTokenRequest */
    int64_t exp = KITE_SATOKEN_DEFAULT_EXPIRATION_S;
    json_object *ev = kite_obj_get(spec, "expirationSeconds");
    if (ev && json_object_is_type(ev, json_type_int)) exp = json_object_get_int64(ev);
    else kite_obj_set(spec, "expirationSeconds", json_object_new_int64(exp));
    if (exp < KITE_SATOKEN_MIN_EXPIRATION_S)
        kite_causes_add(&causes, "FieldValueInvalid", "spec.expirationSeconds",
                        "Invalid value: %lld: may not specify a duration less than 10 minutes", (long long)exp);
    if (exp > KITE_SATOKEN_MAX_EXPIRATION_S)
        kite_causes_add(&causes, "FieldValueInvalid", "spec.expirationSeconds",
                        "Invalid value: %lld: may not specify a duration larger than 2^32 seconds", (long long)exp);
    if (causes.n) {
        invalid(rq, rq->name, &causes);
        json_object_put(body);
        return;
    }
    if (t->max_expiration_s > 0 && exp > t->max_expiration_s) {
        /* kube-apiserver's --service-account-max-token-expiration: the token is made shorter */
        _cleanup_free_ char *w = kite_asprintf("requested expiration of %lld seconds shortened to %lld seconds",
                                               (long long)exp, (long long)t->max_expiration_s);
        kite_apiserver_reply_add_warning(rq, w);
        exp = t->max_expiration_s;
        kite_obj_set(spec, "expirationSeconds", json_object_new_int64(exp));
    }
    json_object *sa = must_get(rq, "serviceaccounts", rq->name), *pod = NULL, *secret = NULL, *node = NULL;
    if (!sa) goto out;
    json_object *ref = kite_obj_get(spec, "boundObjectRef");
    const char *node_user = NULL;
    bool is_node = kite_node_identity(&rq->user, &node_user);
    if (ref && !json_object_is_type(ref, json_type_null)) {
        const char *kind = kite_obj_str(ref, "kind"), *av = kite_obj_str(ref, "apiVersion");
        const char *rname = kite_obj_str(ref, "name"), *ruid = kite_obj_str(ref, "uid");
        bool core = !av || !strchr(av, '/');
        json_object *bound = NULL;
        const char *plural = NULL;
        if (core && kite_streq(kind, "Pod")) plural = "pods";
        else if (core && kite_streq(kind, "Secret")) plural = "secrets";
        else if (core && kite_streq(kind, "Node")) plural = "nodes";
        if (!plural) {
            /* schema.FromAPIVersionAndKind(...).String(): "group/version, Kind=K" */
            const char *slash = av ? strchr(av, '/') : NULL;
            kite_apiserver_reply_error(rq, 400, "BadRequest", "cannot bind token to object of type %.*s/%s, Kind=%s",
                        slash ? (int)(slash - av) : 0, av ? av : "", slash ? slash + 1 : (av ? av : ""), kind ? kind : "");
            goto out;
        }
        if (!(bound = must_get(rq, plural, rname))) goto out;
        if (plural[0] == 'p') pod = bound;
        else if (plural[0] == 's') secret = bound;
        else node = bound;
        const char *have = kite_meta_str(bound, "uid");
        if (ruid && *ruid && !kite_streq(ruid, have)) {
            struct status_details d = {.name = rname, .kind = kind};
            kite_apiserver_reply_error_about(rq, 409, "Conflict", &d,
                              "Operation cannot be fulfilled on %s \"%s\": the UID in the bound object reference (%s) "
                              "does not match the UID in record. The object might have been deleted and then recreated",
                              kind, rname, ruid);
            goto out;
        }
        if (pod) {
            const char *psa = kite_obj_str(kite_obj_get(pod, "spec"), "serviceAccountName");
            if (!kite_streq(psa, rq->name)) {
                kite_apiserver_reply_error(rq, 400, "BadRequest", "cannot bind token for serviceaccount \"%s\" to pod running with "
                            "serviceaccount \"%s\"", rq->name, psa ? psa : "");
                goto out;
            }
        }
    }
    if (is_node && node_restriction(rq, node_user, ref && !json_object_is_type(ref, json_type_null) ? ref : NULL, pod) < 0)
        goto out;
    struct kite_satoken_subject sub = {.ns = rq->ns, .name = rq->name, .uid = kite_meta_str(sa, "uid")};
    if (pod) {
        sub.pod_name = kite_meta_str(pod, "name"), sub.pod_uid = kite_meta_str(pod, "uid");
        /* ServiceAccountTokenPodNodeInfo: the node the pod is bound to, when it exists */
        const char *nn = kite_obj_str(kite_obj_get(pod, "spec"), "nodeName");
        const struct kite_resource *nr = kite_registry_find("", "v1", "nodes");
        if (nn && *nn && nr && (node = kite_apiserver_lookup(rq->srv, nr, NULL, nn)))
            sub.node_name = nn, sub.node_uid = kite_meta_str(node, "uid");
    }
    if (node && !pod) sub.node_name = kite_meta_str(node, "name"), sub.node_uid = kite_meta_str(node, "uid");
    if (secret) sub.secret_name = kite_meta_str(secret, "name"), sub.secret_uid = kite_meta_str(secret, "uid");
    json_object *auds = kite_obj_get(spec, "audiences");
    if (!auds || !json_object_is_type(auds, json_type_array) || json_object_array_length(auds) == 0) {
        auds = json_object_new_array();
        for (size_t i = 0; i < t->n_audiences; i++) json_object_array_add(auds, json_object_new_string(t->audiences[i]));
        kite_obj_set(spec, "audiences", auds);
    }
    int64_t now_s = kite_now_wall(rq->srv->clock) / KITE_NS_PER_SEC;
    /* a dry run checks everything and issues nothing (the status stays empty) */
    if (!kite_streq(kite_http_query(rq->http, "dryRun"), "All")) {
        /* --service-account-extend-token-expiration: the kubelet's token (3607 s, the server's
         * audiences, bound to a pod) is valid a year; the status still says 3607 s */
        bool extend = t->extend_expiration && pod && exp == KITE_SATOKEN_WARN_ONLY_S && kube_audiences(t, auds);
        json_object *claims = kite_satoken_claims(&sub, t->issuer, auds, now_s, extend ? KITE_SATOKEN_EXTENDED_S : exp);
        if (extend) kite_obj_set(kite_obj_get(claims, "kubernetes.io"), "warnafter", json_object_new_int64(now_s + exp));
        char *jwt = kite_jwt_sign(t->signer, claims);
        json_object_put(claims);
        if (!jwt) {
            kite_apiserver_reply_error(rq, 500, "InternalError", "failed to generate token");
            goto out;
        }
        json_object *status = json_object_new_object();
        kite_obj_set(status, "token", json_object_new_string(jwt));
        explicit_bzero(jwt, strlen(jwt));
        free(jwt);
        char ts[21];
        kite_time_format((now_s + exp) * KITE_NS_PER_SEC, ts);
        kite_obj_set(status, "expirationTimestamp", json_object_new_string(ts));
        kite_obj_set(body, "status", status);
    }
    kite_obj_set(body, "kind", json_object_new_string("TokenRequest"));
    kite_obj_set(body, "apiVersion", json_object_new_string("authentication.k8s.io/v1"));
    json_object *meta = kite_obj_ensure(body, "metadata");
    kite_obj_set(meta, "name", json_object_new_string(rq->name));
    kite_obj_set(meta, "namespace", json_object_new_string(rq->ns));
    if (!kite_obj_get(meta, "creationTimestamp")) kite_obj_set(meta, "creationTimestamp", NULL);
    struct kite_buf b = {0};
    kite_buf_puts(&b, json_object_to_json_string_ext(body, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
    kite_apiserver_reply_json_buf(rq, 201, &b);
out:
    json_object_put(sa);
    json_object_put(pod);
    json_object_put(secret);
    json_object_put(node);
    json_object_put(body);
}
