/* The kinds' strategy hooks (src/api/kinds/), called directly from their rows, and the
 * consistency of the resource table. */
#include "api/registry.h"
#include "api/kinds/kinds.h"
#include "base/clock.h"

#include <criterion/criterion.h>
#include <ctype.h>
#include <stdio.h>

static json_object *parse(const char *s) {
    json_object *o = json_tokener_parse(s);
    cr_assert_not_null(o, "bad JSON in the test: %s", s);
    return o;
}

static json_object *at(json_object *o, const char *a, const char *b) {
    o = kite_obj_get(o, a);
    return b ? kite_obj_get(o, b) : o;
}

/* ---- namespaces ------------------------------------------------------------------------- */

Test(kinds, namespace_defaults) {
    const struct kite_resource *r = &kite_kind_namespace;
    json_object *o = parse("{\"metadata\":{\"name\":\"team-a\"}}");
    r->defaults(o);
    json_object *f = at(o, "spec", "finalizers");
    cr_assert_eq(json_object_array_length(f), 1);
    cr_assert_str_eq(json_object_get_string(json_object_array_get_idx(f, 0)), "kubernetes");
    cr_assert_str_eq(kite_obj_str(kite_obj_get(o, "status"), "phase"), "Active");
    cr_assert_str_eq(kite_obj_str(at(o, "metadata", "labels"), "kubernetes.io/metadata.name"), "team-a");
    json_object_put(o);

    /* what the client (or a previous write) set stays; the name label cannot be changed */
    o = parse("{\"metadata\":{\"name\":\"team-b\",\"labels\":{\"kubernetes.io/metadata.name\":\"other\",\"x\":\"y\"}},"
              "\"spec\":{\"finalizers\":[]},\"status\":{\"phase\":\"Terminating\"}}");
    r->defaults(o);
    cr_assert_eq(json_object_array_length(at(o, "spec", "finalizers")), 0, "an emptied list is not refilled");
    cr_assert_str_eq(kite_obj_str(kite_obj_get(o, "status"), "phase"), "Terminating");
    cr_assert_str_eq(kite_obj_str(at(o, "metadata", "labels"), "kubernetes.io/metadata.name"), "team-b");
    cr_assert_str_eq(kite_obj_str(at(o, "metadata", "labels"), "x"), "y");
    json_object_put(o);
}

Test(kinds, namespace_finalizing_and_terminating) {
    const struct kite_resource *r = &kite_kind_namespace;
    const struct {
        const char *json;
        bool finalizing;
    } cases[] = {
        {"{\"spec\":{\"finalizers\":[\"kubernetes\"]}}", true},
        {"{\"spec\":{\"finalizers\":[\"example.com/x\"]}}", true},
        {"{\"spec\":{\"finalizers\":[]}}", false},
        {"{\"spec\":{}}", false},
        {"{}", false},
        {"{\"spec\":{\"finalizers\":\"kubernetes\"}}", false}, /* not a list */
        /* metadata.finalizers are the engine's business, not the kind's */
        {"{\"metadata\":{\"finalizers\":[\"a\"]},\"spec\":{\"finalizers\":[]}}", false},
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(cases); i++) {
        json_object *o = parse(cases[i].json);
        cr_assert_eq(r->finalizing(o), cases[i].finalizing, "%s", cases[i].json);
        json_object_put(o);
    }
    json_object *o = parse("{\"metadata\":{\"name\":\"a\"},\"status\":{\"phase\":\"Active\"}}");
    r->terminating(o);
    cr_assert_str_eq(kite_obj_str(kite_obj_get(o, "status"), "phase"), "Terminating");
    json_object_put(o);
    o = parse("{\"metadata\":{\"name\":\"a\"}}");
    r->terminating(o);
    cr_assert_str_eq(kite_obj_str(kite_obj_get(o, "status"), "phase"), "Terminating");
    json_object_put(o);
}

Test(kinds, system_namespaces) {
    const struct kite_resource *r = kite_registry_namespaces();
    cr_assert_eq(r, &kite_kind_namespace);
    const char *want[] = {"default", "kube-system", "kube-public", "kube-node-lease"};
    size_t n = 0;
    for (const char *const *b = r->bootstrap; *b; b++, n++) cr_assert_str_eq(*b, want[n]);
    cr_assert_eq(n, KITE_ARRAY_SIZE(want));
    /* every undeletable namespace exists from the start */
    for (const char *const *u = r->undeletable; *u; u++) {
        bool found = false;
        for (const char *const *b = r->bootstrap; *b; b++) found |= strcmp(*b, *u) == 0;
        cr_assert(found, "%s is undeletable but not bootstrapped", *u);
    }
}

