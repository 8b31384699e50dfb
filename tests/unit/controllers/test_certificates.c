/* The CSR approver's decision table (upstream's sarapprove: recognizers, then a
 * SubjectAccessReview per recognizer) and the signer (src/controllers/certificates.c). */
#include "controllers/controllers.h"
#include "base/base64.h"
#include "api/registry.h"
#include "base/base.h"
#include "pki/pki.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#define KUBELET KITE_CSR_SIGNER_KUBELET_CLIENT

/* A CSR object for cn/org with usages (JSON array text), signer and requester. */
static json_object *csr_obj(const char *cn, const char *org, const char *signer, const char *usages, const char *user,
                            const char *conditions) {
    char *pem = NULL, *key = NULL;
    const char *orgs[] = {org};
    cr_assert_eq(kite_pki_new_csr(cn, orgs, org ? 1 : 0, &pem, &key), 0);
    char *b64 = kite_base64_encode(pem, strlen(pem), false);
    char *text = kite_asprintf("{\"metadata\":{\"name\":\"c\"},\"spec\":{\"request\":\"%s\",\"signerName\":\"%s\","
                               "\"usages\":%s,\"username\":\"%s\",\"groups\":[\"g\"]},\"status\":{\"conditions\":%s}}",
                               b64, signer, usages, user, conditions ? conditions : "[]");
    json_object *o = json_tokener_parse(text);
    cr_assert_not_null(o);
    free(text);
    free(b64);
    free(pem);
    free(key);
    return o;
}

/* The fake SubjectAccessReview: which subresources the requester may create. */
struct sar {
    bool nodeclient, selfnodeclient;
    int fail;
    int calls;
    char asked[64];
};
static int fake_sar(void *ud, json_object *spec, const char *sub, bool *ret) {
    struct sar *s = ud;
    s->calls++;
    snprintf(s->asked + strlen(s->asked), sizeof s->asked - strlen(s->asked), "%s%s", *s->asked ? "," : "", sub);
    if (s->fail) return s->fail;
    *ret = strcmp(sub, "nodeclient") == 0 ? s->nodeclient : s->selfnodeclient;
    return 0;
}

#define NODE_USAGES "[\"digital signature\",\"client auth\"]"

Test(certificates, approval_table) {
    static const struct {
        const char *cn, *org, *signer, *usages, *user, *conditions;
        bool nodeclient, selfnodeclient;
        int want;
        const char *asked;
    } CASES[] = {
        /* a bootstrap token asking for a new node */
        {"system:node:a", "system:nodes", KUBELET, NODE_USAGES, "system:bootstrap:abcdef", NULL, true, false, 1, "nodeclient"},
        {"system:node:a", "system:nodes", KUBELET, "[\"digital signature\",\"key encipherment\",\"client auth\"]",
         "system:bootstrap:abcdef", NULL, true, false, 1, "nodeclient"},
        /* a bootstrap identity without the binding */
        {"system:node:a", "system:nodes", KUBELET, NODE_USAGES, "system:bootstrap:abcdef", NULL, false, false, -EPERM, "nodeclient"},
        /* a node renewing its own certificate: selfnodeclient first */
        {"system:node:a", "system:nodes", KUBELET, NODE_USAGES, "system:node:a", NULL, false, true, 1, "selfnodeclient"},
        /* a node asking for another node's name: only nodeclient is tried, which nodes do not have */
        {"system:node:b", "system:nodes", KUBELET, NODE_USAGES, "system:node:a", NULL, false, true, -EPERM, "nodeclient"},
        /* not node client requests: never reviewed, never approved */
        {"system:node:a", "system:masters", KUBELET, NODE_USAGES, "system:bootstrap:abcdef", NULL, true, true, 0, ""},
        {"kite-admin", "system:nodes", KUBELET, NODE_USAGES, "system:bootstrap:abcdef", NULL, true, true, 0, ""},
        {"system:node:", "system:nodes", KUBELET, NODE_USAGES, "system:bootstrap:abcdef", NULL, true, true, 0, ""},
        {"system:node:a", "system:nodes", KUBELET, "[\"client auth\"]", "system:bootstrap:abcdef", NULL, true, true, 0, ""},
        {"system:node:a", "system:nodes", KUBELET, "[\"digital signature\",\"client auth\",\"server auth\"]",
         "system:bootstrap:abcdef", NULL, true, true, 0, ""},
        {"system:node:a", "system:nodes", KITE_CSR_SIGNER_CLIENT, NODE_USAGES, "system:bootstrap:abcdef", NULL, true, true, 0, ""},
        /* already decided */
        {"system:node:a", "system:nodes", KUBELET, NODE_USAGES, "system:bootstrap:abcdef",
         "[{\"type\":\"Denied\",\"status\":\"True\"}]", true, true, 0, ""},
        {"system:node:a", "system:nodes", KUBELET, NODE_USAGES, "system:bootstrap:abcdef",
         "[{\"type\":\"Approved\",\"status\":\"True\"}]", true, true, 0, ""},
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(CASES); i++) {
        json_object *csr = csr_obj(CASES[i].cn, CASES[i].org, CASES[i].signer, CASES[i].usages, CASES[i].user, CASES[i].conditions);
        struct sar s = {.nodeclient = CASES[i].nodeclient, .selfnodeclient = CASES[i].selfnodeclient};
        const char *msg = NULL;
        int r = kite_csr_approval(csr, fake_sar, &s, &msg);
        cr_expect_eq(r, CASES[i].want, "case %zu: %d", i, r);
        cr_expect_str_eq(s.asked, CASES[i].asked, "case %zu", i);
        if (r == 1) cr_expect(msg && strstr(msg, "SubjectAccessReview"), "case %zu", i);
        json_object_put(csr);
    }
}

