/* CertificateSigningRequests (controllers.h): kube-controller-manager's csrapproving
 * controller (pkg/controller/certificates/approver/sarapprove.go) and csrsigning controller
 * (pkg/controller/certificates/signer) for the kubelet client signer, each a reconciler
 * (framework.h) on the shared CSR informer. A pending CSR is approved when it is a node client request
 * (CN=system:node:NAME, O=system:nodes, no SANs, the kubelet's usages) and a
 * SubjectAccessReview says its requester may create certificatesigningrequests/selfnodeclient
 * (a node renewing its own certificate) or /nodeclient (a bootstrap token asking for a new
 * node); an approved CSR of a signer served here is signed with the cluster CA. Each write
 * comes back as a watch event, so approving leads to signing with no other trigger. */
#include "controllers/controllers.h"
#include "base/base64.h"
#include "api/registry.h"
#include "framework/framework.h"
#include "base/log.h"
#include "pki/pki.h"

#include <pthread.h>
#include <stdio.h>

#define CSRS "/apis/certificates.k8s.io/v1/certificatesigningrequests"
#define SARS "/apis/authorization.k8s.io/v1/subjectaccessreviews"
#define LOG "certificates"

/* the approver's or the signer's state (each a reconciler of its own) */
struct kite_csrctl {
    struct kite_client *client;
    struct kite_clock *clock;
    char *ca_cert, *ca_key; /* the signer's CA */
    int64_t duration_s;
};

/* ---- what a CSR asks for ------------------------------------------------------------------- */

static bool has_condition(json_object *csr, const char *type) {
    json_object *conds = kite_obj_get(kite_obj_get(csr, "status"), "conditions");
    for (size_t i = 0; conds && json_object_is_type(conds, json_type_array) && i < json_object_array_length(conds); i++)
        if (kite_streq(kite_obj_str(json_object_array_get_idx(conds, i), "type"), type)) return true;
    return false;
}

static bool usages_in(json_object *usages, const char *const *allowed, size_t n) {
    for (size_t i = 0; i < json_object_array_length(usages); i++) {
        const char *u = json_object_get_string(json_object_array_get_idx(usages, i));
        bool ok = false;
        for (size_t k = 0; !ok && k < n; k++) ok = kite_streq(u, allowed[k]);
        if (!ok) return false;
    }
    return true;
}

static bool usages_has(json_object *usages, const char *u) {
    for (size_t i = 0; i < json_object_array_length(usages); i++)
        if (kite_streq(json_object_get_string(json_object_array_get_idx(usages, i)), u)) return true;
    return false;
}

/* The request's PEM (decoded from spec.request), or NULL. */
static char *request_pem(json_object *csr) {
    const char *b64 = kite_obj_str(kite_obj_get(csr, "spec"), "request");
    char *pem = NULL;
    if (!b64 || kite_base64_decode(b64, &pem, NULL) < 0) return NULL;
    return pem;
}

/* certificates.ValidateKubeletClientCSR: why the request is no kubelet client request, or
 * NULL when it is. */
static const char *kubelet_client_problem(json_object *csr, const struct kite_pki_csr_info *info) {
    static const char *const USAGES[] = {"digital signature", "key encipherment", "client auth"};
    json_object *usages = kite_obj_get(kite_obj_get(csr, "spec"), "usages");
    if (info->n_orgs != 1 || !kite_streq(info->orgs[0], "system:nodes")) return "organization must be [\"system:nodes\"]";
    if (!info->cn || !kite_startswith(info->cn, "system:node:") || !info->cn[12])
        return "common name must begin with \"system:node:\"";
    if (info->has_sans) return "DNS, email, IP and URI subjectAltNames are not allowed";
    if (!usages || !json_object_is_type(usages, json_type_array) || !usages_in(usages, USAGES, KITE_ARRAY_SIZE(USAGES)) ||
        !usages_has(usages, "client auth") || !usages_has(usages, "digital signature"))
        return "usages must be \"client auth\" and \"digital signature\" (and optionally \"key encipherment\")";
    return NULL;
}

