/* The controllers' descriptor rows (registry.c) and what derives from them: --controllers as
 * kube-controller-manager reads it, its help, each controller's ClusterRole, the garbage
 * collector's kinds; and each row's start puts a controller on the framework, its informers
 * shared with the others'. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/registry.h"
#include "controllers/controllers.h"
#include "framework/framework.h"
#include "controllers/gc.h"

#define NAMES(...) ((char *[]){__VA_ARGS__}), (sizeof((char *[]){__VA_ARGS__}) / sizeof(char *))

static ssize_t row(const char *name) {
    for (size_t i = 0; i < KITE_N_CONTROLLERS; i++)
        if (!strcmp(KITE_CONTROLLERS[i].name, name)) return (ssize_t)i;
    return -1;
}

/* how many controllers names[] turns off, and whether `name` is among them */
static size_t off_of(char *const *names, size_t n, const char *name, bool *ret_off) {
    bool on[64];
    char *err = NULL;
    cr_assert_eq(kite_controllers_select(names, n, on, &err), 0, "%s", err ? err : "");
    size_t off = 0;
    for (size_t i = 0; i < KITE_N_CONTROLLERS; i++) off += !on[i];
    if (ret_off) *ret_off = !on[row(name)];
    return off;
}

Test(selection, empty_and_star_run_everything) {
    cr_assert_eq(off_of(NULL, 0, "job-controller", NULL), 0);
    cr_assert_eq(off_of(NAMES("*"), "job-controller", NULL), 0);
}

Test(selection, a_minus_turns_one_off_upstream_name_or_alias) {
    bool off;
    cr_assert_eq(off_of(NAMES("*", "-nodelifecycle"), "node-lifecycle-controller", &off), 1);
    cr_assert(off);
    cr_assert_eq(off_of(NAMES("*", "-node-lifecycle-controller", "-podgc"), "pod-garbage-collector-controller", &off), 2);
    cr_assert(off);
}

Test(selection, names_without_a_star_run_only_those) {
    bool off;
    cr_assert_eq(off_of(NAMES("namespace", "garbage-collector-controller"), "namespace-controller", &off),
                 KITE_N_CONTROLLERS - 2);
    cr_assert_not(off);
    off_of(NAMES("namespace", "garbage-collector-controller"), "endpointslice-controller", &off);
    cr_assert(off);
}

Test(selection, off_wins_over_on) {
    bool off;
    off_of(NAMES("job", "-job"), "job-controller", &off);
    cr_assert(off);
}

Test(selection, an_unknown_name_is_an_error_naming_it) {
    bool on[64];
    char *err = NULL;
    cr_assert_eq(kite_controllers_select(NAMES("*", "-bogus"), on, &err), -EINVAL);
    cr_assert(err && strstr(err, "\"bogus\""), "%s", err ? err : "(none)");
    free(err);
}

/* Registry completeness: every row is whole, and the lists derived from the rows agree. */
Test(registry, every_row_has_a_name_a_start_and_its_rbac_rules) {
    cr_assert_geq(KITE_N_CONTROLLERS, 14);
    for (size_t i = 0; i < KITE_N_CONTROLLERS; i++) {
        const struct kite_ctl_desc *d = &KITE_CONTROLLERS[i];
        cr_assert(d->name && *d->name && d->start && d->rbac, "row %zu", i);
        for (size_t k = 0; k < i; k++) {
            const struct kite_ctl_desc *e = &KITE_CONTROLLERS[k];
            cr_assert(strcmp(d->name, e->name) && !kite_streq(d->alias, e->name) && !kite_streq(d->name, e->alias) &&
                          (!d->alias || !kite_streq(d->alias, e->alias)),
                      "%s and %s share a name", d->name, e->name);
        }
        json_object *rules = json_tokener_parse(d->rbac);
        cr_assert(rules && json_object_is_type(rules, json_type_array) && json_object_array_length(rules) > 0,
                  "%s: its rules are a JSON array of PolicyRules", d->name);
        for (size_t k = 0; k < json_object_array_length(rules); k++) {
            json_object *r = json_object_array_get_idx(rules, k), *verbs = kite_obj_get(r, "verbs");
            cr_assert(verbs && json_object_array_length(verbs) > 0, "%s: rule %zu has verbs", d->name, k);
            cr_assert(kite_obj_get(r, "apiGroups") && kite_obj_get(r, "resources"), "%s: rule %zu names resources",
                      d->name, k);
        }
        json_object_put(rules);
        char want[160];
        snprintf(want, sizeof want, "system:controller:%s", d->name);
        cr_assert_str_eq(kite_controllers_role(i), want);
    }
}