Test(kinds, subresources) {
    const struct kite_resource *ns = &kite_kind_namespace, *node = &kite_kind_node, *lease = &kite_kind_lease;
    const struct {
        const struct kite_resource *r;
        const char *name, *field;
        bool update_only;
    } cases[] = {
        {ns, "status", "status", false},
        {ns, "finalize", "spec", true},
        {node, "status", "status", false},
        {&kite_kind_pod, "status", "status", false},
        {node, "finalize", NULL, false},
        {lease, "status", NULL, false}, /* no status subresource */
        {ns, "scale", NULL, false},
        {ns, "", NULL, false},
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(cases); i++) {
        const struct kite_subresource *s = kite_resource_subresource(cases[i].r, cases[i].name);
        if (!cases[i].field) {
            cr_assert_null(s, "%s/%s", cases[i].r->plural, cases[i].name);
            continue;
        }
        cr_assert_not_null(s, "%s/%s", cases[i].r->plural, cases[i].name);
        cr_assert_str_eq(s->name, cases[i].name);
        cr_assert_str_eq(s->field, cases[i].field);
        cr_assert_eq(s->update_only, cases[i].update_only);
    }
}

/* ---- nodes ------------------------------------------------------------------------------ */

Test(kinds, node_defaults) {
    static const char *const info[] = {"machineID", "systemUUID", "bootID", "kernelVersion", "osImage",
                                       "containerRuntimeVersion", "kubeletVersion", "kubeProxyVersion",
                                       "operatingSystem", "architecture"};
    json_object *o = parse("{\"metadata\":{\"name\":\"n1\"}}");
    kite_kind_node.defaults(o);
    json_object *ni = at(o, "status", "nodeInfo");
    cr_assert_eq(json_object_object_length(ni), (int)KITE_ARRAY_SIZE(info));
    for (size_t i = 0; i < KITE_ARRAY_SIZE(info); i++) cr_assert_str_eq(kite_obj_str(ni, info[i]), "", "%s", info[i]);
    json_object *port = kite_obj_get(at(o, "status", "daemonEndpoints"), "kubeletEndpoint");
    cr_assert(json_object_is_type(kite_obj_get(port, "Port"), json_type_int));
    cr_assert_eq(json_object_get_int(kite_obj_get(port, "Port")), 0);
    cr_assert(json_object_is_type(kite_obj_get(o, "spec"), json_type_object));
    json_object_put(o);

    o = parse("{\"status\":{\"nodeInfo\":{\"kubeletVersion\":\"v1.31.0\"},"
              "\"daemonEndpoints\":{\"kubeletEndpoint\":{\"Port\":10250}}},\"spec\":{\"podCIDR\":\"10.0.0.0/24\"}}");
    kite_kind_node.defaults(o);
    cr_assert_str_eq(kite_obj_str(at(o, "status", "nodeInfo"), "kubeletVersion"), "v1.31.0");
    cr_assert_str_eq(kite_obj_str(at(o, "status", "nodeInfo"), "osImage"), "");
    cr_assert_eq(json_object_get_int(kite_obj_get(kite_obj_get(at(o, "status", "daemonEndpoints"), "kubeletEndpoint"), "Port")),
                 10250);
    cr_assert_str_eq(kite_obj_str(kite_obj_get(o, "spec"), "podCIDR"), "10.0.0.0/24");
    json_object_put(o);
}

struct causes_case {
    const char *json;
    size_t n;
    const char *field, *reason; /* of the first cause */
};

static void check_causes(const struct kite_resource *r, const struct causes_case *cases, size_t n) {
    for (size_t i = 0; i < n; i++) {
        json_object *o = parse(cases[i].json);
        struct kite_causes c = {0};
        r->validate(o, NULL, &c);
        cr_assert_eq(c.n, cases[i].n, "%s: %zu causes (first %s)", cases[i].json, c.n, c.n ? c.v[0].field : "-");
        if (cases[i].n) {
            cr_assert_str_eq(c.v[0].field, cases[i].field, "%s", cases[i].json);
            cr_assert_str_eq(c.v[0].reason, cases[i].reason, "%s", cases[i].json);
        }
        kite_causes_release(&c);
        json_object_put(o);
    }
}

