/* PodSecurity: kube-apiserver's Pod Security admission plugin (k8s.io/pod-security-admission's
 * admission package) over the checks of src/api/podsecurity.c.
 *
 * - A pod's create, and an update that changes an image or adds an ephemeral container
 *   (isSignificantPodUpdate), is checked against its namespace's policy: enforce refuses it
 *   403 `pods "x" is forbidden: violates PodSecurity "baseline:latest": ...`; audit records
 *   `pod-security.kubernetes.io/audit-violations` in the audit event; warn answers a Warning
 *   header `would violate PodSecurity "restricted:latest": ...`. The pod's subresources that
 *   upstream ignores (status, binding, eviction, log, exec, ...) are not checked.
 * - A kind that holds a pod template (its row's pod_template: Deployment, ReplicaSet,
 *   DaemonSet, Job) is checked for audit and warn only, never enforced: its pods are.
 * - A namespace's create or update with an invalid pod-security.kubernetes.io/ label is
 *   refused 422 (an update only when it brings new errors, as upstream).
 * - The cluster default (--pod-security-default) is the policy of a namespace without labels;
 *   usernames, namespaces and runtime classes may be exempt (--pod-security-exempt-*).
 *
 * - A namespace whose enforce level is raised is admitted with warnings naming its pods that
 *   violate the new level (EvaluatePodsInNamespace; at most KITE_PSA_NAMESPACE_MAX_PODS looked
 *   at, with no time limit where upstream also stops after 1 s). */
#include "apiserver/internal.h"
#include "api/podsecurity.h"
#include "base/map.h"

#include <stdio.h>

#define KITE_PSA_NAMESPACE_MAX_PODS 3000 /* pods checked when a namespace's enforce level rises (upstream's) */

struct kite_psa_config {
    struct kite_psa_policy defaults;
    char **exempt[3]; /* usernames, namespaces, runtime classes: NULL-terminated */
};
enum { EXEMPT_USER, EXEMPT_NS, EXEMPT_RUNTIME_CLASS };

static char **split_list(const char *s) {
    size_t n = 1;
    for (const char *p = s ? s : ""; *p; p++) n += *p == ',';
    char **v = kite_calloc(n + 1, sizeof *v);
    size_t i = 0;
    for (const char *p = s ? s : ""; *p;) {
        size_t len = strcspn(p, ",");
        if (len) v[i++] = kite_strndup(p, len);
        p += len + (p[len] == ',');
    }
    return v;
}

int kite_psa_config_new(const struct kite_apiserver_options *o, struct kite_psa_config **ret, char **ret_error) {
    struct kite_psa_lv lv = {.level = KITE_PSA_PRIVILEGED, .latest = true};
    if (o->pod_security_default && kite_psa_parse_lv(o->pod_security_default, &lv) < 0) {
        *ret_error = kite_asprintf("--pod-security-default: \"%s\": must be privileged, baseline or restricted, "
                                   "optionally followed by :latest or :v1.N",
                                   o->pod_security_default);
        return -EINVAL;
    }
    struct kite_psa_config *c = kite_calloc(1, sizeof *c);
    c->defaults = (struct kite_psa_policy){lv, lv, lv};
    c->exempt[EXEMPT_USER] = split_list(o->pod_security_exempt_usernames);
    c->exempt[EXEMPT_NS] = split_list(o->pod_security_exempt_namespaces);
    c->exempt[EXEMPT_RUNTIME_CLASS] = split_list(o->pod_security_exempt_runtime_classes);
    *ret = c;
    return 0;
}

void kite_psa_config_free(struct kite_psa_config *c) {
    if (!c) return;
    for (size_t i = 0; i < KITE_ARRAY_SIZE(c->exempt); i++) {
        for (char **p = c->exempt[i]; p && *p; p++) free(*p);
        free(c->exempt[i]);
    }
    free(c);
}

static bool exempt(const struct kite_psa_config *c, int which, const char *name) {
    if (!name || !*name) return false;
    for (char **p = c->exempt[which]; p && *p; p++)
        if (strcmp(*p, name) == 0) return true;
    return false;
}

#define ANNOTATION(k) KITE_PSA_LABEL_PREFIX k

