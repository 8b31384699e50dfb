/* kite_schema_check: table-driven cases over the kinds' schemas (each body, the error it
 * gives or none), the canonical forms it stores, and the time parser. */
#include <criterion/criterion.h>
#include <stdio.h>

#include "api/schema.h"
#include "base/gotime.h"
#include "json/parse.h"

struct schema_case {
    const struct kite_schema *schema;
    const char *body;  /* JSON text (raw bytes allowed) */
    const char *error; /* expected message, or a prefix of it ending in '*'; NULL: accepted */
};

#define LEASE_META "\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":{\"name\":\"l\"}"
#define INT32_ERR(v) "json: cannot unmarshal " v " into Go struct field LeaseSpec.spec.leaseDurationSeconds of type int32"
#define QERR "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"

static const struct schema_case cases[] = {
    /* accepted: what the agent, kubectl and python3-kubernetes send */
    {&kite_schema_lease, "{" LEASE_META ",\"spec\":{\"holderIdentity\":\"n1\",\"leaseDurationSeconds\":40,"
                         "\"renewTime\":\"2026-12-03T08:00:00.000037Z\",\"acquireTime\":null,\"leaseTransitions\":0}}", NULL},
    {&kite_schema_node, "{\"metadata\":{\"name\":\"n\",\"labels\":{\"a\":\"b\"},\"annotations\":{\"x\":\"h\xc3\xa9\"}},"
                        "\"spec\":{\"taints\":[{\"key\":\"k\",\"effect\":\"NoSchedule\",\"timeAdded\":\"2024-01-01T00:00:00Z\"}],"
                        "\"unschedulable\":true,\"podCIDRs\":[\"10.0.0.0/24\"]},"
                        "\"status\":{\"capacity\":{\"cpu\":\"4\",\"memory\":\"8167848Ki\",\"pods\":110,\"x\":\"1.5e3\"},"
                        "\"allocatable\":{\"cpu\":\"3500m\"},\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\","
                        "\"lastHeartbeatTime\":\"2024-02-29T23:59:59Z\",\"lastTransitionTime\":\"2024-02-29T23:59:59Z\"}],"
                        "\"daemonEndpoints\":{\"kubeletEndpoint\":{\"Port\":10250}},"
                        "\"images\":[{\"names\":[\"a:1\"],\"sizeBytes\":123456789012}],\"unknownField\":{\"a\":[1,\"b\"]}}}", NULL},
    {&kite_schema_pod, "{\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i\",\"ports\":[{\"containerPort\":80}],"
                       "\"resources\":{\"limits\":{\"cpu\":\"1\"}},\"livenessProbe\":{\"httpGet\":{\"port\":\"http\"}}}],"
                       "\"terminationGracePeriodSeconds\":30},\"status\":{\"startTime\":\"2024-01-01T00:00:00Z\","
                       "\"containerStatuses\":[{\"name\":\"c\",\"restartCount\":0,\"state\":{\"running\":{\"startedAt\":\"2024-01-01T00:00:00Z\"}}}]}}", NULL},
    {&kite_schema_event, "{\"involvedObject\":{\"kind\":\"Node\"},\"count\":1,\"firstTimestamp\":\"2024-01-01T00:00:00Z\","
                         "\"eventTime\":\"2024-01-01T00:00:00.000001Z\",\"series\":{\"count\":2,\"lastObservedTime\":\"2024-01-01T00:00:00.5Z\"}}", NULL},
    {&kite_schema_namespace, "{\"spec\":{\"finalizers\":[\"kubernetes\"]},\"status\":{\"phase\":\"Active\"}}", NULL},
    {&kite_schema_lease, "{\"spec\":{\"leaseDurationSeconds\":-2147483648}}", NULL},
    {&kite_schema_lease, "{\"spec\":{\"leaseDurationSeconds\":2147483647}}", NULL},
    {&kite_schema_lease, "{\"spec\":{\"leaseDurationSeconds\":-0}}", NULL},
    {&kite_schema_node, "{\"status\":{\"images\":[{\"sizeBytes\":9223372036854775807}]}}", NULL},

    /* integers */
    {&kite_schema_lease, "{\"spec\":{\"leaseDurationSeconds\":99999999999999999999999}}", INT32_ERR("number")},
    {&kite_schema_lease, "{\"spec\":{\"leaseDurationSeconds\":2147483648}}", INT32_ERR("number 2147483648")},
    {&kite_schema_lease, "{\"spec\":{\"leaseDurationSeconds\":-2147483649}}", INT32_ERR("number -2147483649")},
    {&kite_schema_lease, "{\"spec\":{\"leaseDurationSeconds\":1.5}}", INT32_ERR("number 1.5")},
    {&kite_schema_lease, "{\"spec\":{\"leaseDurationSeconds\":1e3}}", INT32_ERR("number 1e3")},
    {&kite_schema_lease, "{\"spec\":{\"leaseDurationSeconds\":\"40\"}}", INT32_ERR("string")},
    {&kite_schema_lease, "{\"spec\":{\"leaseDurationSeconds\":true}}", INT32_ERR("bool")},
    {&kite_schema_node, "{\"status\":{\"images\":[{\"sizeBytes\":9223372036854775808}]}}",
     "json: cannot unmarshal number 9223372036854775808 into Go struct field ContainerImage.status.images.sizeBytes of type int64"},
    {&kite_schema_node, "{\"status\":{\"daemonEndpoints\":{\"kubeletEndpoint\":{\"Port\":4294967296}}}}",
     "json: cannot unmarshal number 4294967296 into Go struct field DaemonEndpoint.status.daemonEndpoints.kubeletEndpoint.Port of type int32"},

    /* types */
    {&kite_schema_node, "{\"spec\":{\"unschedulable\":\"yes\"}}",
     "json: cannot unmarshal string into Go struct field NodeSpec.spec.unschedulable of type bool"},
    {&kite_schema_node, "{\"spec\":{\"taints\":{\"key\":\"a\"}}}",
     "json: cannot unmarshal object into Go struct field NodeSpec.spec.taints of type []v1.Taint"},
    {&kite_schema_node, "{\"spec\":{\"taints\":[{\"key\":1}]}}",
     "json: cannot unmarshal number into Go struct field Taint.spec.taints.key of type string"},
    {&kite_schema_node, "{\"metadata\":{\"labels\":[\"a\"]}}",
     "json: cannot unmarshal array into Go struct field ObjectMeta.metadata.labels of type map[string]string"},
    {&kite_schema_node, "{\"metadata\":{\"labels\":{\"a\":5}}}",
     "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels of type string"},
    {&kite_schema_node, "{\"metadata\":{\"finalizers\":\"x\"}}",
     "json: cannot unmarshal string into Go struct field ObjectMeta.metadata.finalizers of type []string"},
    {&kite_schema_node, "{\"metadata\":{\"ownerReferences\":[{\"controller\":\"true\"}]}}",
     "json: cannot unmarshal string into Go struct field OwnerReference.metadata.ownerReferences.controller of type bool"},
    {&kite_schema_node, "{\"status\":{\"capacity\":[]}}",
     "json: cannot unmarshal array into Go struct field NodeStatus.status.capacity of type v1.ResourceList"},
    {&kite_schema_node, "{\"spec\":\"x\"}", "json: cannot unmarshal string into Go struct field Node.spec of type v1.NodeSpec"},
    {&kite_schema_pod, "{\"spec\":{\"containers\":[{\"ports\":[{\"containerPort\":\"80\"}]}]}}",
     "json: cannot unmarshal string into Go struct field ContainerPort.spec.containers.ports.containerPort of type int32"},
    {&kite_schema_namespace, "{\"spec\":{\"finalizers\":[1]}}",
     "json: cannot unmarshal number into Go struct field NamespaceSpec.spec.finalizers of type string"},
    {&kite_schema_event_v1, "{\"deprecatedCount\":\"1\"}",
     "json: cannot unmarshal string into Go struct field Event.deprecatedCount of type int32"},

    /* quantities */
    {&kite_schema_node, "{\"status\":{\"capacity\":{\"memory\":\"1.5.5Gi\"}}}", QERR},
    {&kite_schema_node, "{\"status\":{\"capacity\":{\"memory\":\"\"}}}", QERR},
    {&kite_schema_node, "{\"status\":{\"capacity\":{\"memory\":\"10%\"}}}", QERR},
    {&kite_schema_node, "{\"status\":{\"capacity\":{\"memory\":true}}}", QERR},
    {&kite_schema_node, "{\"status\":{\"allocatable\":{\"cpu\":{}}}}", QERR},

    /* times */
    {&kite_schema_lease, "{\"spec\":{\"renewTime\":\"garbage\"}}",
     "parsing time \"garbage\" as \"2006-01-02T15:04:05.000000Z07:00\": cannot parse \"garbage\" as \"2006\""},
    {&kite_schema_lease, "{\"spec\":{\"acquireTime\":12345}}", "json: cannot unmarshal number into Go value of type string"},
    {&kite_schema_lease, "{\"spec\":{\"renewTime\":\"\"}}",
     "parsing time \"\" as \"2006-01-02T15:04:05.000000Z07:00\": cannot parse \"\" as \"2006\""},
    {&kite_schema_lease, "{\"spec\":{\"renewTime\":\"2024-02-30T00:00:00.000000Z\"}}",
     "parsing time \"2024-02-30T00:00:00.000000Z\": day out of range"},
    {&kite_schema_lease, "{\"spec\":{\"renewTime\":\"2023-02-29T00:00:00Z\"}}", "parsing time \"2023-02-29T00:00:00Z\": day out of range"},
    {&kite_schema_lease, "{\"spec\":{\"renewTime\":\"10000-01-01T00:00:00.000000Z\"}}",
     "parsing time \"10000-01-01T00:00:00.000000Z\" as \"2006-01-02T15:04:05.000000Z07:00\": cannot parse \"0-01-01T00:00:00.000000Z\" as \"-\""},
    {&kite_schema_lease, "{\"spec\":{\"renewTime\":\"2024-13-01T00:00:00Z\"}}", "parsing time \"2024-13-01T00:00:00Z\": month out of range"},
    {&kite_schema_lease, "{\"spec\":{\"renewTime\":\"2024-01-01T00:60:00Z\"}}", "parsing time \"2024-01-01T00:60:00Z\": minute out of range"},
    {&kite_schema_lease, "{\"spec\":{\"renewTime\":\"2024-01-01T00:00:60Z\"}}", "parsing time \"2024-01-01T00:00:60Z\": second out of range"},
    {&kite_schema_lease, "{\"spec\":{\"renewTime\":\"2024-01-01T00:00:00\"}}", "parsing time \"2024-01-01T00:00:00\" as*"},
    {&kite_schema_lease, "{\"spec\":{\"renewTime\":\"2024-01-01t00:00:00Z\"}}", "parsing time*"},
    {&kite_schema_lease, "{\"spec\":{\"renewTime\":\"2024-01-01T00:00:00Zjunk\"}}", "parsing time \"2024-01-01T00:00:00Zjunk\": extra text: \"junk\""},
    {&kite_schema_lease, "{\"spec\":{\"renewTime\":\"9999-12-31T23:59:59-01:00\"}}", "Time.MarshalJSON: year outside of range [0,9999]"},
    {&kite_schema_node, "{\"status\":{\"conditions\":[{\"lastHeartbeatTime\":\"yesterday\"}]}}",
     "parsing time \"yesterday\" as \"2006-01-02T15:04:05Z07:00\": cannot parse \"yesterday\" as \"2006\""},
    {&kite_schema_node, "{\"metadata\":{\"managedFields\":[{\"time\":\"x\"}]}}", "parsing time \"x\"*"},
    {&kite_schema_event, "{\"series\":{\"lastObservedTime\":\"x\"}}", "parsing time \"x\" as \"2006-01-02T15:04:05.000000Z07:00\"*"},
    {&kite_schema_event_v1, "{\"deprecatedFirstTimestamp\":\"x\"}", "parsing time \"x\" as \"2006-01-02T15:04:05Z07:00\"*"},
    {&kite_schema_pod, "{\"status\":{\"containerStatuses\":[{\"state\":{\"terminated\":{\"finishedAt\":\"x\"}}}]}}", "parsing time*"},

    /* bytes, in fields the schema lists or not */
    {&kite_schema_node, "{\"metadata\":{\"annotations\":{\"a\":\"x\xff\xfey\"}}}",
     "the string at metadata.annotations[a] is not valid UTF-8"},
    {&kite_schema_node, "{\"unknown\":[{\"b\":\"\xed\xa0\x80\"}]}", "the string at unknown[0].b is not valid UTF-8"},
    {&kite_schema_node, "{\"metadata\":{\"annotations\":{\"a\":\"x\\u0000y\"}}}",
     "the string at metadata.annotations[a] contains the NUL character (\\u0000), which is not supported"},
    {&kite_schema_node, "{\"metadata\":{\"name\":\"a\\u0000b\"}}",
     "the string at metadata.name contains the NUL character (\\u0000), which is not supported"},
    {NULL, "{\"a\":[\"ok\",{\"k\\u00e9\":\"\\u0000\"}]}", "the string at a[1].k\xc3\xa9 contains the NUL character*"},
};

