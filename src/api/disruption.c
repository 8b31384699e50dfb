/* PodDisruptionBudget arithmetic and the eviction verdict (disruption.h). */
#include "api/disruption.h"
#include "api/registry.h"
#include "base/clock.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int64_t int_at(json_object *o, const char *k) {
    json_object *v = kite_obj_get(o, k);
    return v && json_object_is_type(v, json_type_int) ? json_object_get_int64(v) : 0;
}
static const char *str_at(json_object *o, const char *k) {
    json_object *v = kite_obj_get(o, k);
    return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
}

int kite_pdb_scaled(json_object *v, int32_t total, bool round_up, int32_t *ret) {
    if (v && json_object_is_type(v, json_type_int)) {
        *ret = (int32_t)json_object_get_int64(v);
        return 0;
    }
    if (!v || !json_object_is_type(v, json_type_string)) return -EINVAL;
    const char *s = json_object_get_string(v);
    size_t len = strlen(s);
    if (!len || s[len - 1] != '%' || len > 12) return -EINVAL;
    char num[16];
    memcpy(num, s, len - 1);
    num[len - 1] = 0;
    char *end;
    errno = 0;
    long p = strtol(num, &end, 10);
    if (!*num || *end || errno) return -EINVAL;
    double x = (double)p * (double)total / 100.0;
    *ret = (int32_t)(round_up ? ceil(x) : floor(x));
    return 0;
}

int kite_pdb_expected(json_object *pdb, int32_t npods, int32_t *ret_expected, int32_t *ret_desired) {
    json_object *spec = kite_obj_get(pdb, "spec");
    json_object *maxu = kite_obj_get(spec, "maxUnavailable"), *mina = kite_obj_get(spec, "minAvailable");
    int32_t desired = 0, v;
    if (maxu) {
        if (kite_pdb_scaled(maxu, npods, true, &v) < 0) return -EINVAL;
        desired = npods - v;
        if (desired < 0) desired = 0;
    } else if (mina) {
        if (kite_pdb_scaled(mina, npods, true, &v) < 0) return -EINVAL;
        desired = v;
    }
    *ret_expected = npods;
    *ret_desired = desired;
    return 0;
}

int32_t kite_pdb_allowed(int32_t current, int32_t desired, int32_t expected) {
    /* no pod expected yet: safe until the controller has seen the budget's first pods */
    int32_t allowed = current - desired;
    return expected <= 0 || allowed <= 0 ? 0 : allowed;
}

static bool in_values(json_object *values, const char *v) {
    for (size_t i = 0; v && values && json_object_is_type(values, json_type_array) && i < json_object_array_length(values); i++) {
        json_object *e = json_object_array_get_idx(values, i);
        if (e && json_object_is_type(e, json_type_string) && strcmp(json_object_get_string(e), v) == 0) return true;
    }
    return false;
}

bool kite_pdb_selects(json_object *pdb, json_object *pod) {
    json_object *sel = kite_obj_get(kite_obj_get(pdb, "spec"), "selector");
    if (!sel || !json_object_is_type(sel, json_type_object)) return false;
    if (strcmp(str_at(kite_obj_get(pdb, "metadata"), "namespace"), str_at(kite_obj_get(pod, "metadata"), "namespace")) != 0) return false;
    json_object *labels = kite_obj_get(kite_obj_get(pod, "metadata"), "labels");
    json_object *ml = kite_obj_get(sel, "matchLabels");
    if (ml && json_object_is_type(ml, json_type_object)) {
        json_object_object_foreach(ml, k, v) {
            json_object *have = kite_obj_get(labels, k);
            if (!have || !v || !json_object_is_type(v, json_type_string) || !json_object_is_type(have, json_type_string) ||
                strcmp(json_object_get_string(have), json_object_get_string(v)) != 0)
                return false;
        }
    }
    json_object *exprs = kite_obj_get(sel, "matchExpressions");
    for (size_t i = 0; exprs && json_object_is_type(exprs, json_type_array) && i < json_object_array_length(exprs); i++) {
        json_object *e = json_object_array_get_idx(exprs, i);
        const char *op = str_at(e, "operator");
        json_object *hv = kite_obj_get(labels, str_at(e, "key"));
        const char *have = hv && json_object_is_type(hv, json_type_string) ? json_object_get_string(hv) : NULL;
        json_object *values = kite_obj_get(e, "values");
        bool ok = false;
        if (strcmp(op, "In") == 0) ok = in_values(values, have);
        else if (strcmp(op, "NotIn") == 0) ok = !in_values(values, have);
        else if (strcmp(op, "Exists") == 0) ok = have != NULL;
        else if (strcmp(op, "DoesNotExist") == 0) ok = have == NULL;
        if (!ok) return false; /* an unknown operator: a selector that does not parse matches nothing */
    }
    return true;
}

static json_object *condition(json_object *obj_status, const char *type) {
    json_object *conds = kite_obj_get(obj_status, "conditions");
    for (size_t i = 0; conds && json_object_is_type(conds, json_type_array) && i < json_object_array_length(conds); i++) {
        json_object *c = json_object_array_get_idx(conds, i);
        if (strcmp(str_at(c, "type"), type) == 0) return c;
    }
    return NULL;
}

bool kite_pdb_pod_ready(json_object *pod) {
    return strcmp(str_at(condition(kite_obj_get(pod, "status"), "Ready"), "status"), "True") == 0;
}