Test(kinds, node_taints_validate) {
    const struct causes_case cases[] = {
        {"{}", 0, NULL, NULL},
        {"{\"spec\":{\"taints\":[]}}", 0, NULL, NULL},
        {"{\"spec\":{\"taints\":[{\"key\":\"a\",\"effect\":\"NoSchedule\"},{\"key\":\"example.com/b\",\"value\":\"v-1\","
         "\"effect\":\"NoExecute\"},{\"key\":\"c\",\"effect\":\"PreferNoSchedule\"}]}}",
         0, NULL, NULL},
        {"{\"spec\":{\"taints\":{}}}", 1, "spec.taints", "FieldValueInvalid"},
        {"{\"spec\":{\"taints\":[{\"effect\":\"NoSchedule\"}]}}", 1, "spec.taints[0].key", "FieldValueRequired"},
        {"{\"spec\":{\"taints\":[{\"key\":\"a b\",\"effect\":\"NoSchedule\"}]}}", 1, "spec.taints[0].key", "FieldValueInvalid"},
        {"{\"spec\":{\"taints\":[{\"key\":\"a\"}]}}", 1, "spec.taints[0].effect", "FieldValueRequired"},
        {"{\"spec\":{\"taints\":[{\"key\":\"a\",\"effect\":\"Sometimes\"}]}}", 1, "spec.taints[0].effect",
         "FieldValueNotSupported"},
        {"{\"spec\":{\"taints\":[{\"key\":\"a\",\"value\":\"not ok\",\"effect\":\"NoSchedule\"}]}}", 1, "spec.taints[0].value",
         "FieldValueInvalid"},
        {"{\"spec\":{\"taints\":[{\"key\":\"a\",\"effect\":\"NoSchedule\"},{}]}}", 2, "spec.taints[1].key", "FieldValueRequired"},
    };
    check_causes(&kite_kind_node, cases, KITE_ARRAY_SIZE(cases));
}

Test(kinds, lease_validate) {
    const struct causes_case cases[] = {
        {"{}", 0, NULL, NULL},
        {"{\"spec\":{\"holderIdentity\":\"a\",\"leaseDurationSeconds\":40,\"leaseTransitions\":0}}", 0, NULL, NULL},
        {"{\"spec\":{\"leaseDurationSeconds\":0}}", 1, "spec.leaseDurationSeconds", "FieldValueInvalid"},
        {"{\"spec\":{\"leaseDurationSeconds\":-5}}", 1, "spec.leaseDurationSeconds", "FieldValueInvalid"},
        {"{\"spec\":{\"leaseDurationSeconds\":\"40\"}}", 1, "spec.leaseDurationSeconds", "FieldValueInvalid"},
        {"{\"spec\":{\"leaseTransitions\":-1}}", 1, "spec.leaseTransitions", "FieldValueInvalid"},
        {"{\"spec\":{\"leaseDurationSeconds\":0,\"leaseTransitions\":-1}}", 2, "spec.leaseDurationSeconds", "FieldValueInvalid"},
    };
    check_causes(&kite_kind_lease, cases, KITE_ARRAY_SIZE(cases));
}

/* ---- events ----------------------------------------------------------------------------- */

static int64_t at_s(const char *rfc3339) {
    int64_t ns;
    cr_assert_eq(kite_time_parse(rfc3339, &ns), 0, "%s", rfc3339);
    return ns;
}