Test(schema, table) {
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct schema_case *c = &cases[i];
        enum json_tokener_error e;
        /* lenient: the checker must find bad bytes by itself, whatever parsed them */
        json_object *o = kite_json_parse_lenient(c->body, strlen(c->body), 64, &e, NULL);
        cr_assert_not_null(o, "case %zu: bad test JSON %s", i, c->body);
        char *err = NULL;
        int r = kite_schema_check(c->schema, o, &err);
        if (!c->error) {
            cr_assert_eq(r, 0, "case %zu: %s: unexpected error %s", i, c->body, err);
        } else {
            cr_assert_eq(r, -EINVAL, "case %zu: %s accepted", i, c->body);
            size_t n = strlen(c->error);
            if (c->error[n - 1] == '*')
                cr_assert(strncmp(err, c->error, n - 1) == 0, "case %zu: got %s, want %s", i, err, c->error);
            else
                cr_assert_str_eq(err, c->error, "case %zu", i);
        }
        free(err);
        json_object_put(o);
    }
}

static char *checked(const struct kite_schema *s, const char *body) {
    json_object *o = json_tokener_parse(body);
    char *err = NULL;
    cr_assert_eq(kite_schema_check(s, o, &err), 0, "%s: %s", body, err);
    char *out = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(o);
    return out;
}