static void annotate_exempt(const struct kite_admission_attrs *a, const char *why) {
    kite_admission_annotate(a, ANNOTATION("exempt"), why);
}

/* ---- namespaces ------------------------------------------------------------------------ */

static json_object *labels_of(json_object *obj) { return kite_obj_get(kite_obj_meta(obj), "labels"); }

/* exemptNamespaceWarning: the labels of an exempt namespace that will be ignored */
static void warn_exempt_namespace(const struct kite_admission_attrs *a, const struct kite_psa_policy *p,
                                  json_object *labels, const char *name) {
    const struct kite_psa_policy *def = &a->srv->psa->defaults;
    bool privileged = p->enforce.level == KITE_PSA_PRIVILEGED && p->audit.level == KITE_PSA_PRIVILEGED &&
                      p->warn.level == KITE_PSA_PRIVILEGED;
    if (privileged || (kite_psa_lv_equivalent(&p->enforce, &def->enforce) &&
                       kite_psa_lv_equivalent(&p->audit, &def->audit) && kite_psa_lv_equivalent(&p->warn, &def->warn)))
        return;
    struct { const char *mode; const struct kite_psa_lv *lv; } modes[] = {
        {"enforce", &p->enforce}, {"audit", &p->audit}, {"warn", &p->warn}};
    struct kite_buf b = {0};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(modes); i++) {
        char k1[64], k2[64], lv[KITE_PSA_LV_MAX];
        snprintf(k1, sizeof k1, KITE_PSA_LABEL_PREFIX "%s", modes[i].mode);
        snprintf(k2, sizeof k2, KITE_PSA_LABEL_PREFIX "%s-version", modes[i].mode);
        if (modes[i].lv->level == KITE_PSA_PRIVILEGED || (!kite_obj_get(labels, k1) && !kite_obj_get(labels, k2)))
            continue;
        kite_psa_lv_format(modes[i].lv, lv);
        kite_buf_printf(&b, "%s%s=%s", b.len ? ", " : "", modes[i].mode, lv);
    }
    kite_admission_warn(a, "namespace \"%s\" is exempt from Pod Security, and the policy (%s) will be ignored", name,
                   b.len ? b.p : "");
    kite_buf_release(&b);
}

/* A controller's uid (the ownerReference with controller: true), or NULL. */
static const char *controller_uid(json_object *pod) {
    json_object *refs = kite_obj_get(kite_obj_meta(pod), "ownerReferences");
    for (size_t i = 0; refs && json_object_is_type(refs, json_type_array) && i < json_object_array_length(refs); i++) {
        json_object *r = json_object_array_get_idx(refs, i);
        json_object *c = kite_obj_get(r, "controller");
        if (c && json_object_get_boolean(c)) return kite_obj_str(r, "uid");
    }
    return NULL;
}

struct pod_warning {
    char *reasons;       /* owned */
    const char *first;   /* the least pod name with them (borrowed from the cache's parse) */
    size_t count;
};

static int cmp_warning(const void *x, const void *y) {
    return strcmp(*(char *const *)x, *(char *const *)y);
}

/* EvaluatePodsInNamespace: a new enforce level on a namespace whose pods violate it is
 * admitted with warnings naming them (one per distinct set of reasons, the least pod name and
 * how many others). A pod of a controller already looked at comes after the others;
 * KITE_PSA_NAMESPACE_MAX_PODS are checked at most. */
