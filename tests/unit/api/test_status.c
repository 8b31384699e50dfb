#include <criterion/criterion.h>

#include "api/status.h"

Test(status, reason_for) {
    static const struct {
        int code;
        const char *reason;
    } cases[] = {
        {400, "BadRequest"}, {401, "Unauthorized"}, {403, "Forbidden"}, {404, "NotFound"},
        {405, "MethodNotAllowed"}, {406, "NotAcceptable"}, {409, "Conflict"}, {410, "Expired"},
        {413, "RequestEntityTooLarge"}, {415, "UnsupportedMediaType"}, {422, "Invalid"},
        {429, "TooManyRequests"}, {500, "InternalError"}, {503, "ServiceUnavailable"}, {504, "Timeout"},
        {200, ""}, {418, ""},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        cr_assert_str_eq(kite_status_reason_for(cases[i].code), cases[i].reason, "%d", cases[i].code);
}

Test(status, failure_exact) {
    char *s = kite_status_failure(404, NULL, "nodes \"x\" not found", "x", NULL, "nodes", NULL);
    cr_assert_str_eq(s, "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
                        "\"message\":\"nodes \\\"x\\\" not found\",\"reason\":\"NotFound\","
                        "\"details\":{\"name\":\"x\",\"kind\":\"nodes\"},\"code\":404}");
    free(s);

    s = kite_status_failure(409, "AlreadyExists", "leases.coordination.k8s.io \"n1\" already exists", "n1",
                            "coordination.k8s.io", "leases", NULL);
    cr_assert_str_eq(s, "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
                        "\"message\":\"leases.coordination.k8s.io \\\"n1\\\" already exists\",\"reason\":\"AlreadyExists\","
                        "\"details\":{\"name\":\"n1\",\"group\":\"coordination.k8s.io\",\"kind\":\"leases\"},\"code\":409}");
    free(s);

    /* no details at all; empty causes list counts as none */
    struct kite_causes none = {0};
    s = kite_status_failure(500, NULL, "boom", NULL, NULL, NULL, &none);
    cr_assert_str_eq(s, "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
                        "\"message\":\"boom\",\"reason\":\"InternalError\",\"code\":500}");
    free(s);

    /* unknown code: no reason; NULL message omitted */
    s = kite_status_failure(418, NULL, NULL, NULL, NULL, NULL, NULL);
    cr_assert_str_eq(s, "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"code\":418}");
    free(s);
}

Test(status, failure_with_causes) {
    struct kite_causes c = {0};
    kite_causes_add(&c, "FieldValueRequired", "metadata.name", "Required value: name or generateName is required");
    kite_causes_add(&c, "FieldValueInvalid", "", "no field");
    char *s = kite_status_failure(422, NULL, "m", "x", NULL, "Node", &c);
    cr_assert_str_eq(s, "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"m\","
                        "\"reason\":\"Invalid\",\"details\":{\"name\":\"x\",\"kind\":\"Node\",\"causes\":["
                        "{\"reason\":\"FieldValueRequired\",\"message\":\"Required value: name or generateName is required\","
                        "\"field\":\"metadata.name\"},{\"reason\":\"FieldValueInvalid\",\"message\":\"no field\"}]},\"code\":422}");
    free(s);
    json_object *o = NULL;
    s = kite_status_failure(422, NULL, "m", NULL, NULL, NULL, &c);
    o = json_tokener_parse(s);
    cr_assert_not_null(o, "valid JSON");
    json_object_put(o);
    free(s);
    kite_causes_release(&c);
}

Test(status, invalid) {
    struct kite_causes c = {0};
    kite_causes_add(&c, "FieldValueInvalid", "metadata.name", "Invalid value: \"A\": bad");
    char *s = kite_status_invalid(NULL, "Node", "A", &c);
    cr_assert_str_eq(s, "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
                        "\"message\":\"Node \\\"A\\\" is invalid: metadata.name: Invalid value: \\\"A\\\": bad\","
                        "\"reason\":\"Invalid\",\"details\":{\"name\":\"A\",\"kind\":\"Node\",\"causes\":[{\"reason\":"
                        "\"FieldValueInvalid\",\"message\":\"Invalid value: \\\"A\\\": bad\",\"field\":\"metadata.name\"}]},"
                        "\"code\":422}");
    free(s);
    kite_causes_add(&c, "FieldValueRequired", "spec.x", "Required value");
    s = kite_status_invalid("coordination.k8s.io", "Lease", "", &c);
    json_object *o = json_tokener_parse(s);
    cr_assert_str_eq(json_object_get_string(json_object_object_get(o, "message")),
                     "Lease.coordination.k8s.io \"\" is invalid: [metadata.name: Invalid value: \"A\": bad, spec.x: Required value]");
    json_object *d = json_object_object_get(o, "details");
    cr_assert_null(json_object_object_get(d, "name"));
    cr_assert_str_eq(json_object_get_string(json_object_object_get(d, "group")), "coordination.k8s.io");
    cr_assert_eq(json_object_array_length(json_object_object_get(d, "causes")), 2);
    json_object_put(o);
    free(s);
    kite_causes_release(&c);
    s = kite_status_invalid(NULL, "Node", "n", NULL);
    cr_assert(strstr(s, "\"message\":\"Node \\\"n\\\" is invalid\",") != NULL, "%s", s);
    free(s);
}

Test(status, success) {
    char *s = kite_status_success(0, "n1", NULL, "nodes", "u-1");
    cr_assert_str_eq(s, "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Success\","
                        "\"details\":{\"name\":\"n1\",\"kind\":\"nodes\",\"uid\":\"u-1\"}}");
    free(s);
    s = kite_status_success(200, "p", "apps", "deployments", NULL);
    cr_assert_str_eq(s, "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Success\","
                        "\"details\":{\"name\":\"p\",\"group\":\"apps\",\"kind\":\"deployments\"},\"code\":200}");
    free(s);
    s = kite_status_success(0, NULL, NULL, NULL, NULL);
    cr_assert_str_eq(s, "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Success\"}");
    free(s);
}