/* ---- the approver -------------------------------------------------------------------------- */

/* upstream's recognizers, in its order */
static const struct {
    const char *subresource, *message;
    bool self; /* the requester is the subject itself */
} RECOGNIZERS[] = {
    {"selfnodeclient", "Auto approving self kubelet client certificate after SubjectAccessReview.", true},
    {"nodeclient", "Auto approving kubelet client certificate after SubjectAccessReview.", false},
};

int kite_csr_approval(json_object *csr, kite_csr_sar_fn sar, void *ud, const char **ret_message) {
    json_object *spec = kite_obj_get(csr, "spec");
    if (!kite_streq(kite_obj_str(spec, "signerName"), KITE_CSR_SIGNER_KUBELET_CLIENT)) return 0;
    if (has_condition(csr, "Approved") || has_condition(csr, "Denied") || has_condition(csr, "Failed")) return 0;
    _cleanup_free_ char *pem = request_pem(csr);
    struct kite_pki_csr_info info = {0};
    if (!pem || kite_pki_csr_parse(pem, &info) < 0) return 0; /* unparsable: the signer fails it */
    int r = 0;
    if (kubelet_client_problem(csr, &info)) goto out;
    bool tried = false;
    for (size_t i = 0; i < KITE_ARRAY_SIZE(RECOGNIZERS); i++) {
        if (RECOGNIZERS[i].self && !kite_streq(kite_obj_str(spec, "username"), info.cn)) continue;
        tried = true;
        bool allowed = false;
        if ((r = sar(ud, spec, RECOGNIZERS[i].subresource, &allowed)) < 0) goto out;
        if (allowed) {
            *ret_message = RECOGNIZERS[i].message;
            r = 1;
            goto out;
        }
    }
    r = tried ? -EPERM : 0;
out:
    kite_pki_csr_info_release(&info);
    return r;
}

/* Asks the server whether the CSR's requester may create certificatesigningrequests/sub. */
static int sar_via_api(void *ud, json_object *spec, const char *sub, bool *ret_allowed) {
    struct kite_csrctl *c = ud;
    json_object *body = json_object_new_object(), *s = json_object_new_object(), *ra = json_object_new_object();
    kite_obj_set(body, "apiVersion", json_object_new_string("authorization.k8s.io/v1"));
    kite_obj_set(body, "kind", json_object_new_string("SubjectAccessReview"));
    kite_obj_set(body, "spec", s);
    static const char *const COPIED[] = {"username", "uid", "groups", "extra"};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(COPIED); i++) {
        json_object *v = kite_obj_get(spec, COPIED[i]);
        if (v) kite_obj_set(s, i == 0 ? "user" : COPIED[i], json_object_get(v));
    }
    kite_obj_set(ra, "group", json_object_new_string("certificates.k8s.io"));
    kite_obj_set(ra, "resource", json_object_new_string("certificatesigningrequests"));
    kite_obj_set(ra, "subresource", json_object_new_string(sub));
    kite_obj_set(ra, "verb", json_object_new_string("create"));
    kite_obj_set(s, "resourceAttributes", ra);
    json_object *out = NULL;
    int e = kite_client_json(c->client, "POST", SARS, NULL, body, NULL, &out);
    json_object_put(body);
    if (e == 0) {
        json_object *allowed = kite_obj_get(kite_obj_get(out, "status"), "allowed");
        *ret_allowed = allowed && json_object_get_boolean(allowed);
    }
    json_object_put(out);
    return e;
}

static void add_condition(json_object *csr, const char *type, const char *reason, const char *message, int64_t now_ns) {
    char ts[21];
    kite_time_format(now_ns, ts);
    json_object *status = kite_obj_ensure(csr, "status");
    json_object *conds = kite_obj_get(status, "conditions");
    if (!conds || !json_object_is_type(conds, json_type_array)) kite_obj_set(status, "conditions", conds = json_object_new_array());
    json_object *cd = json_object_new_object();
    kite_obj_set(cd, "type", json_object_new_string(type));
    kite_obj_set(cd, "status", json_object_new_string("True"));
    kite_obj_set(cd, "reason", json_object_new_string(reason));
    kite_obj_set(cd, "message", json_object_new_string(message));
    kite_obj_set(cd, "lastUpdateTime", json_object_new_string(ts));
    kite_obj_set(cd, "lastTransitionTime", json_object_new_string(ts));
    json_object_array_add(conds, cd);
}

