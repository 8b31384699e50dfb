/* The CSR admission plugins through HTTPS, with users made by impersonation and given rights
 * by RBAC: CertificateApproval (approve on signers, by name or `<domain>/` + `*`),
 * CertificateSigning (sign, only when the certificate or conditions change) and
 * CertificateSubjectRestriction (no system:masters from the kube-apiserver-client signer). */
#include "harness.h"
#include "base/base64.h"
#include "apiserver/internal.h"
#include "pki/pki.h"

#include <criterion/criterion.h>
#include <stdio.h>

#define CSRS "/apis/certificates.k8s.io/v1/certificatesigningrequests"
#define CLIENT "kubernetes.io/kube-apiserver-client"
#define KUBELET "kubernetes.io/kube-apiserver-client-kubelet"

TestSuite(csr_admission, .init = api_start, .fini = api_stop);

static long create_csr(const char *name, const char *signer, const char *cn, const char *const *orgs, size_t n_orgs,
                       json_object **ret) {
    char *csr = NULL, *key = NULL;
    cr_assert_eq(kite_pki_new_csr(cn, orgs, n_orgs, &csr, &key), 0);
    char *b64 = kite_base64_encode(csr, strlen(csr), false);
    long code = api_reqf("POST", CSRS, ret,
                         "{\"metadata\":{\"name\":\"%s\"},\"spec\":{\"request\":\"%s\",\"signerName\":\"%s\","
                         "\"usages\":[\"client auth\"]}}",
                         name, b64, signer);
    free(b64);
    free(csr);
    free(key);
    return code;
}

static void admin_post(const char *path, const char *body) {
    json_object *o = NULL;
    long code = api_req("POST", path, NULL, body, &o);
    cr_assert_eq(code, 201, "%s: %s", path, json_object_to_json_string(o));
    json_object_put(o);
}

/* A ClusterRole of the given rules bound to one user. */
static void grant(const char *user, const char *rules) {
    char body[1024];
    snprintf(body, sizeof body, "{\"metadata\":{\"name\":\"r-%s\"},\"rules\":%s}", user, rules);
    admin_post("/apis/rbac.authorization.k8s.io/v1/clusterroles", body);
    snprintf(body, sizeof body,
             "{\"metadata\":{\"name\":\"b-%s\"},\"roleRef\":{\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":"
             "\"ClusterRole\",\"name\":\"r-%s\"},\"subjects\":[{\"kind\":\"User\",\"name\":\"%s\"}]}",
             user, user, user);
    admin_post("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", body);
}

#define WRITE_SUBRESOURCES                                                                                             \
    "{\"verbs\":[\"get\",\"update\"],\"apiGroups\":[\"certificates.k8s.io\"],\"resources\":"                           \
    "[\"certificatesigningrequests\",\"certificatesigningrequests/approval\",\"certificatesigningrequests/status\"]}"
#define SIGNERS(verb, names)                                                                                           \
    "{\"verbs\":[\"" verb "\"],\"apiGroups\":[\"certificates.k8s.io\"],\"resources\":[\"signers\"],"                   \
    "\"resourceNames\":[" names "]}"

/* The CSR as stored, changed by edit, PUT to sub as user (impersonated by the admin). */
static long put_as(const char *user, const char *name, const char *sub, void (*edit)(json_object *), json_object **ret) {
    char path[256];
    snprintf(path, sizeof path, CSRS "/%s", name);
    json_object *csr = NULL;
    api_headers = NULL;
    cr_assert_eq(api_req("GET", path, NULL, NULL, &csr), 200);
    if (edit) edit(csr);
    char hdr[128];
    snprintf(hdr, sizeof hdr, "Impersonate-User: %s", user);
    const char *const headers[] = {hdr, NULL};
    api_headers = headers;
    snprintf(path, sizeof path, CSRS "/%s/%s", name, sub);
    long code = api_req("PUT", path, NULL, json_object_to_json_string(csr), ret);
    api_headers = NULL;
    json_object_put(csr);
    return code;
}

static void add_condition(json_object *csr, const char *type) {
    json_object *status = kite_obj_ensure(csr, "status");
    json_object *conds = kite_obj_get(status, "conditions");
    if (!conds) kite_obj_set(status, "conditions", conds = json_object_new_array());
    json_object *c = json_object_new_object();
    kite_obj_set(c, "type", json_object_new_string(type));
    kite_obj_set(c, "status", json_object_new_string("True"));
    kite_obj_set(c, "reason", json_object_new_string("Test"));
    json_object_array_add(conds, c);
}
/* as kubectl certificate approve, which leaves an approved CSR's conditions as they are */
static void approve(json_object *csr) {
    json_object *conds = kite_obj_get(kite_obj_get(csr, "status"), "conditions");
    for (size_t i = 0; conds && i < json_object_array_length(conds); i++)
        if (kite_streq(kite_obj_str(json_object_array_get_idx(conds, i), "type"), "Approved")) return;
    add_condition(csr, "Approved");
}
static void fail(json_object *csr) { add_condition(csr, "Failed"); }
static void issue(json_object *csr) {
    char *pem = NULL;
    cr_assert_eq(kite_pki_read_file(api.ca, &pem), 0);
    char *b64 = kite_base64_encode(pem, strlen(pem), false);
    kite_obj_set(kite_obj_ensure(csr, "status"), "certificate", json_object_new_string(b64));
    free(b64);
    free(pem);
}