Test(kinds, event_last_seen_is_the_latest_occurrence) {
    const struct {
        const char *json, *want; /* want NULL: 0 */
    } cases[] = {
        {"{}", NULL},
        {"{\"metadata\":{\"creationTimestamp\":\"2030-01-01T00:00:00Z\"}}", "2030-01-01T00:00:00Z"},
        /* any occurrence time beats the creation time, even an earlier one */
        {"{\"metadata\":{\"creationTimestamp\":\"2030-01-01T00:00:00Z\"},\"lastTimestamp\":\"2029-06-01T00:00:00Z\"}",
         "2029-06-01T00:00:00Z"},
        {"{\"firstTimestamp\":\"2030-01-01T00:00:00Z\",\"lastTimestamp\":\"2030-01-01T00:05:00Z\"}", "2030-01-01T00:05:00Z"},
        {"{\"eventTime\":\"2030-01-01T00:00:07.250000Z\",\"lastTimestamp\":\"2030-01-01T00:00:05Z\"}",
         "2030-01-01T00:00:07.250000Z"},
        {"{\"eventTime\":\"2030-01-01T00:00:07.000000Z\",\"series\":{\"count\":3,\"lastObservedTime\":\"2030-01-01T01:00:00.000000Z\"}}",
         "2030-01-01T01:00:00Z"},
        {"{\"lastTimestamp\":\"2030-01-01T02:00:00Z\",\"series\":{\"lastObservedTime\":\"2030-01-01T01:00:00.000000Z\"}}",
         "2030-01-01T02:00:00Z"},
        /* unparsable times are no times */
        {"{\"lastTimestamp\":\"yesterday\",\"metadata\":{\"creationTimestamp\":\"2030-01-01T00:00:00Z\"}}",
         "2030-01-01T00:00:00Z"},
        {"{\"lastTimestamp\":null,\"eventTime\":\"2030-01-01T00:00:01+01:00\"}", "2029-12-31T23:00:01Z"},
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(cases); i++) {
        json_object *o = parse(cases[i].json);
        int64_t want = cases[i].want ? at_s(cases[i].want) : 0;
        cr_assert_eq(kite_kind_event.last_seen(o), want, "%s", cases[i].json);
        cr_assert_eq(kite_kind_event_v1.last_seen(o), want, "%s", cases[i].json);
        json_object_put(o);
    }
}

Test(kinds, event_v1_storage_renames) {
    static const char *const renames[][2] = {
        {"regarding", "involvedObject"},          {"note", "message"},
        {"deprecatedSource", "source"},           {"deprecatedFirstTimestamp", "firstTimestamp"},
        {"deprecatedLastTimestamp", "lastTimestamp"}, {"deprecatedCount", "count"},
        {"reportingController", "reportingComponent"},
    };
    json_object *o = parse("{\"apiVersion\":\"events.k8s.io/v1\",\"kind\":\"Event\",\"metadata\":{\"name\":\"e\"},"
                           "\"regarding\":{\"kind\":\"Pod\"},\"note\":\"n\",\"deprecatedSource\":{\"component\":\"c\"},"
                           "\"deprecatedFirstTimestamp\":\"f\",\"deprecatedLastTimestamp\":\"l\",\"deprecatedCount\":4,"
                           "\"reportingController\":\"rc\",\"reason\":\"r\",\"eventTime\":\"t\"}");
    json_object *orig = NULL;
    json_object_deep_copy(o, &orig, NULL);
    cr_assert_not_null(kite_kind_event_v1.to_storage);
    kite_kind_event_v1.to_storage(o);
    cr_assert_str_eq(kite_obj_str(o, "apiVersion"), "v1");
    for (size_t i = 0; i < KITE_ARRAY_SIZE(renames); i++) {
        cr_assert_null(kite_obj_get(o, renames[i][0]), "%s left", renames[i][0]);
        cr_assert(json_object_equal(kite_obj_get(o, renames[i][1]), kite_obj_get(orig, renames[i][0])), "%s", renames[i][1]);
    }
    cr_assert_str_eq(kite_obj_str(o, "reason"), "r"); /* unrenamed fields stay */
    cr_assert_str_eq(kite_obj_str(o, "eventTime"), "t");
    kite_kind_event_v1.from_storage(o);
    cr_assert(json_object_equal(o, orig), "round trip: %s", json_object_to_json_string(o));
    json_object_put(o);
    json_object_put(orig);
    /* core/v1 is the stored shape: nothing to convert */
    cr_assert_null(kite_kind_event.to_storage);
    cr_assert_null(kite_kind_event.from_storage);
    cr_assert_str_eq(kite_kind_event_v1.storage, kite_kind_event.plural);
}

/* ---- the table -------------------------------------------------------------------------- */