/* PUT of the whole object to a subresource; a conflict (someone wrote it meanwhile) is left to
 * the watch event that write brings. */
static int put_sub(struct kite_csrctl *c, json_object *csr, const char *sub) {
    _cleanup_free_ char *path = kite_asprintf(CSRS "/%s/%s", kite_meta_str(csr, "name"), sub);
    int e = kite_client_json(c->client, "PUT", path, NULL, csr, NULL, NULL);
    return e == -EEXIST || e == -ENOENT ? 0 : e;
}

static int approve(struct kite_csrctl *c, json_object *csr) {
    const char *msg = NULL;
    int r = kite_csr_approval(csr, sar_via_api, c, &msg);
    if (r == -EPERM) {
        /* upstream returns an error and retries; kite waits for the CSR to change (or the
         * resync) instead of spinning */
        log_info(LOG, "csr %s: recognized as a node client request but its requester %s may not have it approved",
                 kite_meta_str(csr, "name"), kite_obj_str(kite_obj_get(csr, "spec"), "username"));
        return 0;
    }
    if (r <= 0) return r;
    json_object *copy = NULL;
    json_object_deep_copy(csr, &copy, NULL);
    add_condition(copy, "Approved", "AutoApproved", msg, kite_now_wall(c->clock));
    r = put_sub(c, copy, "approval");
    if (r == 0) log_info(LOG, "csr %s: approved for %s", kite_meta_str(csr, "name"), kite_obj_str(kite_obj_get(csr, "spec"), "username"));
    json_object_put(copy);
    return r;
}

/* ---- the signer ---------------------------------------------------------------------------- */

int kite_csr_sign(json_object *csr, const char *ca_cert, const char *ca_key, int64_t max_s, char **ret_cert_pem,
                  const char **ret_failure) {
    json_object *spec = kite_obj_get(csr, "spec");
    const char *signer = kite_obj_str(spec, "signerName");
    bool kubelet = kite_streq(signer, KITE_CSR_SIGNER_KUBELET_CLIENT);
    if (!kubelet && !kite_streq(signer, KITE_CSR_SIGNER_CLIENT)) return 0;
    if (!has_condition(csr, "Approved") || has_condition(csr, "Denied") || has_condition(csr, "Failed") ||
        *(kite_obj_str(kite_obj_get(csr, "status"), "certificate") ?: ""))
        return 0;
    _cleanup_free_ char *pem = request_pem(csr);
    struct kite_pki_csr_info info = {0};
    if (!pem || kite_pki_csr_parse(pem, &info) < 0) {
        *ret_failure = "the request is not a valid, self-signed certificate request";
        return -EINVAL;
    }
    const char *problem = NULL;
    json_object *usages = kite_obj_get(spec, "usages");
    if (kubelet) {
        problem = kubelet_client_problem(csr, &info);
    } else {
        /* kube-apiserver-client: client certificates for any user, clientAuth only */
        static const char *const USAGES[] = {"digital signature", "key encipherment", "client auth"};
        if (!usages || !json_object_is_type(usages, json_type_array) || !usages_in(usages, USAGES, KITE_ARRAY_SIZE(USAGES)) ||
            !usages_has(usages, "client auth"))
            problem = "usages must include \"client auth\" and only \"digital signature\" and \"key encipherment\" beside it";
        else if (!info.cn || !*info.cn)
            problem = "the subject must have a common name";
    }
    kite_pki_csr_info_release(&info);
    if (problem) {
        *ret_failure = problem;
        return -EINVAL;
    }
    int64_t seconds = max_s;
    json_object *exp = kite_obj_get(spec, "expirationSeconds");
    if (exp) {
        int64_t want = json_object_get_int64(exp);
        if (want < KITE_CSR_MIN_EXPIRATION_S) want = KITE_CSR_MIN_EXPIRATION_S;
        if (want < seconds) seconds = want;
    }
    int r = kite_pki_sign_csr(ca_cert, ca_key, pem, seconds, ret_cert_pem);
    if (r < 0) {
        *ret_failure = "signing failed";
        return r;
    }
    return 1;
}