Test(csr_admission, approval_needs_approve_on_the_signer) {
    const char *orgs[] = {"team"};
    cr_assert_eq(create_csr("c1", CLIENT, "jane", orgs, 1, NULL), 201);
    cr_assert_eq(create_csr("k1", KUBELET, "system:node:a", (const char *[]){"system:nodes"}, 1, NULL), 201);
    cr_assert_eq(create_csr("e1", "example.com/foo", "jane", orgs, 1, NULL), 201);
    grant("alice", "[" WRITE_SUBRESOURCES "]");                                        /* no signer */
    grant("bob", "[" WRITE_SUBRESOURCES "," SIGNERS("approve", "\"kubernetes.io/*\"") "]"); /* the domain */
    grant("carol", "[" WRITE_SUBRESOURCES "," SIGNERS("approve", "\"" CLIENT "\"") "]");   /* by name */
    grant("dave", "[" WRITE_SUBRESOURCES "," SIGNERS("approve", "\"example.com/*\"") "]");
    grant("erin", "[" WRITE_SUBRESOURCES "," SIGNERS("sign", "\"kubernetes.io/*\"") "]");   /* the wrong verb */
    const struct {
        const char *user, *csr, *signer;
        long want;
    } cases[] = {
        {"alice", "c1", CLIENT, 403},
        {"erin", "c1", CLIENT, 403},
        {"dave", "c1", CLIENT, 403},
        {"carol", "k1", KUBELET, 403}, /* a name is no prefix */
        {"bob", "c1", CLIENT, 200},
        {"carol", "c1", CLIENT, 200}, /* nothing changes: still an update of /approval, still judged */
        {"bob", "k1", KUBELET, 200},
        {"bob", "e1", "example.com/foo", 403},
        {"dave", "e1", "example.com/foo", 200},
        /* the controller-manager's bootstrap role: upstream's certificate-controller */
        {"system:kube-controller-manager", "c1", CLIENT, 403},
        {"system:kube-controller-manager", "k1", KUBELET, 200},
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(cases); i++) {
        json_object *o = NULL;
        long code = put_as(cases[i].user, cases[i].csr, "approval", approve, &o);
        cr_expect_eq(code, cases[i].want, "case %zu (%s on %s): %ld %s", i, cases[i].user, cases[i].csr, code,
                     json_object_to_json_string(o));
        if (code == 403) {
            char want[256];
            snprintf(want, sizeof want,
                     "certificatesigningrequests.certificates.k8s.io \"%s\" is forbidden: user not permitted to approve "
                     "requests with signerName \"%s\"",
                     cases[i].csr, cases[i].signer);
            cr_expect_str_eq(jstr(o, "message"), want);
            cr_expect_str_eq(jstr(o, "reason"), "Forbidden");
            cr_expect_str_eq(jstr(o, "details.name"), cases[i].csr);
            cr_expect_str_eq(jstr(o, "details.group"), "certificates.k8s.io");
            cr_expect_str_eq(jstr(o, "details.kind"), "certificatesigningrequests");
        }
        json_object_put(o);
    }
    /* a refusal stored nothing */
    json_object *o = NULL;
    cr_assert_eq(api_req("GET", CSRS "/e1", NULL, NULL, &o), 200);
    cr_expect_eq(json_object_array_length(jget(o, "status.conditions")), 1, "only dave's approval");
    json_object_put(o);
    /* without the subresource's RBAC, the authorizer refuses first */
    cr_assert_eq(put_as("mallory", "c1", "approval", approve, &o), 403);
    cr_expect(strstr(jstr(o, "message"), "cannot update resource \"certificatesigningrequests/approval\""), "%s",
              jstr(o, "message"));
    json_object_put(o);
}

