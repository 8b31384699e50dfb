/* ClusterRole aggregation (controllers.h), as kube-controller-manager's
 * clusterrole-aggregation controller: a reconciler (framework.h) on the shared ClusterRole
 * informer; any change queues every role, and an aggregated role whose rules differ from the
 * union of its selected roles is patched. Its own patches come back as events that change
 * nothing, so chains (view into edit into admin) settle by themselves. */
#include "controllers/controllers.h"
#include "api/registry.h"
#include "client/informer.h"
#include "framework/framework.h"
#include "base/log.h"
#include "base/map.h"
#include "json/patch.h"

#include <pthread.h>
#include <stdio.h>

#define CLUSTERROLES "/apis/rbac.authorization.k8s.io/v1/clusterroles"

struct kite_aggregator {
    struct kite_client *client;
    struct kite_informer *roles; /* the shared ClusterRole informer: every role, by name */
};

/* ---- selectors ---------------------------------------------------------------------------- */

static bool in_values(json_object *values, const char *v) {
    for (size_t i = 0; v && values && json_object_is_type(values, json_type_array) && i < json_object_array_length(values); i++)
        if (kite_streq(json_object_get_string(json_object_array_get_idx(values, i)), v)) return true;
    return false;
}

bool kite_label_selector_json_matches(json_object *sel, json_object *labels) {
    if (!sel || !json_object_is_type(sel, json_type_object)) return false;
    json_object *ml = kite_obj_get(sel, "matchLabels");
    if (ml && json_object_is_type(ml, json_type_object)) {
        json_object_object_foreach(ml, k, v) {
            const char *have = kite_obj_str(labels, k);
            if (!have || !json_object_is_type(v, json_type_string) || strcmp(have, json_object_get_string(v)) != 0)
                return false;
        }
    }
    json_object *exprs = kite_obj_get(sel, "matchExpressions");
    for (size_t i = 0; exprs && json_object_is_type(exprs, json_type_array) && i < json_object_array_length(exprs); i++) {
        json_object *e = json_object_array_get_idx(exprs, i);
        const char *key = kite_obj_str(e, "key"), *op = kite_obj_str(e, "operator");
        const char *have = key ? kite_obj_str(labels, key) : NULL;
        json_object *values = kite_obj_get(e, "values");
        bool ok = false;
        if (kite_streq(op, "In")) ok = in_values(values, have);
        else if (kite_streq(op, "NotIn")) ok = !in_values(values, have);
        else if (kite_streq(op, "Exists")) ok = have != NULL;
        else if (kite_streq(op, "DoesNotExist")) ok = have == NULL;
        if (!ok) return false; /* an unknown operator matches nothing, as a selector that fails to parse */
    }
    return true;
}

/* ---- the union ---------------------------------------------------------------------------- */

static int by_name(const void *a, const void *b) {
    return strcmp(kite_meta_str(*(json_object *const *)a, "name"), kite_meta_str(*(json_object *const *)b, "name"));
}

json_object *kite_aggregated_rules(json_object *role, json_object *const *roles, size_t n) {
    json_object *sels = kite_obj_get(kite_obj_get(role, "aggregationRule"), "clusterRoleSelectors");
    json_object *out = json_object_new_array();
    json_object **sorted = n ? kite_calloc(n, sizeof *sorted) : NULL;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (kite_meta_str(roles[i], "name") && !kite_streq(kite_meta_str(roles[i], "name"), kite_meta_str(role, "name")))
            sorted[m++] = roles[i];
    if (m) qsort(sorted, m, sizeof *sorted, by_name);
    size_t ns = sels && json_object_is_type(sels, json_type_array) ? json_object_array_length(sels) : 0;
    for (size_t s = 0; s < ns; s++) {
        json_object *sel = json_object_array_get_idx(sels, s);
        for (size_t i = 0; i < m; i++) {
            if (!kite_label_selector_json_matches(sel, kite_obj_get(kite_obj_meta(sorted[i]), "labels"))) continue;
            json_object *rules = kite_obj_get(sorted[i], "rules");
            size_t nr = rules && json_object_is_type(rules, json_type_array) ? json_object_array_length(rules) : 0;
            for (size_t r = 0; r < nr; r++) {
                json_object *rule = json_object_array_get_idx(rules, r);
                bool dup = false;
                for (size_t h = 0; !dup && h < json_object_array_length(out); h++)
                    dup = kite_json_equal(json_object_array_get_idx(out, h), rule);
                if (!dup) json_object_array_add(out, json_object_get(rule));
            }
        }
    }
    free(sorted);
    return out;
}

/* ---- the controller ----------------------------------------------------------------------- */

static int patch_rules(struct kite_aggregator *a, const char *name, json_object *rules) {
    json_object *patch = json_object_new_object();
    kite_obj_set(patch, "rules", json_object_get(rules));
    _cleanup_free_ char *path = kite_asprintf(CLUSTERROLES "/%s", name);
    int e = kite_client_json(a->client, "PATCH", path, "application/merge-patch+json", patch, NULL, NULL);
    json_object_put(patch);
    return e == -ENOENT ? 0 : e; /* deleted meanwhile */
}

/* ---- on the framework: a reconciler over ClusterRoles; any change queues every role ---- */

static int64_t reconcile(void *ud, const char *name, json_object *role) {
    struct kite_aggregator *a = ud;
    json_object *agg = kite_obj_get(role, "aggregationRule");
    if (!role || !agg || json_object_is_type(agg, json_type_null)) {
        json_object_put(role);
        return 0;
    }
    size_t n = 0;
    char **keys = kite_informer_keys(a->roles, &n);
    json_object **all = kite_calloc(n + 1, sizeof *all);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if ((all[k] = kite_informer_get(a->roles, keys[i]))) k++;
        free(keys[i]);
    }
    free(keys);
    json_object *want = kite_aggregated_rules(role, all, k);
    json_object *have = kite_obj_get(role, "rules");
    bool same = have ? kite_json_equal(have, want) : json_object_array_length(want) == 0;
    int e = same ? 0 : patch_rules(a, name, want);
    if (e < 0) log_warn("aggregation", "clusterrole %s: cannot update its aggregated rules: %s (will retry)", name, strerror(-e));
    json_object_put(want);
    for (size_t i = 0; i < k; i++) json_object_put(all[i]);
    free(all);
    json_object_put(role);
    return e;
}

int kite_aggregator_run(struct kite_ctl_group *g) {
    struct kite_aggregator *a = kite_calloc(1, sizeof *a);
    a->client = kite_ctl_group_client(g);
    a->roles = kite_informer_factory_watch(kite_ctl_group_informers(g), CLUSTERROLES, NULL, NULL, NULL, NULL);
    struct kite_ctl_reconciler r = {
        .name = "aggregation", .path = CLUSTERROLES, .sync = reconcile, .ud = a, .free = free,
        .backoff_max_ns = KITE_AGGREGATION_RETRY_MAX_S * KITE_NS_PER_SEC,
        .resync_ns = KITE_AGGREGATION_RESYNC_S * KITE_NS_PER_SEC, .queue_all = true,
    };
    if (!a->roles) {
        free(a);
        return -ENOSPC;
    }
    return kite_ctl_reconcile(g, &r);
}