void kite_pdb_set_condition(json_object *status, int64_t now_ns) {
    bool allowed = int_at(status, "disruptionsAllowed") > 0;
    const char *st = allowed ? "True" : "False";
    json_object *conds = kite_obj_get(status, "conditions");
    if (!conds || !json_object_is_type(conds, json_type_array)) {
        conds = json_object_new_array();
        json_object_object_add(status, "conditions", conds);
    }
    json_object *c = condition(status, "DisruptionAllowed");
    if (!c) {
        c = json_object_new_object();
        json_object_object_add(c, "type", json_object_new_string("DisruptionAllowed"));
        json_object_array_add(conds, c);
    }
    if (strcmp(str_at(c, "status"), st) != 0 || !kite_obj_get(c, "lastTransitionTime")) {
        char ts[21];
        kite_time_format(now_ns, ts);
        json_object_object_add(c, "lastTransitionTime", json_object_new_string(ts));
    }
    json_object_object_add(c, "status", json_object_new_string(st));
    json_object_object_add(c, "observedGeneration", json_object_new_int64(int_at(status, "observedGeneration")));
    json_object_object_add(c, "reason", json_object_new_string(allowed ? "SufficientPods" : "InsufficientPods"));
    json_object_object_add(c, "message", json_object_new_string(""));
}

static void refuse(struct kite_guard_verdict *v, int code, const char *msg, char *cause) {
    v->code = code;
    v->message = kite_strdup(msg);
    v->cause = cause;
    if (cause) v->cause_reason = "DisruptionBudget";
}

#define BUDGET_MSG "Cannot evict pod as it would violate the pod's disruption budget."

void kite_pdb_evict(json_object *pod, json_object *const *pdbs, size_t n, int64_t now_ns, bool dry_run,
                    struct kite_guard_verdict *ret) {
    *ret = (struct kite_guard_verdict){.update = SIZE_MAX};
    const char *phase = str_at(kite_obj_get(pod, "status"), "phase");
    bool terminal = strcmp(phase, "Succeeded") == 0 || strcmp(phase, "Failed") == 0;
    bool deleting = kite_obj_get(kite_obj_get(pod, "metadata"), "deletionTimestamp") != NULL;
    /* a terminal pod, one being deleted or one not started has disrupted nothing yet: no
     * budget is asked, but a pending pod must not have become healthy meanwhile */
    if (terminal || deleting || strcmp(phase, "Pending") == 0) {
        ret->pin = !terminal && !deleting;
        return;
    }
    size_t found = SIZE_MAX, matches = 0;
    for (size_t i = 0; i < n; i++)
        if (kite_pdb_selects(pdbs[i], pod)) {
            found = i;
            matches++;
        }
    if (matches > 1) {
        refuse(ret, 500, "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.", NULL);
        return;
    }
    if (!matches) return;
    json_object *pdb = pdbs[found], *st = kite_obj_get(pdb, "status");
    const char *name = str_at(kite_obj_get(pdb, "metadata"), "name");
    if (!kite_pdb_pod_ready(pod)) {
        /* an unhealthy pod counts in neither currentHealthy nor desiredHealthy: deleting it
         * disrupts nothing the budget guards, when the policy or the budget's state says so */
        if (strcmp(str_at(kite_obj_get(pdb, "spec"), "unhealthyPodEvictionPolicy"), "AlwaysAllow") == 0 ||
            (int_at(st, "currentHealthy") >= int_at(st, "desiredHealthy") && int_at(st, "desiredHealthy") > 0)) {
            ret->pin = true;
            return;
        }
    }
    if (int_at(st, "observedGeneration") < int_at(kite_obj_get(pdb, "metadata"), "generation")) {
        refuse(ret, 429, BUDGET_MSG, kite_asprintf("The disruption budget %s is still being processed by the server.", name));
        return;
    }
    int64_t allowed = int_at(st, "disruptionsAllowed");
    json_object *disrupted = kite_obj_get(st, "disruptedPods");
    if (allowed < 0) {
        refuse(ret, 403, "pdb disruptions allowed is negative", NULL);
        return;
    }
    if (disrupted && json_object_is_type(disrupted, json_type_object) && json_object_object_length(disrupted) > KITE_PDB_MAX_DISRUPTED) {
        refuse(ret, 403, "DisruptedPods map too big - too many evictions not confirmed by PDB controller", NULL);
        return;
    }
    if (allowed == 0) {
        refuse(ret, 429, BUDGET_MSG,
               kite_asprintf("The disruption budget %s needs %lld healthy pods and has %lld currently", name,
                             (long long)int_at(st, "desiredHealthy"), (long long)int_at(st, "currentHealthy")));
        return;
    }
    if (dry_run) return;
    json_object *ns = NULL;
    if (st) json_object_deep_copy(st, &ns, NULL);
    else ns = json_object_new_object();
    json_object_object_add(ns, "disruptionsAllowed", json_object_new_int64(allowed - 1));
    if (allowed - 1 == 0) kite_pdb_set_condition(ns, now_ns);
    json_object *dp = kite_obj_get(ns, "disruptedPods");
    if (!dp || !json_object_is_type(dp, json_type_object)) {
        dp = json_object_new_object();
        json_object_object_add(ns, "disruptedPods", dp);
    }
    char ts[21];
    kite_time_format(now_ns, ts);
    json_object_object_add(dp, str_at(kite_obj_get(pod, "metadata"), "name"), json_object_new_string(ts));
    ret->update = found;
    ret->status = ns;
}

void kite_guard_verdict_release(struct kite_guard_verdict *v) {
    free(v->message);
    free(v->cause);
    json_object_put(v->status);
    *v = (struct kite_guard_verdict){.update = SIZE_MAX};
}