static void warn_existing_pods(const struct kite_admission_attrs *a, const char *ns, const struct kite_psa_lv *enforce) {
    const struct kite_resource *pods = NULL; /* the row that is a pod (no kind named here) */
    for (size_t i = 0; kite_resources[i] && !pods; i++)
        if (kite_resources[i]->pod_template && !*kite_resources[i]->pod_template) pods = kite_resources[i];
    if (!pods) return;
    _cleanup_free_ char *prefix = kite_object_prefix(pods, ns);
    struct kite_record **recs = NULL;
    size_t n = 0;
    if (kite_wcache_list(kite_apiserver_storage_cache(a->srv, pods), prefix, NULL, 0, NULL, NULL, &recs, &n, NULL, NULL) < 0) {
        kite_admission_warn(a, "failed to list pods while checking new PodSecurity enforce level");
        return;
    }
    /* uncontrolled pods and each controller's first pod, then the controllers' other pods */
    json_object **order = kite_calloc(n ? n : 1, sizeof *order), **dups = kite_calloc(n ? n : 1, sizeof *dups);
    size_t total = 0, nd = 0;
    struct kite_map controllers = {0};
    for (size_t i = 0; i < n; i++) {
        json_object *pod = kite_apiserver_record_object(recs[i]);
        if (exempt(a->srv->psa, EXEMPT_RUNTIME_CLASS, kite_obj_str(kite_obj_get(pod, "spec"), "runtimeClassName")))
            continue;
        const char *uid = controller_uid(pod);
        if (uid && kite_map_get(&controllers, uid)) {
            dups[nd++] = pod;
            continue;
        }
        if (uid) kite_map_put(&controllers, uid, pod);
        order[total++] = pod;
    }
    kite_map_release(&controllers);
    for (size_t i = 0; i < nd; i++) order[total++] = dups[i];
    free(dups);
    size_t checked = total < KITE_PSA_NAMESPACE_MAX_PODS ? total : KITE_PSA_NAMESPACE_MAX_PODS;
    struct pod_warning *w = kite_calloc(checked ? checked : 1, sizeof *w);
    size_t nw = 0;
    for (size_t i = 0; i < checked; i++) {
        char *reasons = NULL;
        free(kite_psa_evaluate(enforce, kite_obj_get(order[i], "metadata"), kite_obj_get(order[i], "spec"), &reasons));
        if (!reasons) continue;
        const char *name = kite_meta_str(order[i], "name") ? kite_meta_str(order[i], "name") : "";
        size_t j = 0;
        while (j < nw && strcmp(w[j].reasons, reasons) != 0) j++;
        if (j == nw) {
            w[nw++] = (struct pod_warning){.reasons = reasons, .first = name, .count = 1};
            continue;
        }
        free(reasons);
        if (strcmp(name, w[j].first) < 0) w[j].first = name;
        w[j].count++;
    }
    char lv[KITE_PSA_LV_MAX];
    kite_psa_lv_format(enforce, lv);
    if (checked < total)
        kite_admission_warn(a, "new PodSecurity enforce level only checked against the first %zu of %zu existing pods",
                       checked, total);
    if (nw) kite_admission_warn(a, "existing pods in namespace \"%s\" violate the new PodSecurity enforce level \"%s\"", ns, lv);
    char **lines = kite_calloc(nw ? nw : 1, sizeof *lines);
    for (size_t i = 0; i < nw; i++) {
        if (w[i].count == 1) lines[i] = kite_asprintf("%s: %s", w[i].first, w[i].reasons);
        else if (w[i].count == 2) lines[i] = kite_asprintf("%s (and 1 other pod): %s", w[i].first, w[i].reasons);
        else lines[i] = kite_asprintf("%s (and %zu other pods): %s", w[i].first, w[i].count - 1, w[i].reasons);
        free(w[i].reasons);
    }
    qsort(lines, nw, sizeof *lines, cmp_warning);
    for (size_t i = 0; i < nw; i++) {
        kite_admission_warn(a, "%s", lines[i]);
        free(lines[i]);
    }
    free(lines);
    free(w);
    free(order);
    for (size_t i = 0; i < n; i++) kite_record_unref(recs[i]);
    free(recs);
}