/* Times are stored as Kubernetes serializes them; quantities given as numbers as strings. */
Test(schema, canonical_forms) {
    static const char *const pairs[][2] = {
        {"{\"spec\":{\"renewTime\":\"2024-01-01T00:00:00Z\"}}", "{\"spec\":{\"renewTime\":\"2024-01-01T00:00:00.000000Z\"}}"},
        {"{\"spec\":{\"renewTime\":\"2024-01-01T02:30:00.1234567+02:30\"}}", "{\"spec\":{\"renewTime\":\"2024-01-01T00:00:00.123456Z\"}}"},
        {"{\"spec\":{\"acquireTime\":\"2024-01-01T00:00:00.5-01:00\"}}", "{\"spec\":{\"acquireTime\":\"2024-01-01T01:00:00.500000Z\"}}"},
        {"{\"spec\":{\"renewTime\":\"2026-12-03T08:00:00.000037Z\"}}", "{\"spec\":{\"renewTime\":\"2026-12-03T08:00:00.000037Z\"}}"},
        {"{\"spec\":{\"renewTime\":\"0000-01-01T00:00:00Z\"}}", "{\"spec\":{\"renewTime\":\"0000-01-01T00:00:00.000000Z\"}}"},
        {"{\"spec\":{\"renewTime\":\"1969-12-31T23:59:59.999999Z\"}}", "{\"spec\":{\"renewTime\":\"1969-12-31T23:59:59.999999Z\"}}"},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        char *out = checked(&kite_schema_lease, pairs[i][0]);
        cr_assert_str_eq(out, pairs[i][1]);
        free(out);
    }
    char *out = checked(&kite_schema_node, "{\"metadata\":{\"creationTimestamp\":\"2024-03-01T00:00:00.9+01:00\"},"
                                           "\"status\":{\"capacity\":{\"pods\":110,\"cpu\":1.5,\"memory\":\"1Gi\"}}}");
    cr_assert_str_eq(out, "{\"metadata\":{\"creationTimestamp\":\"2024-02-29T23:00:00Z\"},"
                          "\"status\":{\"capacity\":{\"pods\":\"110\",\"cpu\":\"1.5\",\"memory\":\"1Gi\"}}}");
    free(out);
}

