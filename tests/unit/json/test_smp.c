/* Strategic merge patch: cases from the Kubernetes strategic-merge-patch documentation
 * (containers merged by name, $patch replace/delete, $retainKeys, $setElementOrder,
 * $deleteFromPrimitiveList, finalizers) and the error classes. */
#include "helpers.h"

static const struct kite_smp_rule rules[] = {
    {"spec.containers", "name", KITE_SMP_MERGE, NULL},
    {"spec.containers.ports", "containerPort", KITE_SMP_MERGE, NULL},
    {"spec.volumes", "name", KITE_SMP_MERGE | KITE_SMP_RETAIN_KEYS, NULL},
    {"spec.strategy", NULL, KITE_SMP_RETAIN_KEYS, NULL},
    {"metadata.finalizers", NULL, KITE_SMP_MERGE_PRIMITIVES, NULL},
    {"status.conditions", "type", KITE_SMP_MERGE, NULL},
};
static const struct kite_smp_schema schema = {rules, sizeof rules / sizeof rules[0]};

struct smp_case {
    const char *name, *doc, *patch;
    int err;
    const char *want;
};

#define NGINX "{\"name\":\"nginx\",\"image\":\"nginx-1.0\"}"
#define TAILER "{\"name\":\"log-tailer\",\"image\":\"log-tailer-1.0\"}"