static int validate_namespace(const struct kite_admission_attrs *a, struct kite_admission_denial *d) {
    if (a->sub || (a->op != KITE_ADMIT_CREATE && a->op != KITE_ADMIT_UPDATE)) return 0;
    struct kite_psa_policy p, old;
    struct kite_causes errs = {0}, old_errs = {0};
    json_object *labels = labels_of(a->obj);
    kite_psa_policy_from_labels(labels, &a->srv->psa->defaults, &p, &errs);
    /* the namespace of a namespace request: its name on a URL that names it (an update) */
    const char *ns = a->op == KITE_ADMIT_UPDATE ? a->name : NULL;
    const char *name = kite_meta_str(a->obj, "name") ? kite_meta_str(a->obj, "name") : "";
    int r = 0;
    if (a->op == KITE_ADMIT_CREATE) {
        if (errs.n) goto invalid;
        if (exempt(a->srv->psa, EXEMPT_NS, ns)) warn_exempt_namespace(a, &p, labels, name);
        goto out;
    }
    kite_psa_policy_from_labels(labels_of(a->old), &a->srv->psa->defaults, &old, &old_errs);
    if (errs.n) {
        _cleanup_free_ char *now = kite_causes_summary(&errs), *before = kite_causes_summary(&old_errs);
        if (!old_errs.n || strcmp(now, before) != 0) goto invalid;
    }
    if (kite_psa_lv_equivalent(&p.enforce, &old.enforce) && p.enforce.level == old.enforce.level) goto out;
    if (p.enforce.level == KITE_PSA_PRIVILEGED) goto out;
    if (p.enforce.latest == old.enforce.latest && p.enforce.minor == old.enforce.minor &&
        p.enforce.level <= old.enforce.level)
        goto out;
    if (exempt(a->srv->psa, EXEMPT_NS, ns)) warn_exempt_namespace(a, &p, labels, name);
    else warn_existing_pods(a, name, &p.enforce);
    goto out;
invalid:
    d->code = 422;
    d->reason = "Invalid";
    d->causes = errs;
    errs = (struct kite_causes){0};
    d->details.name = name;
    r = -EPERM;
out:
    kite_causes_release(&errs);
    kite_causes_release(&old_errs);
    return r;
}

/* ---- pods and templates ---------------------------------------------------------------- */

static const char *const IGNORED_POD_SUBRESOURCES[] = {"exec", "attach", "binding", "eviction", "log",
                                                       "portforward", "proxy", "status", NULL};

static const char *image_at(json_object *list, size_t i) {
    const char *s = kite_obj_str(json_object_array_get_idx(list, i), "image");
    return s ? s : "";
}


/* isSignificantPodUpdate: an image changed, or an ephemeral container added or changed */
static bool significant_update(json_object *pod, json_object *old) {
    json_object *spec = kite_obj_get(pod, "spec"), *ospec = kite_obj_get(old, "spec");
    static const char *const lists[] = {"containers", "initContainers"};
    for (size_t l = 0; l < 2; l++) {
        json_object *n = kite_obj_get(spec, lists[l]), *o = kite_obj_get(ospec, lists[l]);
        if (kite_array_len(n) != kite_array_len(o)) return true;
        for (size_t i = 0; i < kite_array_len(n); i++)
            if (strcmp(image_at(n, i), image_at(o, i)) != 0) return true;
    }
    json_object *ne = kite_obj_get(spec, "ephemeralContainers"), *oe = kite_obj_get(ospec, "ephemeralContainers");
    for (size_t i = 0; i < kite_array_len(ne); i++) {
        const char *name = kite_obj_str(json_object_array_get_idx(ne, i), "name");
        size_t j = 0;
        while (j < kite_array_len(oe) && !kite_streq(kite_obj_str(json_object_array_get_idx(oe, j), "name"), name)) j++;
        if (j == kite_array_len(oe) || strcmp(image_at(ne, i), image_at(oe, j)) != 0) return true;
    }
    return false;
}

/* The object at a dotted path ("spec.template"; "" = obj). */
static json_object *at_path(json_object *obj, const char *path) { return kite_obj_path(obj, path); }