Test(schema, parse_time) {
    int64_t sec;
    int32_t ns;
    cr_assert_eq(kite_gotime_parse("1970-01-01T00:00:01Z", false, &sec, &ns, NULL), 0);
    cr_assert(sec == 1 && ns == 0);
    cr_assert_eq(kite_gotime_parse("2000-02-29T12:00:00.25+12:00", false, &sec, &ns, NULL), 0);
    cr_assert(sec == 951782400 && ns == 250000000, "%lld %d", (long long)sec, ns);
    cr_assert_eq(kite_gotime_parse("0000-01-01T00:00:00Z", false, &sec, &ns, NULL), 0);
    cr_assert_eq(sec, INT64_C(-62167219200));
    cr_assert_eq(kite_gotime_parse("1900-02-29T00:00:00Z", false, &sec, &ns, NULL), -EINVAL); /* not a leap year */
    cr_assert_eq(kite_gotime_parse("2024-01-01T00:00:00.Z", false, &sec, &ns, NULL), -EINVAL);
    cr_assert_eq(kite_gotime_parse("2024-01-01T00:00:00+24:00", false, &sec, &ns, NULL), -EINVAL);
    cr_assert_eq(kite_gotime_parse(" 2024-01-01T00:00:00Z", false, &sec, &ns, NULL), -EINVAL);
}