Test(kinds, rows_are_consistent) {
    size_t n = 0;
    for (; kite_resources[n]; n++) {
        const struct kite_resource *r = kite_resources[n];
        cr_assert(r->kind && *r->kind && r->plural && *r->plural && r->singular && *r->singular, "row %zu", n);
        cr_assert_not_null(r->group, "%s", r->plural);
        cr_assert(r->version && *r->version, "%s", r->plural);
        char av[128], list_kind[128];
        if (*r->group) snprintf(av, sizeof av, "%s/%s", r->group, r->version);
        else snprintf(av, sizeof av, "%s", r->version);
        cr_assert_str_eq(r->api_version, av, "%s", r->plural);
        cr_assert_str_eq(kite_resource_api_version(r), av);
        snprintf(list_kind, sizeof list_kind, "%sList", r->kind);
        cr_assert_str_eq(r->list_kind, list_kind, "%s", r->plural);
        /* the singular is the kind in lower case, the plural its plural */
        for (size_t i = 0; r->kind[i] || r->singular[i]; i++)
            cr_assert_eq(r->singular[i], (char)tolower((unsigned char)r->kind[i]), "%s/%s", r->kind, r->singular);
        cr_assert(kite_startswith(r->plural, r->singular), "%s/%s", r->plural, r->singular);
        /* lookups find the row again */
        cr_assert_eq(kite_registry_find(r->group, r->version, r->plural), r);
        /* hooks that only make sense with their data */
        if (r->finalizing || r->terminating) cr_assert(r->finalizing && r->terminating, "%s", r->plural);
        if (r->to_storage || r->from_storage) cr_assert(r->to_storage && r->from_storage && r->storage, "%s", r->plural);
        if (r->bootstrap || r->undeletable) cr_assert(!r->namespaced, "%s: bootstrap objects are cluster-scoped", r->plural);
        for (const struct kite_subresource *s = r->subresources; s && s->name; s++)
            cr_assert((s->field && *s->field) || s->body_kind || s->connect, "%s/%s: writes a field, is an action or connects",
                      r->plural, s->name);
        /* a shared storage folder belongs to a row of its own name */
        if (r->storage) {
            bool owner = false;
            for (size_t j = 0; kite_resources[j]; j++)
                owner |= kite_resources[j] != r && !kite_resources[j]->storage && strcmp(kite_resources[j]->plural, r->storage) == 0;
            cr_assert(owner, "%s stores in %s, which no row owns", r->plural, r->storage);
        }
    }
    cr_assert_geq(n, 6);
}

Test(kinds, no_two_rows_share_group_version_plural) {
    for (size_t i = 0; kite_resources[i]; i++)
        for (size_t j = i + 1; kite_resources[j]; j++) {
            const struct kite_resource *a = kite_resources[i], *b = kite_resources[j];
            cr_assert(strcmp(a->group, b->group) != 0 || strcmp(a->version, b->version) != 0 || strcmp(a->plural, b->plural) != 0,
                      "%s/%s %s twice", a->group, a->version, a->plural);
            /* nor a kind in one group (kite_registry_find_kind finds the first), but as another
             * version served by conversion after the stored one (autoscaling/v1 after v2) */
            if (strcmp(a->group, b->group) == 0 && !(strcmp(a->version, b->version) != 0 && !a->storage && b->storage &&
                                                     b->to_storage && strcmp(b->storage, a->plural) == 0))
                cr_assert_str_neq(a->kind, b->kind, "%s twice in \"%s\"", a->kind, a->group);
        }
}

/* Registry completeness: every row has its schema; every kind kept in the store (and writable)
 * has its strategic-merge schema and a table printer as upstream's (kubectl get prints its
 * columns); a kind that holds a pod template owns what it makes, for the garbage collector
 * (gc_owner: the controllers' GC list derives from it). */
Test(kinds, every_row_is_whole) {
    for (size_t i = 0; kite_resources[i]; i++) {
        const struct kite_resource *r = kite_resources[i];
        cr_assert_not_null(r->schema, "%s has a schema", r->plural);
        if (!kite_resource_stored(r) || r->read_only) continue;
        cr_assert_not_null(r->smp, "%s has a strategic-merge schema", r->plural);
        cr_assert_not_null(r->table, "%s has a table printer", r->plural);
        if (r->pod_template && *r->pod_template) cr_assert(r->gc_owner, "%s owns the objects it makes", r->plural);
    }
}