Test(registry, the_help_names_every_row_and_each_name_turns_exactly_that_one_off) {
    const char *help = kite_controllers_names();
    for (size_t i = 0; i < KITE_N_CONTROLLERS; i++) {
        const struct kite_ctl_desc *d = &KITE_CONTROLLERS[i];
        const char *forms[] = {d->name, d->alias};
        for (size_t f = 0; f < 2 && forms[f]; f++) {
            cr_assert(strstr(help, forms[f]), "the help names %s", forms[f]);
            char neg[160];
            snprintf(neg, sizeof neg, "-%s", forms[f]);
            bool off;
            cr_assert_eq(off_of(NAMES("*", neg), d->name, &off), 1, "%s", neg);
            cr_assert(off, "%s", neg);
        }
    }
}

Test(registry, the_collector_watches_every_kind_the_registry_marks_gc_owner) {
    size_t owners = 0;
    for (size_t i = 0; kite_resources[i]; i++) {
        if (!kite_resources[i]->gc_owner) continue;
        owners++;
        bool found = false;
        for (size_t k = 0; k < KITE_GC_N_KINDS; k++)
            found |= kite_streq(KITE_GC_KINDS[k].kind, kite_resources[i]->kind) &&
                     kite_streq(KITE_GC_KINDS[k].api_version, kite_resources[i]->api_version);
        cr_assert(found, "%s is collected", kite_resources[i]->kind);
    }
    cr_assert_geq(owners, 4);
    cr_assert_eq(KITE_GC_N_KINDS, owners + 1, "the owners and pods");
}

/* Each row's start adds at least one controller; none opens a stream another already has. */
Test(registry, every_start_adds_a_controller_on_shared_informers) {
    const char *cert = "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n";
    struct kite_ctl_config cfg = {.grace_ns = 40 * KITE_NS_PER_SEC, .period_ns = KITE_NS_PER_SEC,
                                  .signing_cert = cert, .signing_key = cert, .node_cleanup_ns = 0,
                                  .root_ca = cert};
    struct kite_ctl_group *g = kite_ctl_group_new(NULL, NULL);
    for (size_t i = 0; i < KITE_N_CONTROLLERS; i++) {
        size_t before = kite_ctl_group_count(g);
        cr_assert_eq(KITE_CONTROLLERS[i].start(g, &cfg), 0, "%s starts", KITE_CONTROLLERS[i].name);
        cr_assert_gt(kite_ctl_group_count(g), before, "%s adds a controller", KITE_CONTROLLERS[i].name);
    }
    /* pods, nodes, leases, PDBs, ReplicaSets, ReplicationControllers, Deployments, Jobs, the
     * Jobs' pods, CronJobs, DaemonSets, StatefulSets, ControllerRevisions, Services,
     * Endpoints, EndpointSlices, namespaces, CSRs, ClusterRoles, the `default` ServiceAccounts,
     * the kube-root-ca.crt ConfigMaps: one stream each */
    cr_assert_eq(kite_informer_factory_count(kite_ctl_group_informers(g)), 21);
    kite_ctl_group_free(g); /* never started: no informer ran */
}

Test(registry, the_node_controllers_share_one_watch_per_collection) {
    struct kite_ctl_config cfg = {.grace_ns = 40 * KITE_NS_PER_SEC, .period_ns = KITE_NS_PER_SEC};
    struct kite_ctl_group *g = kite_ctl_group_new(NULL, NULL);
    const char *names[] = {"node-lifecycle-controller", "taint-eviction-controller", "pod-garbage-collector-controller"};
    for (size_t i = 0; i < 3; i++) cr_assert_eq(KITE_CONTROLLERS[row(names[i])].start(g, &cfg), 0);
    cr_assert_eq(kite_ctl_group_count(g), 3);
    cr_assert_eq(kite_informer_factory_count(kite_ctl_group_informers(g)), 3, "nodes, node leases, pods");
    kite_ctl_group_free(g);
}

/* The serviceaccount and root CA publisher controllers: one core run twice, sharing the
 * namespaces' stream; the publisher without a CA adds nothing. */
