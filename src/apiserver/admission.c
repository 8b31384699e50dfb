/* The admission chain: an ordered table of plugins, as kube-apiserver's --enable-admission-plugins.
 * Every write passes the mutating plugins (which may change the object) before the kind's
 * validation, then the validating plugins (which only admit or refuse), each given the request
 * context (struct kite_admission_attrs). A plugin names no kind: it reads rows. Adding a
 * plugin is a function and a row in PLUGINS below. */
#include "apiserver/internal.h"
#include "apiserver/rbac.h"

#include <stdarg.h>
#include <stdio.h>

static int deny(struct kite_admission_denial *d, int code, const char *reason, const char *fmt, ...) KITE_PRINTF(4, 5);
static int deny(struct kite_admission_denial *d, int code, const char *reason, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&d->message, fmt, ap) < 0) d->message = NULL;
    va_end(ap);
    d->code = code;
    d->reason = reason;
    return -EPERM;
}

static bool listed(const char *const *names, const char *name) {
    for (; names && *names; names++)
        if (kite_streq(*names, name)) return true;
    return false;
}

/* NamespaceLifecycle: nothing is created in a namespace that does not exist or is being
 * deleted, and the namespaces the system lives in cannot be deleted. */
static int namespace_lifecycle(const struct kite_admission_attrs *a, struct kite_admission_denial *d) {
    const struct kite_resource *nsr = kite_registry_namespaces();
    char gr[128];
    kite_resource_gr(a->res, gr);
    /* apierrors.NewForbidden's message: `<group resource> "<name>" is forbidden: <why>` */
    if (a->op == KITE_ADMIT_DELETE && listed(a->res->undeletable, a->name))
        return deny(d, 403, "Forbidden", "%s \"%s\" is forbidden: this %s may not be deleted", gr, a->name,
                    a->res->singular);
    if (a->op != KITE_ADMIT_CREATE || !a->res->namespaced) return 0;
    json_object *ns = kite_apiserver_lookup(a->srv, nsr, NULL, a->ns);
    if (!ns) {
        d->details = (struct status_details){.name = a->ns, .kind = nsr->plural};
        return deny(d, 404, "NotFound", "%s \"%s\" not found", nsr->plural, a->ns);
    }
    bool terminating = kite_meta_str(ns, "deletionTimestamp") != NULL;
    json_object_put(ns);
    if (terminating) {
        /* about the object refused (kube-apiserver's details name it, not the namespace) */
        const char *name = kite_meta_str(a->obj, "name") ? kite_meta_str(a->obj, "name") : "";
        d->details = (struct status_details){.name = name, .group = *a->res->group ? a->res->group : NULL,
                                             .kind = a->res->plural};
        return deny(d, 403, "Forbidden",
                    "%s \"%s\" is forbidden: unable to create new content in namespace %s because it is being terminated",
                    gr, name, a->ns);
    }
    return 0;
}

/* DefaultTolerationSeconds: a new object of a kind that tolerates taints (its row's
 * default_tolerations: pods) tolerates its node being not ready or unreachable for
 * kube-apiserver's default 300 s (--default-not-ready-toleration-seconds,
 * --default-unreachable-toleration-seconds) before it is evicted. */
static int default_toleration_seconds(const struct kite_admission_attrs *a, struct kite_admission_denial *d) {
    if (a->op != KITE_ADMIT_CREATE || a->sub || !a->res->default_tolerations || !a->obj) return 0;
    a->res->default_tolerations(a->obj, KITE_NOT_READY_TOLERATION_S, KITE_UNREACHABLE_TOLERATION_S);
    return 0;
}

/* SpecRequester: a kind whose spec records who created it (CSRs) gets the requesting user's
 * name, uid, groups and extra there, as the CSR strategy's PrepareForCreate does; what the
 * client sent in those fields is dropped. */
static int spec_requester(const struct kite_admission_attrs *a, struct kite_admission_denial *d) {
    if (a->op != KITE_ADMIT_CREATE || a->sub || !a->res->spec_requester || !a->obj) return 0;
    json_object *spec = kite_obj_ensure(a->obj, "spec");
    kite_obj_set(spec, "username", json_object_new_string(a->user->name ? a->user->name : ""));
    if (a->user->uid && *a->user->uid) kite_obj_set(spec, "uid", json_object_new_string(a->user->uid));
    else json_object_object_del(spec, "uid");
    json_object *groups = json_object_new_array();
    for (size_t i = 0; i < a->user->n_groups; i++) json_object_array_add(groups, json_object_new_string(a->user->groups[i]));
    kite_obj_set(spec, "groups", groups);
    json_object_object_del(spec, "extra");
    if (a->user->n_extra) {
        json_object *extra = kite_obj_ensure(spec, "extra");
        for (size_t i = 0; i < a->user->n_extra; i++) {
            json_object *vals = kite_obj_get(extra, a->user->extra[2 * i]);
            if (!vals) kite_obj_set(extra, a->user->extra[2 * i], vals = json_object_new_array());
            json_object_array_add(vals, json_object_new_string(a->user->extra[2 * i + 1]));
        }
    }
    return 0;
}

