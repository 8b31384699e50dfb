/* The admission plugins kube-apiserver runs on certificates.k8s.io CertificateSigningRequests
 * (plugin/pkg/admission/certificates/{approval,signing,subjectrestriction}). RBAC on the
 * `approval` and `status` subresources says who may write them at all; these say for which
 * signers: approving (any write of /approval) needs the verb `approve`, and issuing (a /status
 * write that changes the certificate or the conditions) the verb `sign`, on the resource
 * `signers` named by the CSR's spec.signerName or its domain's wildcard (`kubernetes.io/` followed by `*`).
 * Both are judged on the stored object's signerName, which the write cannot change. And nobody
 * asks the kube-apiserver-client signer for a certificate in system:masters, the group the
 * authorizer lets do anything: such a CSR is refused at create, whoever would approve it.
 * Refusals are 403 Forbidden as admission.NewForbidden renders them. */
#include "base/base64.h"
#include "apiserver/internal.h"
#include "pki/pki.h"

#include <stdarg.h>
#include <stdio.h>

#define CSR_GROUP "certificates.k8s.io"
#define CSR_RESOURCE "certificatesigningrequests"
#define SIGNER_CLIENT "kubernetes.io/kube-apiserver-client"
#define MASTERS_GROUP "system:masters"

static bool is_csr(const struct kite_admission_attrs *a) {
    return strcmp(a->res->group, CSR_GROUP) == 0 && strcmp(a->res->plural, CSR_RESOURCE) == 0;
}

static bool sub_is(const struct kite_admission_attrs *a, const char *sub) {
    return sub ? a->sub && strcmp(a->sub, sub) == 0 : !a->sub || !*a->sub;
}

static const char *signer_of(json_object *csr) {
    const char *s = kite_obj_str(kite_obj_get(csr, "spec"), "signerName");
    return s ? s : "";
}


static bool allowed(const struct kite_admission_attrs *a, const char *verb, const char *signer) {
    struct kite_authz_attrs z = {.user = a->user, .verb = verb, .group = CSR_GROUP, .resource = "signers",
                                 .name = signer, .view = a->srv};
    _cleanup_free_ char *why = NULL;
    return kite_authorize(&z, &why) == KITE_AUTHZ_ALLOW;
}

/* certauthorization.IsAuthorizedForSignerName: the signer by name, else every signer of its
 * domain (the part before the first '/') as the name `<domain>/` followed by `*`. */
static bool authorized_for_signer(const struct kite_admission_attrs *a, const char *verb, const char *signer) {
    if (allowed(a, verb, signer)) return true;
    const char *slash = strchr(signer, '/');
    int domain_len = slash ? (int)(slash - signer) : (int)strlen(signer);
    _cleanup_free_ char *wildcard = kite_asprintf("%.*s/*", domain_len, signer);
    return allowed(a, verb, wildcard);
}

/* CertificateApproval: every update of /approval, whatever condition it adds or removes. */
int kite_admission_csr_approval(const struct kite_admission_attrs *a, struct kite_admission_denial *d) {
    if (a->op != KITE_ADMIT_UPDATE || !sub_is(a, "approval") || !is_csr(a) || !a->old) return 0;
    const char *signer = signer_of(a->old);
    if (authorized_for_signer(a, "approve", signer)) return 0;
    return kite_admission_forbid(a, d, "user not permitted to approve requests with signerName \"%s\"", signer);
}

/* The same value, an absent field being the empty one (as Go's semantic equality takes a nil
 * slice for an empty one). */
static bool same(json_object *x, json_object *y) {
    bool x_empty = !x || json_object_is_type(x, json_type_null) ||
                   (json_object_is_type(x, json_type_string) && !json_object_get_string_len(x)) ||
                   (json_object_is_type(x, json_type_array) && !json_object_array_length(x));
    bool y_empty = !y || json_object_is_type(y, json_type_null) ||
                   (json_object_is_type(y, json_type_string) && !json_object_get_string_len(y)) ||
                   (json_object_is_type(y, json_type_array) && !json_object_array_length(y));
    if (x_empty || y_empty) return x_empty && y_empty;
    return json_object_equal(x, y);
}

/* CertificateSigning: a /status update that changes the certificate or the conditions (a
 * signer issuing, or marking a request Failed); one that changes neither passes. */
int kite_admission_csr_signing(const struct kite_admission_attrs *a, struct kite_admission_denial *d) {
    if (a->op != KITE_ADMIT_UPDATE || !sub_is(a, "status") || !is_csr(a) || !a->old || !a->obj) return 0;
    json_object *os = kite_obj_get(a->old, "status"), *ns = kite_obj_get(a->obj, "status");
    if (same(kite_obj_get(os, "certificate"), kite_obj_get(ns, "certificate")) &&
        same(kite_obj_get(os, "conditions"), kite_obj_get(ns, "conditions")))
        return 0;
    const char *signer = signer_of(a->old);
    if (authorized_for_signer(a, "sign", signer)) return 0;
    return kite_admission_forbid(a, d, "user not permitted to sign requests with signerName \"%s\"", signer);
}

/* CertificateSubjectRestriction: the request's subject, not the requester, is checked (the
 * certificate would carry it, whoever asked). */
int kite_admission_csr_subject_restriction(const struct kite_admission_attrs *a, struct kite_admission_denial *d) {
    if (a->op != KITE_ADMIT_CREATE || !sub_is(a, NULL) || !is_csr(a) || !a->obj) return 0;
    if (strcmp(signer_of(a->obj), SIGNER_CLIENT) != 0) return 0;
    const char *b64 = kite_obj_str(kite_obj_get(a->obj, "spec"), "request");
    _cleanup_free_ char *pem = NULL;
    struct kite_pki_csr_info info = {0};
    /* the kind's validation has seen a CERTIFICATE REQUEST block; its content may still be no request */
    if (!b64 || kite_base64_decode(b64, &pem, NULL) < 0 || !pem || kite_pki_csr_read(pem, &info) < 0)
        return kite_admission_forbid(a, d, "failed to parse CSR: x509: malformed certificate request");
    bool masters = false;
    for (size_t i = 0; i < info.n_orgs && !masters; i++) masters = strcmp(info.orgs[i], MASTERS_GROUP) == 0;
    kite_pki_csr_info_release(&info);
    if (masters)
        return kite_admission_forbid(a, d, "use of " SIGNER_CLIENT " signer with " MASTERS_GROUP " group is not allowed");
    return 0;
}