static int sign(struct kite_csrctl *c, json_object *csr) {
    _cleanup_free_ char *cert = NULL;
    const char *failure = NULL;
    int r = kite_csr_sign(csr, c->ca_cert, c->ca_key, c->duration_s, &cert, &failure);
    if (r == 0) return 0;
    json_object *copy = NULL;
    json_object_deep_copy(csr, &copy, NULL);
    if (r > 0) {
        _cleanup_free_ char *b64 = kite_base64_encode(cert, strlen(cert), false);
        kite_obj_set(kite_obj_ensure(copy, "status"), "certificate", json_object_new_string(b64));
    } else {
        /* a request the signer will never sign is marked so, as upstream's SignerValidationFailure */
        add_condition(copy, "Failed", "SignerValidationFailure", failure, kite_now_wall(c->clock));
    }
    int e = put_sub(c, copy, "status");
    json_object_put(copy);
    if (e == 0) {
        if (r > 0) log_info(LOG, "csr %s: signed", kite_meta_str(csr, "name"));
        else log_warn(LOG, "csr %s: not signed: %s", kite_meta_str(csr, "name"), failure);
    }
    return e;
}

/* ---- on the framework: two reconcilers on the shared CSR informer ---- */

static int64_t approve_one(void *ud, const char *name, json_object *csr) {
    int e = csr ? approve(ud, csr) : 0;
    if (e < 0) log_warn(LOG, "csr %s: %s (will retry)", name, strerror(-e));
    json_object_put(csr);
    return e;
}

static int64_t sign_one(void *ud, const char *name, json_object *csr) {
    int e = csr ? sign(ud, csr) : 0;
    if (e < 0) log_warn(LOG, "csr %s: %s (will retry)", name, strerror(-e));
    json_object_put(csr);
    return e;
}

static void csrctl_free(void *ud) {
    struct kite_csrctl *c = ud;
    free(c->ca_cert);
    if (c->ca_key) explicit_bzero(c->ca_key, strlen(c->ca_key));
    free(c->ca_key);
    free(c);
}

static int run_one(struct kite_ctl_group *g, struct kite_csrctl *c, const char *name,
                   int64_t (*sync)(void *, const char *, json_object *)) {
    c->client = kite_ctl_group_client(g);
    c->clock = kite_ctl_group_clock(g);
    struct kite_ctl_reconciler r = {
        .name = name, .path = CSRS, .sync = sync, .ud = c, .free = csrctl_free,
        .backoff_max_ns = KITE_CSR_RETRY_MAX_S * KITE_NS_PER_SEC, .resync_ns = KITE_CSR_RESYNC_S * KITE_NS_PER_SEC,
    };
    return kite_ctl_reconcile(g, &r);
}

int kite_csr_approver_run(struct kite_ctl_group *g) {
    return run_one(g, kite_calloc(1, sizeof(struct kite_csrctl)), "csr-approving", approve_one);
}

int kite_csr_signer_run(struct kite_ctl_group *g, const struct kite_csr_signer_options *o) {
    if (!o->ca_cert_pem || !o->ca_key_pem) return -EINVAL;
    struct kite_csrctl *c = kite_calloc(1, sizeof *c);
    c->ca_cert = kite_strdup(o->ca_cert_pem);
    c->ca_key = kite_strdup(o->ca_key_pem);
    c->duration_s = o->signing_duration_s > 0 ? o->signing_duration_s : KITE_CSR_SIGNING_DURATION_DEFAULT_S;
    return run_one(g, c, "csr-signing", sign_one);
}