static const struct kite_admission_plugin PLUGINS[] = {
    {"NamespaceLifecycle", NULL, namespace_lifecycle},
    {"ServiceAccount", kite_admission_service_account, NULL}, /* admission_serviceaccount.c */
    {"DefaultTolerationSeconds", default_toleration_seconds, NULL},
    {"NodeRestriction", NULL, kite_admission_node_restriction}, /* admission_node.c */
    {"PodSecurity", NULL, kite_admission_pod_security},         /* admission_podsecurity.c */
    {"RBACEscalation", NULL, kite_apiserver_rbac_admit}, /* upstream: in the RBAC kinds' storage */
    {"SpecRequester", spec_requester, NULL},           /* upstream: in the CSR kind's strategy */
    {"CertificateApproval", NULL, kite_admission_csr_approval},          /* admission_csr.c */
    {"CertificateSigning", NULL, kite_admission_csr_signing},
    {"CertificateSubjectRestriction", NULL, kite_admission_csr_subject_restriction},
};

const struct kite_admission_plugin *kite_admission_plugins(size_t *ret_n) {
    *ret_n = KITE_ARRAY_SIZE(PLUGINS);
    return PLUGINS;
}

static int run(const struct kite_admission_plugin *p, size_t n, bool mutating, const struct kite_admission_attrs *a,
               struct kite_admission_denial *d) {
    for (size_t i = 0; i < n; i++) {
        int (*fn)(const struct kite_admission_attrs *, struct kite_admission_denial *) =
            mutating ? p[i].mutate : p[i].validate;
        if (fn && fn(a, d) < 0) return -EPERM;
    }
    return 0;
}

int kite_admission_mutate(const struct kite_admission_attrs *a, struct kite_admission_denial *d) {
    return run(PLUGINS, KITE_ARRAY_SIZE(PLUGINS), true, a, d);
}

int kite_admission_validate(const struct kite_admission_attrs *a, struct kite_admission_denial *d) {
    return run(PLUGINS, KITE_ARRAY_SIZE(PLUGINS), false, a, d);
}

void kite_admission_reply(struct req *rq, struct kite_admission_denial *d) {
    if (d->causes.n) {
        kite_apiserver_reply_invalid(rq, d->details.name, &d->causes);
        kite_causes_release(&d->causes);
        free(d->message);
        d->message = NULL;
        return;
    }
    if (d->details.kind) kite_apiserver_reply_error_about(rq, d->code, d->reason, &d->details, "%s", d->message ? d->message : "");
    else kite_apiserver_reply_error(rq, d->code, d->reason, "%s", d->message ? d->message : "");
    free(d->message);
    d->message = NULL;
}

void kite_admission_warn(const struct kite_admission_attrs *a, const char *fmt, ...) {
    if (!a->notes || a->notes->n_warnings == KITE_ADMISSION_WARNINGS_MAX) return;
    va_list ap;
    va_start(ap, fmt);
    char *w = NULL;
    if (vasprintf(&w, fmt, ap) >= 0) a->notes->warnings[a->notes->n_warnings++] = w;
    va_end(ap);
}

void kite_admission_annotate(const struct kite_admission_attrs *a, const char *key, const char *value) {
    if (!a->notes) return;
    struct kite_buf *b = &a->notes->annotations;
    if (b->len) kite_buf_putc(b, ',');
    kite_buf_json_str(b, key);
    kite_buf_putc(b, ':');
    kite_buf_json_str(b, value);
}

void kite_admission_notes_apply(struct req *rq, struct kite_admission_notes *n) {
    for (size_t i = 0; i < n->n_warnings && !rq->admission_warned; i++) kite_apiserver_reply_add_warning(rq, n->warnings[i]);
    if (n->n_warnings) rq->admission_warned = true;
    free(rq->audit_annotations);
    rq->audit_annotations = n->annotations.len ? kite_buf_detach(&n->annotations, NULL) : NULL;
    kite_admission_notes_release(n);
}

void kite_admission_notes_release(struct kite_admission_notes *n) {
    for (size_t i = 0; i < n->n_warnings; i++) free(n->warnings[i]);
    n->n_warnings = 0;
    kite_buf_release(&n->annotations);
}

/* ---- refusals of the plugins ---- */

/* The name admission.NewForbidden puts in the message: the request's, else the object's name
 * or generateName, else "Unknown". */
static const char *subject_name(const struct kite_admission_attrs *a) {
    if (a->name && *a->name) return a->name;
    const char *n = a->obj ? kite_meta_str(a->obj, "name") : NULL;
    if (n && *n) return n;
    n = a->obj ? kite_meta_str(a->obj, "generateName") : NULL;
    return n && *n ? n : "Unknown";
}

int kite_admission_forbid(const struct kite_admission_attrs *a, struct kite_admission_denial *d, const char *fmt, ...) {
    char gr[128];
    kite_resource_gr(a->res, gr);
    const char *name = subject_name(a);
    va_list ap;
    va_start(ap, fmt);
    char *why = NULL;
    if (vasprintf(&why, fmt, ap) < 0) why = NULL;
    va_end(ap);
    d->message = kite_asprintf("%s \"%s\" is forbidden: %s", gr, name, why ? why : "");
    free(why);
    d->code = 403;
    d->reason = "Forbidden";
    d->details = (struct status_details){.name = name, .group = *a->res->group ? a->res->group : NULL,
                                         .kind = a->res->plural};
    return -EPERM;
}
