/* ClusterRole aggregation (controllers.h), as kube-controller-manager's
 * clusterrole-aggregation controller: one thread lists and watches ClusterRoles, keeps them by
 * name, and after the list and each event recomputes every aggregated role; a role whose rules
 * differ from the union is patched. Its own patches come back as events that change nothing,
 * so chains (view into edit into admin) settle by themselves. */
#include "controllers/controllers.h"
#include "api/registry.h"
#include "base/backoff.h"
#include "base/log.h"
#include "base/map.h"
#include "json/patch.h"

#include <pthread.h>
#include <stdio.h>

#define CLUSTERROLES "/apis/rbac.authorization.k8s.io/v1/clusterroles"

struct kite_aggregator {
    struct kite_client *client;
    struct kite_clock *clock;
    pthread_t thread;
    struct kite_cancel cancel;
    struct kite_backoff backoff;
    struct kite_map roles; /* name -> json_object (owned) */
    bool retry;            /* a patch failed: list again after a back-off */
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

static void reconcile_all(struct kite_aggregator *a) {
    size_t n = a->roles.len, k = 0;
    json_object **all = n ? kite_calloc(n, sizeof *all) : NULL;
    const char *key;
    void *v;
    for (size_t i = 0; k < n && kite_map_next(&a->roles, &i, &key, &v);) all[k++] = v;
    for (size_t i = 0; i < k; i++) {
        json_object *agg = kite_obj_get(all[i], "aggregationRule");
        if (!agg || json_object_is_type(agg, json_type_null)) continue;
        json_object *want = kite_aggregated_rules(all[i], all, k);
        json_object *have = kite_obj_get(all[i], "rules");
        bool same = have ? kite_json_equal(have, want) : json_object_array_length(want) == 0;
        if (!same) {
            const char *name = kite_meta_str(all[i], "name");
            int e = patch_rules(a, name, want);
            if (e < 0) {
                a->retry = true;
                log_warn("aggregation", "clusterrole %s: cannot update its aggregated rules: %s (will retry)", name,
                         strerror(-e));
            }
        }
        json_object_put(want);
    }
    free(all);
}

static void put_role(struct kite_aggregator *a, json_object *role) {
    const char *name = kite_meta_str(role, "name");
    if (!name) return;
    json_object *old = kite_map_put(&a->roles, name, json_object_get(role));
    json_object_put(old);
}

static void clear_roles(struct kite_aggregator *a) {
    const char *key;
    void *v;
    for (size_t i = 0; kite_map_next(&a->roles, &i, &key, &v);) json_object_put(v);
    kite_map_release(&a->roles);
    a->roles = (struct kite_map){0};
}

struct watch_ctx {
    struct kite_aggregator *a;
    char rv[32];
};

static int on_event(json_object *ev, void *ud) {
    struct watch_ctx *w = ud;
    json_object *obj = kite_obj_get(ev, "object");
    const char *type = kite_obj_str(ev, "type"), *rv = kite_meta_str(obj, "resourceVersion");
    if (kite_streq(type, "ERROR")) return -ESTALE; /* 410: list again */
    if (rv) snprintf(w->rv, sizeof w->rv, "%s", rv);
    if (kite_streq(type, "BOOKMARK")) return 0;
    if (kite_streq(type, "DELETED")) json_object_put(kite_map_del(&w->a->roles, kite_meta_str(obj, "name")));
    else put_role(w->a, obj);
    reconcile_all(w->a);
    return w->a->retry ? -EAGAIN : 0;
}

static void *run(void *ud) {
    struct kite_aggregator *a = ud;
    while (!kite_cancel_fired(&a->cancel)) {
        json_object *list = NULL;
        a->retry = false;
        int e = kite_client_json(a->client, "GET", CLUSTERROLES, NULL, NULL, NULL, &list);
        struct watch_ctx w = {a, ""};
        if (e == 0) {
            clear_roles(a);
            json_object *items = kite_obj_get(list, "items");
            for (size_t i = 0; items && i < json_object_array_length(items); i++) put_role(a, json_object_array_get_idx(items, i));
            reconcile_all(a);
            const char *rv = kite_meta_str(list, "resourceVersion");
            snprintf(w.rv, sizeof w.rv, "%s", rv ? rv : "");
        } else {
            log_warn("aggregation", "cannot list clusterroles: %s (will retry)", strerror(-e));
        }
        json_object_put(list);
        if (e < 0 || a->retry) {
            kite_cancel_wait(&a->cancel, kite_backoff_next(&a->backoff));
            continue;
        }
        kite_backoff_reset(&a->backoff);
        _cleanup_free_ char *path =
            kite_asprintf(CLUSTERROLES "?watch=true&resourceVersion=%s&timeoutSeconds=%d", w.rv, KITE_AGGREGATION_RESYNC_S);
        if (kite_client_watch(a->client, path, on_event, &w, &a->cancel) == -EAGAIN)
            kite_cancel_wait(&a->cancel, kite_backoff_next(&a->backoff));
    }
    return NULL;
}

int kite_aggregator_start(const struct kite_aggregator_options *o, struct kite_aggregator **ret) {
    struct kite_aggregator *a = kite_calloc(1, sizeof *a);
    a->client = o->client;
    a->clock = o->clock ? o->clock : kite_clock_real();
    kite_cancel_init(&a->cancel);
    kite_backoff_init(&a->backoff, KITE_NS_PER_SEC, KITE_AGGREGATION_RETRY_MAX_S * KITE_NS_PER_SEC, 2.0, 0.1,
                      (uint64_t)kite_now_mono(a->clock));
    if (pthread_create(&a->thread, NULL, run, a) != 0) {
        kite_cancel_release(&a->cancel);
        free(a);
        return -EAGAIN;
    }
    pthread_setname_np(a->thread, "aggregation");
    *ret = a;
    return 0;
}

void kite_aggregator_stop(struct kite_aggregator *a) {
    if (!a) return;
    kite_cancel_fire(&a->cancel);
    pthread_join(a->thread, NULL);
    kite_cancel_release(&a->cancel);
    clear_roles(a);
    free(a);
}