Test(certificates, review_failure_is_an_error) {
    json_object *csr = csr_obj("system:node:a", "system:nodes", KUBELET, NODE_USAGES, "system:bootstrap:abcdef", NULL);
    struct sar s = {.fail = -EIO};
    const char *msg = NULL;
    cr_expect_eq(kite_csr_approval(csr, fake_sar, &s, &msg), -EIO);
    json_object_put(csr);
}

static char dir[64];
static char *ca_cert, *ca_key;

static void make_ca(void) {
    snprintf(dir, sizeof dir, "/tmp/kite-csr-test-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    cr_assert_eq(kite_pki_ensure(dir, NULL, 0), 0);
    char p[128];
    snprintf(p, sizeof p, "%s/ca.crt", dir);
    cr_assert_eq(kite_pki_read_file(p, &ca_cert), 0);
    snprintf(p, sizeof p, "%s/ca.key", dir);
    cr_assert_eq(kite_pki_read_file(p, &ca_key), 0);
}
static void drop_ca(void) {
    free(ca_cert);
    free(ca_key);
    kite_rm_rf(dir);
}

#define APPROVED "[{\"type\":\"Approved\",\"status\":\"True\"}]"

Test(certificates, signer, .init = make_ca, .fini = drop_ca) {
    static const struct {
        const char *cn, *org, *signer, *usages, *conditions;
        int64_t expiration; /* 0: none */
        int want;
        int64_t want_seconds;
    } CASES[] = {
        {"system:node:a", "system:nodes", KUBELET, NODE_USAGES, APPROVED, 0, 1, 3600},
        {"system:node:a", "system:nodes", KUBELET, NODE_USAGES, APPROVED, 900, 1, 900},   /* shorter asked */
        {"system:node:a", "system:nodes", KUBELET, NODE_USAGES, APPROVED, 7200, 1, 3600}, /* capped */
        {"alice", "dev", KITE_CSR_SIGNER_CLIENT, "[\"client auth\"]", APPROVED, 0, 1, 3600},
        {"system:node:a", "system:nodes", KUBELET, NODE_USAGES, NULL, 0, 0, 0},             /* not approved */
        {"system:node:a", "system:nodes", KUBELET, NODE_USAGES,
         "[{\"type\":\"Denied\",\"status\":\"True\"}]", 0, 0, 0},
        {"system:node:a", "system:nodes", "example.com/other", NODE_USAGES, APPROVED, 0, 0, 0}, /* another signer */
        {"alice", "system:nodes", KUBELET, NODE_USAGES, APPROVED, 0, -EINVAL, 0},            /* fails validation */
        {"alice", "dev", KITE_CSR_SIGNER_CLIENT, "[\"server auth\"]", APPROVED, 0, -EINVAL, 0},
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(CASES); i++) {
        json_object *csr = csr_obj(CASES[i].cn, CASES[i].org, CASES[i].signer, CASES[i].usages, "u", CASES[i].conditions);
        if (CASES[i].expiration)
            kite_obj_set(kite_obj_get(csr, "spec"), "expirationSeconds", json_object_new_int64(CASES[i].expiration));
        char *cert = NULL;
        const char *failure = NULL;
        int r = kite_csr_sign(csr, ca_cert, ca_key, 3600, &cert, &failure);
        cr_expect_eq(r, CASES[i].want, "case %zu: %d", i, r);
        if (r < 0) cr_expect_not_null(failure, "case %zu", i);
        if (r == 1) {
            int64_t nb, na;
            cr_assert_eq(kite_pki_cert_times(cert, &nb, &na), 0);
            int64_t now = time(NULL);
            /* back-dated 5 minutes, valid for the duration from now */
            cr_expect(nb <= now - 290 && nb >= now - 310, "case %zu: notBefore %lld", i, (long long)nb);
            cr_expect(na >= now + CASES[i].want_seconds - 5 && na <= now + CASES[i].want_seconds + 5,
                      "case %zu: notAfter %lld", i, (long long)(na - now));
        }
        free(cert);
        json_object_put(csr);
    }
}
