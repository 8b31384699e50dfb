/* A Lease renewal spliced into the stored text (renewal.c): the splice is taken only for a body
 * that is the stored Lease but for its resourceVersion and a new canonical renewTime (and the
 * server's fields the body may leave out), and writes the stored text with the renewTime and the
 * renewer's entry time put in. */
#include "apiserver/internal.h"
#include "base/buf.h"

#include <criterion/criterion.h>
#include <string.h>

#define NOW INT64_C(1893553445000000000) /* 2030-01-02T03:04:05Z */
#define MF "[{\"manager\":\"kite-agent\",\"operation\":\"Update\",\"apiVersion\":\"coordination.k8s.io/v1\"," \
           "\"time\":\"2026-12-07T11:25:12Z\",\"fieldsType\":\"FieldsV1\",\"fieldsV1\":{\"f:spec\":{\"f:holderIdentity\":{}," \
           "\"f:renewTime\":{}}}}]"
#define STORED(mf, rt) "{\"kind\":\"Lease\",\"apiVersion\":\"coordination.k8s.io/v1\",\"metadata\":{\"name\":\"n1\"," \
    "\"namespace\":\"kube-node-lease\",\"uid\":\"u1\",\"resourceVersion\":\"\",\"creationTimestamp\":\"2026-12-07T11:22:54Z\"," \
    "\"managedFields\":" mf "},\"spec\":{\"holderIdentity\":\"n1\",\"leaseDurationSeconds\":40,\"renewTime\":\"" rt "\"}}"
#define BODY(rv, rt) "{\"kind\":\"Lease\",\"apiVersion\":\"coordination.k8s.io/v1\",\"metadata\":{\"name\":\"n1\"," \
    "\"namespace\":\"kube-node-lease\",\"uid\":\"u1\",\"resourceVersion\":\"" rv "\",\"creationTimestamp\":\"2026-12-07T11:22:54Z\"," \
    "\"managedFields\":" MF "},\"spec\":{\"holderIdentity\":\"n1\",\"leaseDurationSeconds\":40,\"renewTime\":\"" rt "\"}}"
#define OLD_RT "2026-12-07T11:25:12.657210Z"
#define NEW_RT "2026-12-07T11:25:22.000001Z"

static int splice(const char *stored, const char *body, const char *manager, struct kite_buf *out) {
    return kite_apiserver_renewal_splice(stored, strlen(stored), body, strlen(body), 42, manager, "coordination.k8s.io/v1", NOW,
                                         out);
}

static const char *SPLICED = "{\"kind\":\"Lease\",\"apiVersion\":\"coordination.k8s.io/v1\",\"metadata\":{\"name\":\"n1\","
    "\"namespace\":\"kube-node-lease\",\"uid\":\"u1\",\"resourceVersion\":\"\",\"creationTimestamp\":\"2026-12-07T11:22:54Z\","
    "\"managedFields\":[{\"manager\":\"kite-agent\",\"operation\":\"Update\",\"apiVersion\":\"coordination.k8s.io/v1\","
    "\"time\":\"2030-01-02T03:04:05Z\",\"fieldsType\":\"FieldsV1\",\"fieldsV1\":{\"f:spec\":{\"f:holderIdentity\":{},"
    "\"f:renewTime\":{}}}}]},\"spec\":{\"holderIdentity\":\"n1\",\"leaseDurationSeconds\":40,\"renewTime\":\"" NEW_RT "\"}}";

Test(renewal, the_stored_text_with_renew_time_and_entry_time_put_in) {
    struct kite_buf out = {0};
    cr_assert_eq(splice(STORED(MF, OLD_RT), BODY("42", NEW_RT), "kite-agent", &out), 0);
    cr_assert_str_eq(out.p, SPLICED);
    kite_buf_release(&out);
    /* the agent's form: no uid, creationTimestamp or managedFields; whitespace around it */
    const char *agent = " {\"kind\":\"Lease\",\"apiVersion\":\"coordination.k8s.io/v1\",\"metadata\":{\"name\":\"n1\","
                        "\"namespace\":\"kube-node-lease\",\"resourceVersion\":\"42\"},\"spec\":{\"holderIdentity\":\"n1\","
                        "\"leaseDurationSeconds\":40,\"renewTime\":\"" NEW_RT "\"}}\n";
    cr_assert_eq(splice(STORED(MF, OLD_RT), agent, "kite-agent", &out), 0);
    cr_assert_str_eq(out.p, SPLICED);
    kite_buf_release(&out);
}

Test(renewal, anything_else_takes_the_full_update) {
    static const struct {
        const char *why, *stored, *body, *manager;
    } cases[] = {
        {"a stale resourceVersion", STORED(MF, OLD_RT), BODY("41", NEW_RT), "kite-agent"},
        {"renewTime as it was", STORED(MF, OLD_RT), BODY("42", OLD_RT), "kite-agent"},
        {"renewTime not in canonical form", STORED(MF, OLD_RT), BODY("42", "2026-12-07T11:25:22.5Z"), "kite-agent"},
        {"renewTime not a time", STORED(MF, OLD_RT), BODY("42", "2026-12-07T11:25:99.000000Z"), "kite-agent"},
        {"another manager", STORED(MF, OLD_RT), BODY("42", NEW_RT), "kubectl"},
        {"no manager", STORED(MF, OLD_RT), BODY("42", NEW_RT), NULL},
        {"two entries", STORED("[{\"manager\":\"x\"}," "{\"manager\":\"kite-agent\"}]", OLD_RT), BODY("42", NEW_RT), "kite-agent"},
        {"an entry without renewTime", STORED("[{\"manager\":\"kite-agent\",\"operation\":\"Update\",\"apiVersion\":"
                                              "\"coordination.k8s.io/v1\",\"time\":\"t\",\"fieldsType\":\"FieldsV1\","
                                              "\"fieldsV1\":{\"f:spec\":{}}}]", OLD_RT),
         BODY("42", NEW_RT), "kite-agent"},
        {"another change", STORED(MF, OLD_RT), BODY("42", NEW_RT) /* patched below */, "kite-agent"},
        {"a member added", STORED(MF, OLD_RT), "{\"kind\":\"Lease\",\"extra\":1}", "kite-agent"},
        {"text after the object", STORED(MF, OLD_RT), BODY("42", NEW_RT) "{}", "kite-agent"},
        {"a member twice", STORED(MF, OLD_RT), "{\"kind\":\"Lease\",\"kind\":\"Lease\"}", "kite-agent"},
        {"an escaped member name", STORED(MF, OLD_RT), "{\"kind\":\"Lease\",\"apiVersion\":\"coordination.k8s.io/v1\","
                                                       "\"metadat\\u0061\":{}}", "kite-agent"},
    };
    for (size_t k = 0; k < 20 * sizeof cases / sizeof *cases; k++) { /* each refusal 20 times */
        size_t i = k % (sizeof cases / sizeof *cases);
        char *body = strdup(cases[i].body);
        if (strcmp(cases[i].why, "another change") == 0) memcpy(strstr(body, "\"leaseDurationSeconds\":40") + 23, "41", 2);
        struct kite_buf out = {0};
        cr_assert_eq(splice(cases[i].stored, body, cases[i].manager, &out), -1, "%s", cases[i].why);
        cr_assert_eq(out.len, 0, "%s: nothing appended", cases[i].why);
        kite_buf_release(&out);
        free(body);
    }
}