static const struct smp_case smp_cases[] = {
    /* maps */
    {"maps merge, null deletes", "{\"metadata\":{\"labels\":{\"a\":\"1\",\"b\":\"2\"}}}",
     "{\"metadata\":{\"labels\":{\"a\":null,\"c\":\"3\"}}}", 0, "{\"metadata\":{\"labels\":{\"b\":\"2\",\"c\":\"3\"}}}"},
    {"null for absent key is dropped", "{}", "{\"a\":null,\"b\":{\"c\":null,\"d\":1}}", 0, "{\"b\":{\"d\":1}}"},
    {"type change replaces", "{\"a\":{\"b\":1}}", "{\"a\":[1]}", 0, "{\"a\":[1]}"},
    /* merge lists: the doc's "add a container" example; Kubernetes puts patch-only items first */
    {"containers merged by name: add", "{\"spec\":{\"containers\":[" NGINX "]}}",
     "{\"spec\":{\"containers\":[" TAILER "]}}", 0, "{\"spec\":{\"containers\":[" TAILER "," NGINX "]}}"},
    {"containers merged by name: update", "{\"spec\":{\"containers\":[" NGINX "," TAILER "]}}",
     "{\"spec\":{\"containers\":[{\"name\":\"nginx\",\"image\":\"nginx-2.0\",\"args\":[\"x\"]}]}}", 0,
     "{\"spec\":{\"containers\":[{\"name\":\"nginx\",\"image\":\"nginx-2.0\",\"args\":[\"x\"]}," TAILER "]}}"},
    {"nested merge list inside elements",
     "{\"spec\":{\"containers\":[{\"name\":\"c\",\"ports\":[{\"containerPort\":80,\"protocol\":\"TCP\"}]}]}}",
     "{\"spec\":{\"containers\":[{\"name\":\"c\",\"ports\":[{\"containerPort\":80,\"name\":\"http\"},"
     "{\"containerPort\":443}]}]}}",
     0,
     "{\"spec\":{\"containers\":[{\"name\":\"c\",\"ports\":[{\"containerPort\":80,\"protocol\":\"TCP\","
     "\"name\":\"http\"},{\"containerPort\":443}]}]}}"},
    {"$patch: replace in a list", "{\"spec\":{\"containers\":[" NGINX "," TAILER "]}}",
     "{\"spec\":{\"containers\":[{\"name\":\"nginx\",\"image\":\"nginx-1.0\"},{\"$patch\":\"replace\"}]}}", 0,
     "{\"spec\":{\"containers\":[" NGINX "]}}"},
    {"$patch: delete in a list", "{\"spec\":{\"containers\":[" NGINX "," TAILER "]}}",
     "{\"spec\":{\"containers\":[{\"name\":\"nginx\",\"image\":\"nginx-1.0\"},"
     "{\"$patch\":\"delete\",\"name\":\"log-tailer\"}]}}",
     0, "{\"spec\":{\"containers\":[" NGINX "]}}"},
    {"$patch: delete removes every match", "{\"spec\":{\"containers\":[" NGINX "," NGINX "," TAILER "]}}",
     "{\"spec\":{\"containers\":[{\"$patch\":\"delete\",\"name\":\"nginx\"}]}}", 0,
     "{\"spec\":{\"containers\":[" TAILER "]}}"},
    {"$patch: replace on a map", "{\"spec\":{\"a\":1,\"b\":{\"c\":1}}}",
     "{\"spec\":{\"$patch\":\"replace\",\"b\":{\"d\":2}}}", 0, "{\"spec\":{\"b\":{\"d\":2}}}"},
    {"$patch: delete on a map (rollingUpdate)",
     "{\"spec\":{\"strategy\":{\"type\":\"RollingUpdate\",\"rollingUpdate\":{\"maxSurge\":1}}}}",
     "{\"spec\":{\"strategy\":{\"rollingUpdate\":{\"$patch\":\"delete\"}}}}", 0,
     "{\"spec\":{\"strategy\":{\"type\":\"RollingUpdate\"}}}"},
    {"top-level $patch: delete empties", "{\"a\":1}", "{\"$patch\":\"delete\"}", 0, "{}"},
    /* $retainKeys: the documentation's union example and Deployment strategy */
    {"$retainKeys union", "{\"union\":{\"foo\":\"a\",\"other\":\"b\"}}",
     "{\"union\":{\"$retainKeys\":[\"another\",\"bar\"],\"another\":\"d\",\"bar\":\"c\"}}", 0,
     "{\"union\":{\"another\":\"d\",\"bar\":\"c\"}}"},
    {"$retainKeys strategy", "{\"spec\":{\"strategy\":{\"type\":\"RollingUpdate\",\"rollingUpdate\":{\"maxSurge\":1}}}}",
     "{\"spec\":{\"strategy\":{\"$retainKeys\":[\"type\"],\"type\":\"Recreate\"}}}", 0,
     "{\"spec\":{\"strategy\":{\"type\":\"Recreate\"}}}"},
    /* $setElementOrder */
    {"$setElementOrder primitives", "{\"metadata\":{\"finalizers\":[\"a\",\"b\",\"c\"]}}",
     "{\"metadata\":{\"$setElementOrder/finalizers\":[\"b\",\"c\",\"a\"]}}", 0,
     "{\"metadata\":{\"finalizers\":[\"b\",\"c\",\"a\"]}}"},
    {"$setElementOrder maps", "{\"spec\":{\"containers\":[{\"name\":\"a\",\"i\":1},{\"name\":\"b\"},{\"name\":\"c\"}]}}",
     "{\"spec\":{\"$setElementOrder/containers\":[{\"name\":\"b\"},{\"name\":\"c\"},{\"name\":\"a\"}]}}", 0,
     "{\"spec\":{\"containers\":[{\"name\":\"b\"},{\"name\":\"c\"},{\"name\":\"a\",\"i\":1}]}}"},
    {"$setElementOrder with changes", "{\"spec\":{\"containers\":[{\"name\":\"a\"},{\"name\":\"b\"}]}}",
     "{\"spec\":{\"$setElementOrder/containers\":[{\"name\":\"a\"},{\"name\":\"n\"},{\"name\":\"b\"}],"
     "\"containers\":[{\"name\":\"n\",\"x\":1},{\"name\":\"b\",\"y\":2}]}}",
     0, "{\"spec\":{\"containers\":[{\"name\":\"a\"},{\"name\":\"n\",\"x\":1},{\"name\":\"b\",\"y\":2}]}}"},
    /* finalizers: a merge list of primitives */
    {"finalizers union", "{\"metadata\":{\"finalizers\":[\"a\",\"b\"]}}", "{\"metadata\":{\"finalizers\":[\"b\",\"c\"]}}",
     0, "{\"metadata\":{\"finalizers\":[\"a\",\"b\",\"c\"]}}"},
    {"finalizers new first", "{\"metadata\":{\"finalizers\":[\"a\",\"b\"]}}", "{\"metadata\":{\"finalizers\":[\"c\"]}}",
     0, "{\"metadata\":{\"finalizers\":[\"c\",\"a\",\"b\"]}}"},
    {"$deleteFromPrimitiveList", "{\"metadata\":{\"finalizers\":[\"a\",\"b\",\"c\"]}}",
     "{\"metadata\":{\"$deleteFromPrimitiveList/finalizers\":[\"b\",\"c\"]}}", 0, "{\"metadata\":{\"finalizers\":[\"a\"]}}"},
    {"$deleteFromPrimitiveList absent list", "{\"metadata\":{}}",
     "{\"metadata\":{\"$deleteFromPrimitiveList/finalizers\":[\"b\"]}}", 0, "{\"metadata\":{}}"},
    /* atomic lists */
    {"atomic list replaced", "{\"spec\":{\"args\":[\"a\",\"b\"]}}", "{\"spec\":{\"args\":[\"c\"]}}", 0,
     "{\"spec\":{\"args\":[\"c\"]}}"},
    {"atomic list of maps replaced", "{\"status\":{\"images\":[{\"names\":[\"a\"]}]}}",
     "{\"status\":{\"images\":[{\"names\":[\"b\"],\"sizeBytes\":1}]}}", 0,
     "{\"status\":{\"images\":[{\"names\":[\"b\"],\"sizeBytes\":1}]}}"},
    /* directives never survive into new values */
    {"directives stripped from new values", "{}",
     "{\"spec\":{\"containers\":[{\"name\":\"a\",\"env\":null},{\"$patch\":\"delete\",\"name\":\"b\"}],"
     "\"x\":{\"$patch\":\"replace\",\"y\":1},\"z\":{\"$patch\":\"delete\"}}}",
     0, "{\"spec\":{\"containers\":[{\"name\":\"a\"}],\"x\":{\"y\":1}}}"},
    {"list created under $setElementOrder", "{\"metadata\":{}}",
     "{\"metadata\":{\"$setElementOrder/finalizers\":[\"x\",\"y\"],\"finalizers\":[\"x\",\"y\"]}}", 0,
     "{\"metadata\":{\"finalizers\":[\"x\",\"y\"]}}"},
    {"primitive order contradicts $setElementOrder", "{\"metadata\":{}}",
     "{\"metadata\":{\"$setElementOrder/finalizers\":[\"x\",\"y\"],\"finalizers\":[\"y\",\"x\"]}}", -EINVAL,
     NULL},
    /* errors */
    {"patch not an object", "{}", "[1]", -EBADMSG, NULL},
    {"$retainKeys not a list", "{\"a\":{}}", "{\"a\":{\"$retainKeys\":\"x\"}}", -EBADMSG, NULL},
    {"$setElementOrder not a list", "{}", "{\"$setElementOrder/x\":{}}", -EBADMSG, NULL},
    {"$deleteFromPrimitiveList not a list", "{}", "{\"$deleteFromPrimitiveList/x\":1}", -EBADMSG, NULL},
    {"field missing from $retainKeys", "{\"a\":{}}", "{\"a\":{\"$retainKeys\":[\"b\"],\"c\":1}}", -EINVAL, NULL},
    {"unknown $patch on a map", "{\"a\":{}}", "{\"a\":{\"$patch\":\"frob\"}}", -EINVAL, NULL},
    {"$patch: merge in a list", "{\"spec\":{\"containers\":[]}}",
     "{\"spec\":{\"containers\":[{\"$patch\":\"merge\"}]}}", -EINVAL, NULL},
    {"delete element without merge key", "{\"spec\":{\"containers\":[" NGINX "]}}",
     "{\"spec\":{\"containers\":[{\"$patch\":\"delete\"}]}}", -EINVAL, NULL},
    {"element without merge key", "{\"spec\":{\"containers\":[" NGINX "]}}",
     "{\"spec\":{\"containers\":[{\"image\":\"x\"}]}}", -EINVAL, NULL},
    {"mixed element types", "{\"spec\":{\"containers\":[" NGINX "]}}", "{\"spec\":{\"containers\":[\"x\"]}}", -EINVAL,
     NULL},
    {"order contradicts $setElementOrder", "{\"spec\":{\"containers\":[{\"name\":\"a\"},{\"name\":\"b\"}]}}",
     "{\"spec\":{\"$setElementOrder/containers\":[{\"name\":\"a\"},{\"name\":\"b\"}],"
     "\"containers\":[{\"name\":\"b\",\"x\":1},{\"name\":\"a\",\"x\":1}]}}",
     -EINVAL, NULL},
    {"document not an object", "[1]", "{}", -EINVAL, NULL},
};