Test(csr_admission, signing_needs_sign_when_the_certificate_or_conditions_change) {
    const char *orgs[] = {"team"};
    cr_assert_eq(create_csr("c1", CLIENT, "jane", orgs, 1, NULL), 201);
    cr_assert_eq(create_csr("x1", "example.com/foo", "jane", orgs, 1, NULL), 201);
    grant("alice", "[" WRITE_SUBRESOURCES "," SIGNERS("approve", "\"kubernetes.io/*\"") "]");
    grant("bob", "[" WRITE_SUBRESOURCES "," SIGNERS("sign", "\"kubernetes.io/*\"") "]");
    const struct {
        const char *user, *csr;
        void (*edit)(json_object *);
        long want;
    } cases[] = {
        {"alice", "c1", NULL, 200},   /* nothing changes: nothing to sign */
        {"alice", "c1", issue, 403},  /* approve is not sign */
        {"alice", "c1", fail, 403},   /* a condition written through /status is the signer's */
        {"bob", "x1", issue, 403},    /* another domain */
        {"system:kube-controller-manager", "x1", fail, 403},
        {"system:kube-controller-manager", "c1", issue, 200},
        {"bob", "c1", fail, 200},
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(cases); i++) {
        json_object *o = NULL;
        long code = put_as(cases[i].user, cases[i].csr, "status", cases[i].edit, &o);
        cr_expect_eq(code, cases[i].want, "case %zu (%s on %s): %ld %s", i, cases[i].user, cases[i].csr, code,
                     json_object_to_json_string(o));
        if (code == 403) {
            char want[256];
            snprintf(want, sizeof want,
                     "certificatesigningrequests.certificates.k8s.io \"%s\" is forbidden: user not permitted to sign "
                     "requests with signerName \"%s\"",
                     cases[i].csr, strcmp(cases[i].csr, "c1") == 0 ? CLIENT : "example.com/foo");
            cr_expect_str_eq(jstr(o, "message"), want);
        }
        json_object_put(o);
    }
    json_object *o = NULL;
    cr_assert_eq(api_req("GET", CSRS "/c1", NULL, NULL, &o), 200);
    cr_expect_not_null(jget(o, "status.certificate"));
    json_object_put(o);
}

Test(csr_admission, no_system_masters_from_the_client_signer) {
    const struct {
        const char *signer;
        const char *orgs[3];
        size_t n;
        long want;
    } cases[] = {
        {CLIENT, {"system:masters"}, 1, 403},
        {CLIENT, {"team", "system:masters"}, 2, 403},
        {CLIENT, {"system:masters-not", "team"}, 2, 201},
        {CLIENT, {NULL}, 0, 201},
        {KUBELET, {"system:masters"}, 1, 201}, /* the kubelet signer's own checks refuse it: not this plugin's */
        {"example.com/foo", {"system:masters"}, 1, 201},
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(cases); i++) {
        char name[16];
        snprintf(name, sizeof name, "s%zu", i);
        json_object *o = NULL;
        /* the admin asks: the subject, not the requester, is what counts */
        long code = create_csr(name, cases[i].signer, "root", cases[i].orgs, cases[i].n, &o);
        cr_expect_eq(code, cases[i].want, "case %zu: %ld %s", i, code, json_object_to_json_string(o));
        if (code == 403) {
            char want[256];
            snprintf(want, sizeof want,
                     "certificatesigningrequests.certificates.k8s.io \"%s\" is forbidden: use of " CLIENT
                     " signer with system:masters group is not allowed",
                     name);
            cr_expect_str_eq(jstr(o, "message"), want);
            json_object_put(o);
            snprintf(want, sizeof want, CSRS "/%s", name);
            cr_expect_eq(api_req("GET", want, NULL, NULL, NULL), 404, "a refused CSR is not stored");
        } else {
            json_object_put(o);
        }
    }
}

Test(csr_admission, a_request_block_that_is_no_request) {
    const char *pem = "-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n";
    char *b64 = kite_base64_encode(pem, strlen(pem), false);
    json_object *o = NULL;
    long code = api_reqf("POST", CSRS, &o,
                         "{\"metadata\":{\"name\":\"bad\"},\"spec\":{\"request\":\"%s\",\"signerName\":\"" CLIENT "\","
                         "\"usages\":[\"client auth\"]}}",
                         b64);
    cr_assert_eq(code, 403, "%s", json_object_to_json_string(o));
    cr_expect(strstr(jstr(o, "message"), "is forbidden: failed to parse CSR"), "%s", jstr(o, "message"));
    json_object_put(o);
    /* other signers' requests are the signer's to judge */
    code = api_reqf("POST", CSRS, NULL,
                    "{\"metadata\":{\"name\":\"bad2\"},\"spec\":{\"request\":\"%s\",\"signerName\":\"example.com/x\","
                    "\"usages\":[\"client auth\"]}}",
                    b64);
    cr_expect_eq(code, 201);
    free(b64);
}

Test(csr_admission, plugins_in_the_chain) {
    size_t n = 0;
    const struct kite_admission_plugin *p = kite_admission_plugins(&n);
    const char *want[] = {"CertificateApproval", "CertificateSigning", "CertificateSubjectRestriction"};
    size_t found = 0;
    for (size_t i = 0; i < n; i++)
        if (found < KITE_ARRAY_SIZE(want) && strcmp(p[i].name, want[found]) == 0) {
            cr_expect_null(p[i].mutate, "%s only validates", p[i].name);
            found++;
        }
    cr_expect_eq(found, KITE_ARRAY_SIZE(want), "the three, in upstream's order");
}
