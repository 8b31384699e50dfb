/* Kinds that are never stored (access reviews): a POST is a question to the authorizer chain,
 * answered 201 with the request's object and its status filled by the row's evaluate hook.
 * The hook learns who asks and what the chain answers through a kite_review_env built here,
 * so the server names no kind and the kinds know no authorizer. */
#include "apiserver/internal.h"
#include "api/status.h"

/* ---- rules (SelfSubjectRulesReview) ------------------------------------------------------ */

static json_object *string_array(const char *const *v) {
    json_object *a = json_object_new_array();
    for (; v && *v; v++) json_object_array_add(a, json_object_new_string(*v));
    return a;
}

void kite_authz_rule_add(struct kite_authz_rules *r, const char *const *verbs, const char *const *groups,
                         const char *const *resources, const char *const *names) {
    json_object *o = json_object_new_object();
    kite_obj_set(o, "verbs", string_array(verbs));
    kite_obj_set(o, "apiGroups", string_array(groups));
    kite_obj_set(o, "resources", string_array(resources));
    if (names && *names) kite_obj_set(o, "resourceNames", string_array(names));
    json_object_array_add(r->resource_rules, o);
}

void kite_authz_rule_add_paths(struct kite_authz_rules *r, const char *const *verbs, const char *const *urls) {
    json_object *o = json_object_new_object();
    kite_obj_set(o, "verbs", string_array(verbs));
    kite_obj_set(o, "nonResourceURLs", string_array(urls));
    json_object_array_add(r->non_resource_rules, o);
}

/* ---- what the hooks ask ------------------------------------------------------------------ */

static void user_from(const struct kite_review_user *ru, struct kite_user *u) {
    *u = (struct kite_user){.name = ru->name, .uid = ru->uid};
    for (size_t i = 0; i < ru->n_groups && u->n_groups < KITE_ARRAY_SIZE(u->groups); i++) u->groups[u->n_groups++] = ru->groups[i];
    for (size_t i = 0; i < ru->n_extra && i < KITE_IMPERSONATE_EXTRA_MAX; i++) {
        u->extra[2 * i] = ru->extra[2 * i];
        u->extra[2 * i + 1] = ru->extra[2 * i + 1];
        u->n_extra++;
    }
}

/* The chain as kite_authorize walks it, keeping "no opinion" apart from a denial: a review
 * answers allowed=false, denied=false when no authorizer decided (kube-apiserver's union). */
static void review_authorize(const struct kite_review_env *env, const struct kite_review_attrs *ra,
                             struct kite_review_decision *ret) {
    struct kite_user u;
    user_from(ra->user, &u);
    struct kite_authz_attrs a = {.user = &u, .verb = ra->verb, .view = env->ud};
    if (ra->path) {
        a.path = ra->path;
    } else {
        a.group = ra->group ? ra->group : "";
        a.resource = ra->resource ? ra->resource : "";
        a.sub = ra->sub && *ra->sub ? ra->sub : NULL;
        a.ns = ra->ns && *ra->ns ? ra->ns : NULL;
        a.name = ra->name && *ra->name ? ra->name : NULL;
    }
    size_t n;
    const struct kite_authorizer *chain = kite_authorizers(&n);
    for (size_t i = 0; i < n; i++) {
        char *why = NULL;
        enum kite_authz_decision d = chain[i].authorize(&a, &why);
        if (d == KITE_AUTHZ_NO_OPINION) {
            free(why);
            continue;
        }
        ret->allowed = d == KITE_AUTHZ_ALLOW;
        ret->denied = d == KITE_AUTHZ_DENY;
        ret->reason = why;
        return;
    }
}

static void review_rules(const struct kite_review_env *env, const struct kite_review_user *ru, const char *ns,
                         json_object *status) {
    struct kite_user u;
    user_from(ru, &u);
    struct kite_authz_rules r = {.resource_rules = json_object_new_array(), .non_resource_rules = json_object_new_array()};
    struct kite_buf missing = {0};
    size_t n;
    const struct kite_authorizer *chain = kite_authorizers(&n);
    for (size_t i = 0; i < n; i++) {
        if (chain[i].rules) {
            chain[i].rules(env->ud, &u, ns, &r);
            continue;
        }
        r.incomplete = true;
        kite_buf_printf(&missing, "%s%s", missing.len ? ", " : "", chain[i].name);
    }
    kite_obj_set(status, "resourceRules", r.resource_rules);
    kite_obj_set(status, "nonResourceRules", r.non_resource_rules);
    kite_obj_set(status, "incomplete", json_object_new_boolean(r.incomplete));
    if (missing.len) { /* kube-apiserver's union says the same of a webhook */
        kite_buf_puts(&missing, ": these authorizers cannot list a user's rules");
        kite_obj_set(status, "evaluationError", json_object_new_string(missing.p));
    }
    kite_buf_release(&missing);
}