Test(smp, table) {
    for (size_t i = 0; i < sizeof smp_cases / sizeof smp_cases[0]; i++) {
        const struct smp_case *c = &smp_cases[i];
        json_object *doc = J(c->doc), *patch = J(c->patch), *out = NULL;
        char *before = strdup(S(doc)), *pbefore = strdup(S(patch)), *err = NULL;
        int r = kite_smp_apply(doc, patch, &schema, &out, &err);
        cr_assert_eq(r, c->err, "%s: got %d (%s)", c->name, r, err ? err : "");
        if (r == 0) {
            assert_json(out, c->want, "%s", c->name);
            /* exact order matters for lists: compare serializations too */
            json_object *w = J(c->want);
            cr_assert_str_eq(S(out), S(w), "%s", c->name);
            json_object_put(w);
            json_object_put(out);
        } else {
            cr_assert_not_null(err, "%s: no message", c->name);
        }
        cr_assert_str_eq(S(doc), before, "%s: doc modified", c->name);
        cr_assert_str_eq(S(patch), pbefore, "%s: patch modified", c->name);
        free(before);
        free(pbefore);
        free(err);
        json_object_put(doc);
        json_object_put(patch);
    }
}

Test(smp, null_schema_makes_lists_atomic) {
    json_object *doc = J("{\"l\":[{\"name\":\"a\"}]}"), *patch = J("{\"l\":[{\"name\":\"b\"}]}"), *out;
    cr_assert_eq(kite_smp_apply(doc, patch, NULL, &out, NULL), 0);
    assert_json(out, "{\"l\":[{\"name\":\"b\"}]}");
    json_object_put(out);
    json_object_put(doc);
    json_object_put(patch);
}
