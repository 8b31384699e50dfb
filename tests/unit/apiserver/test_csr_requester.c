/* A CSR's requester fields are the creating user's whatever the body says (the SpecRequester
 * admission plugin, as upstream's CSR strategy), and the kubelet's CSR names (base64url, upper
 * case) are accepted. */
#include "harness.h"
#include "base/base64.h"
#include "pki/pki.h"

#include <criterion/criterion.h>
#include <stdio.h>

TestSuite(csr_requester, .init = api_start, .fini = api_stop);

Test(csr_requester, spec_user_is_the_requester) {
    char *csr = NULL, *key = NULL;
    const char *orgs[] = {"system:nodes"};
    cr_assert_eq(kite_pki_new_csr("system:node:a", orgs, 1, &csr, &key), 0);
    char *b64 = kite_base64_encode(csr, strlen(csr), false);
    json_object *out = NULL;
    long code = api_reqf("POST", "/apis/certificates.k8s.io/v1/certificatesigningrequests", &out,
                         "{\"apiVersion\":\"certificates.k8s.io/v1\",\"kind\":\"CertificateSigningRequest\","
                         "\"metadata\":{\"name\":\"node-csr-AbC_d-1\"},\"spec\":{\"request\":\"%s\","
                         "\"signerName\":\"kubernetes.io/kube-apiserver-client-kubelet\",\"usages\":[\"client auth\"],"
                         "\"username\":\"system:node:evil\",\"uid\":\"x\",\"groups\":[\"system:masters-not\"]},"
                         "\"status\":{\"certificate\":\"\"}}",
                         b64);
    cr_assert_eq(code, 201, "%s", json_object_to_json_string(out));
    cr_expect_str_eq(jstr(out, "metadata.name"), "node-csr-AbC_d-1");
    cr_expect_str_eq(jstr(out, "spec.username"), "kite-admin");
    cr_expect_null(jget(out, "spec.uid"));
    json_object *groups = jget(out, "spec.groups");
    cr_assert_not_null(groups);
    bool masters = false, authenticated = false, forged = false;
    for (size_t i = 0; i < json_object_array_length(groups); i++) {
        const char *g = json_object_get_string(json_object_array_get_idx(groups, i));
        masters |= strcmp(g, "system:masters") == 0;
        authenticated |= strcmp(g, "system:authenticated") == 0;
        forged |= strcmp(g, "system:masters-not") == 0;
    }
    cr_expect(masters && authenticated && !forged);
    json_object_put(out);
    free(b64);
    free(csr);
    free(key);
}