Test(registry, the_serviceaccount_controllers_share_the_namespaces_stream) {
    struct kite_ctl_config cfg = {.root_ca = "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n"};
    struct kite_ctl_group *g = kite_ctl_group_new(NULL, NULL);
    cr_assert_eq(KITE_CONTROLLERS[row("serviceaccount-controller")].start(g, &cfg), 0);
    cr_assert_eq(KITE_CONTROLLERS[row("root-ca-certificate-publisher-controller")].start(g, &cfg), 0);
    cr_assert_eq(kite_ctl_group_count(g), 2);
    cr_assert_eq(kite_informer_factory_count(kite_ctl_group_informers(g)), 3,
                 "namespaces, the default ServiceAccounts, the kube-root-ca.crt ConfigMaps");
    kite_ctl_group_free(g);
    struct kite_ctl_config none = {0};
    g = kite_ctl_group_new(NULL, NULL);
    cr_assert_eq(KITE_CONTROLLERS[row("root-ca-certificate-publisher-controller")].start(g, &none), 0);
    cr_assert_eq(kite_ctl_group_count(g), 0);
    kite_ctl_group_free(g);
}

/* Whether rules (a PolicyRule array) grant verb on group/resource (or "*" for either). */
static bool has(json_object *list, const char *want) {
    for (size_t i = 0; list && i < json_object_array_length(list); i++) {
        const char *s = json_object_get_string(json_object_array_get_idx(list, i));
        if (!strcmp(s, want) || !strcmp(s, "*")) return true;
    }
    return false;
}
static bool grants(json_object *rules, const char *verb, const char *group, const char *resource) {
    for (size_t i = 0; i < json_object_array_length(rules); i++) {
        json_object *r = json_object_array_get_idx(rules, i);
        if (kite_obj_get(r, "resourceNames")) continue; /* a list or watch names no object */
        if (has(kite_obj_get(r, "verbs"), verb) && has(kite_obj_get(r, "apiGroups"), group) &&
            has(kite_obj_get(r, "resources"), resource))
            return true;
    }
    return false;
}

/* Each row's RBAC is whole: every collection its start watches (the informers it adds), the
 * row's rules let it list and watch. A row that watched a new kind without a rule for it would
 * be forbidden on a real cluster's RBAC and never sync. */
Test(registry, every_row_may_list_and_watch_what_it_watches) {
    const char *cert = "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n";
    struct kite_ctl_config cfg = {.grace_ns = 40 * KITE_NS_PER_SEC, .period_ns = KITE_NS_PER_SEC, .signing_cert = cert,
                                  .signing_key = cert, .node_cleanup_ns = KITE_NS_PER_SEC, .root_ca = cert};
    size_t checked = 0;
    for (size_t i = 0; i < KITE_N_CONTROLLERS; i++) {
        const struct kite_ctl_desc *d = &KITE_CONTROLLERS[i];
        struct kite_ctl_group *g = kite_ctl_group_new(NULL, NULL);
        cr_assert_eq(d->start(g, &cfg), 0, "%s starts", d->name);
        json_object *rules = json_tokener_parse(d->rbac);
        const struct kite_informer_factory *f = kite_ctl_group_informers(g);
        cr_assert_gt(kite_informer_factory_count(f), 0, "%s watches something", d->name);
        for (size_t k = 0; k < kite_informer_factory_count(f); k++) {
            /* /api/v1/<res>, /apis/<group>/<version>/<res>, either with namespaces/<ns>/ before <res> */
            char path[256], *save = NULL;
            snprintf(path, sizeof path, "%s", kite_informer_factory_path(f, k));
            char *seg[8] = {0};
            size_t n = 0;
            for (char *t = strtok_r(path, "/", &save); t && n < 8; t = strtok_r(NULL, "/", &save)) seg[n++] = t;
            bool core = n >= 3 && !strcmp(seg[0], "api");
            const char *group = core ? "" : n >= 4 ? seg[1] : NULL;
            size_t at = core ? 2 : 3;
            if (n > at + 2 && !strcmp(seg[at], "namespaces")) at += 2;
            cr_assert(group && at < n, "%s: %s is a collection", d->name, kite_informer_factory_path(f, k));
            const char *res = seg[at];
            cr_assert(grants(rules, "list", group, res) && grants(rules, "watch", group, res),
                      "%s watches %s but its rules do not let it list and watch %s in \"%s\"", d->name,
                      kite_informer_factory_path(f, k), res, group);
            checked++;
        }
        json_object_put(rules);
        kite_ctl_group_free(g);
    }
    cr_assert_geq(checked, 30);
}