/* ---- the handler ------------------------------------------------------------------------- */

void kite_apiserver_handle_review(struct req *rq) {
    const struct kite_resource *r = rq->res;
    if (r->namespaced && !rq->ns) { /* created in a namespace only; no list across them */
        kite_apiserver_reply_error(rq, 404, "NotFound", "the server could not find the requested resource");
        return;
    }
    json_object *obj = kite_apiserver_parse_body(rq, false);
    if (!obj) return;
    char *err = NULL;
    if (kite_schema_check(r->schema, obj, &err) < 0) {
        kite_apiserver_reply_error(rq, 400, "BadRequest", "%s in version \"%s\" cannot be handled as a %s: %s", r->kind, r->version,
                    r->kind, err);
        free(err);
        json_object_put(obj);
        return;
    }
    /* the answer is the request decoded into the kind's type: unknown fields are dropped (or
     * refused, or warned of, as fieldValidation says), never echoed */
    if (!kite_apiserver_check_field_validation(rq, obj)) {
        json_object_put(obj);
        return;
    }
    const char *kind = kite_obj_str(obj, "kind"), *av = kite_obj_str(obj, "apiVersion");
    if (kind && *kind && strcmp(kind, r->kind) != 0) {
        kite_apiserver_reply_error(rq, 400, "BadRequest", "the kind in the body (%s) does not match the expected kind (%s)", kind, r->kind);
        json_object_put(obj);
        return;
    }
    if (av && *av && strcmp(av, r->api_version) != 0) {
        kite_apiserver_reply_error(rq, 400, "BadRequest", "the API version in the data (%s) does not match the expected API version (%s)",
                    av, r->api_version);
        json_object_put(obj);
        return;
    }
    json_object *meta = kite_obj_get(obj, "metadata");
    if (!meta || !json_object_is_type(meta, json_type_object)) kite_obj_set(obj, "metadata", meta = json_object_new_object());
    if (r->namespaced) { /* as every create: the object's namespace is the request's */
        const char *ns = kite_obj_str(meta, "namespace");
        if (ns && *ns && strcmp(ns, rq->ns) != 0) {
            kite_apiserver_reply_error(rq, 400, "BadRequest", "the namespace of the provided object does not match the namespace sent on the request");
            json_object_put(obj);
            return;
        }
        kite_obj_set(meta, "namespace", json_object_new_string(rq->ns));
    }
    const struct kite_user *u = &rq->user;
    struct kite_review_user requester = {.name = u->name, .uid = u->uid, .groups = u->groups, .n_groups = u->n_groups,
                                         .extra = u->extra, .n_extra = u->n_extra};
    struct kite_review_env env = {.requester = &requester, .ns = rq->ns, .now_ns = kite_now_wall(rq->srv->clock),
                                  .authorize = review_authorize, .rules = review_rules, .ud = rq->srv};
    struct kite_causes causes = {0};
    char *msg = NULL;
    int code = r->evaluate(obj, &env, &causes, &msg);
    if (code == 0) {
        kite_obj_set(obj, "kind", json_object_new_string(r->kind));
        kite_obj_set(obj, "apiVersion", json_object_new_string(r->api_version));
        struct kite_buf b = {0};
        kite_buf_puts(&b, json_object_to_json_string_ext(obj, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
        kite_apiserver_reply_json_buf(rq, 201, &b);
    } else if (code == 422) {
        kite_apiserver_reply_invalid(rq, "", &causes);
    } else {
        kite_apiserver_reply_error(rq, code, NULL, "%s", msg ? msg : "");
    }
    kite_causes_release(&causes);
    free(msg);
    json_object_put(obj);
}