/* EvaluatePod: enforce (pods only), then audit, then warn when still allowed. */
static int evaluate(const struct kite_admission_attrs *a, struct kite_admission_denial *d, const struct kite_psa_policy *p,
                    const char *labels_invalid, json_object *pod, bool enforce) {
    json_object *meta = kite_obj_get(pod, "metadata"), *spec = kite_obj_get(pod, "spec");
    if (exempt(a->srv->psa, EXEMPT_RUNTIME_CLASS, kite_obj_str(spec, "runtimeClassName"))) {
        annotate_exempt(a, "runtimeClass");
        return 0;
    }
    if (labels_invalid) {
        _cleanup_free_ char *v = kite_asprintf("Failed to parse policy: %s", labels_invalid);
        kite_admission_annotate(a, ANNOTATION("error"), v);
    }
    char lv[KITE_PSA_LV_MAX];
    int r = 0;
    _cleanup_free_ char *enforced = NULL;
    if (enforce) {
        kite_psa_lv_format(&p->enforce, lv);
        kite_admission_annotate(a, ANNOTATION("enforce-policy"), lv);
        enforced = kite_psa_evaluate(&p->enforce, meta, spec, NULL);
        if (enforced) r = kite_admission_forbid(a, d, "violates PodSecurity \"%s\": %s", lv, enforced);
    }
    _cleanup_free_ char *audited = NULL;
    if (enforce && kite_psa_lv_equivalent(&p->audit, &p->enforce) && p->audit.level == p->enforce.level)
        audited = enforced ? kite_strdup(enforced) : NULL;
    else
        audited = kite_psa_evaluate(&p->audit, meta, spec, NULL);
    if (audited) {
        kite_psa_lv_format(&p->audit, lv);
        _cleanup_free_ char *v = kite_asprintf("would violate PodSecurity \"%s\": %s", lv, audited);
        kite_admission_annotate(a, ANNOTATION("audit-violations"), v);
    }
    if (r < 0) return r;
    _cleanup_free_ char *warned = kite_psa_evaluate(&p->warn, meta, spec, NULL);
    if (warned) {
        kite_psa_lv_format(&p->warn, lv);
        kite_admission_warn(a, "would violate PodSecurity \"%s\": %s", lv, warned);
    }
    return 0;
}

int kite_admission_pod_security(const struct kite_admission_attrs *a, struct kite_admission_denial *d) {
    if (!a->srv || !a->srv->psa || a->op == KITE_ADMIT_DELETE || !a->obj) return 0;
    const struct kite_resource *nsr = kite_registry_namespaces();
    if (a->res == nsr) return validate_namespace(a, d);
    if (!a->res->pod_template || !a->ns) return 0;
    bool is_pod = !*a->res->pod_template;
    if (a->sub) {
        if (!is_pod) return 0;
        for (const char *const *s = IGNORED_POD_SUBRESOURCES; *s; s++)
            if (strcmp(*s, a->sub) == 0) return 0;
    }
    const struct kite_psa_config *c = a->srv->psa;
    if (exempt(c, EXEMPT_NS, a->ns)) {
        annotate_exempt(a, "namespace");
        return 0;
    }
    if (exempt(c, EXEMPT_USER, a->user ? a->user->name : NULL)) {
        annotate_exempt(a, "user");
        return 0;
    }
    json_object *ns = kite_apiserver_lookup(a->srv, nsr, NULL, a->ns);
    if (!ns) {
        if (!is_pod) return 0; /* upstream lets a template through, noting the error for audit */
        d->code = 500;
        d->reason = "InternalError";
        d->message = kite_asprintf("Internal error occurred: failed to lookup namespace \"%s\"", a->ns);
        return -EPERM;
    }
    struct kite_psa_policy p;
    struct kite_causes errs = {0};
    kite_psa_policy_from_labels(labels_of(ns), &c->defaults, &p, &errs);
    json_object_put(ns);
    _cleanup_free_ char *invalid = errs.n ? kite_causes_summary(&errs) : NULL;
    kite_causes_release(&errs);
    int r = 0;
    if (is_pod) {
        if (!invalid && p.enforce.level == KITE_PSA_PRIVILEGED && p.audit.level == KITE_PSA_PRIVILEGED &&
            p.warn.level == KITE_PSA_PRIVILEGED) {
            kite_admission_annotate(a, ANNOTATION("enforce-policy"), "privileged:latest");
            return 0;
        }
        if (a->op == KITE_ADMIT_UPDATE && a->old && !significant_update(a->obj, a->old)) return 0;
        r = evaluate(a, d, &p, invalid, a->obj, true);
    } else {
        if (!invalid && p.warn.level == KITE_PSA_PRIVILEGED && p.audit.level == KITE_PSA_PRIVILEGED) return 0;
        json_object *tmpl = at_path(a->obj, a->res->pod_template);
        if (tmpl) r = evaluate(a, d, &p, invalid, tmpl, false);
    }
    return r;
}
