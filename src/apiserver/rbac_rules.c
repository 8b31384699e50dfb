/* Policy rules: compiling them from JSON, matching a request (RuleAllows) and covering other
 * rules (Covers), as k8s.io/kubernetes/pkg/apis/rbac/v1/evaluation_helpers.go and
 * pkg/registry/rbac/validation/policy_comparator.go. Pure functions, table-tested in
 * tests/unit/apiserver/test_rbac.c. */
#include "apiserver/rbac.h"

static void strs_of(json_object *a, struct rbac_strs *out) {
    size_t n = a && json_object_is_type(a, json_type_array) ? json_object_array_length(a) : 0;
    out->v = n ? kite_calloc(n, sizeof *out->v) : NULL;
    out->n = 0;
    for (size_t i = 0; i < n; i++) {
        json_object *s = json_object_array_get_idx(a, i);
        if (json_object_is_type(s, json_type_string)) out->v[out->n++] = kite_strdup(json_object_get_string(s));
    }
}

static void strs_release(struct rbac_strs *s) {
    for (size_t i = 0; i < s->n; i++) free(s->v[i]);
    free(s->v);
}

void kite_apiserver_rbac_rules_append(struct rbac_rules *out, json_object *rules) {
    size_t n = rules && json_object_is_type(rules, json_type_array) ? json_object_array_length(rules) : 0;
    if (!n) return;
    out->v = kite_realloc(out->v, (out->n + n) * sizeof *out->v);
    for (size_t i = 0; i < n; i++) {
        json_object *r = json_object_array_get_idx(rules, i);
        struct rbac_rule *d = &out->v[out->n++];
        strs_of(kite_obj_get(r, "verbs"), &d->verbs);
        strs_of(kite_obj_get(r, "apiGroups"), &d->groups);
        strs_of(kite_obj_get(r, "resources"), &d->resources);
        strs_of(kite_obj_get(r, "resourceNames"), &d->names);
        strs_of(kite_obj_get(r, "nonResourceURLs"), &d->urls);
    }
}

static void strs_copy(const struct rbac_strs *in, struct rbac_strs *out) {
    out->n = in->n;
    out->v = in->n ? kite_calloc(in->n, sizeof *out->v) : NULL;
    for (size_t i = 0; i < in->n; i++) out->v[i] = kite_strdup(in->v[i]);
}

void kite_apiserver_rbac_rules_extend(struct rbac_rules *out, const struct rbac_rules *in) {
    if (!in->n) return;
    out->v = kite_realloc(out->v, (out->n + in->n) * sizeof *out->v);
    for (size_t i = 0; i < in->n; i++) {
        const struct rbac_rule *s = &in->v[i];
        struct rbac_rule *d = &out->v[out->n++];
        strs_copy(&s->verbs, &d->verbs);
        strs_copy(&s->groups, &d->groups);
        strs_copy(&s->resources, &d->resources);
        strs_copy(&s->names, &d->names);
        strs_copy(&s->urls, &d->urls);
    }
}

void kite_apiserver_rbac_rules_release(struct rbac_rules *r) {
    for (size_t i = 0; i < r->n; i++) {
        struct rbac_rule *x = &r->v[i];
        strs_release(&x->verbs);
        strs_release(&x->groups);
        strs_release(&x->resources);
        strs_release(&x->names);
        strs_release(&x->urls);
    }
    free(r->v);
    *r = (struct rbac_rules){0};
}

static bool has(const struct rbac_strs *s, const char *x) {
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->v[i], x) == 0) return true;
    return false;
}

/* exact, or "*", as VerbMatches and APIGroupMatches */
static bool matches(const struct rbac_strs *s, const char *x) { return has(s, "*") || has(s, x); }

/* ResourceMatches: "*", the combined "res/sub", or "*\/sub" for any resource's subresource. */
static bool resource_matches(const struct rbac_strs *s, const char *resource, const char *sub) {
    for (size_t i = 0; i < s->n; i++) {
        const char *r = s->v[i];
        if (strcmp(r, "*") == 0) return true;
        size_t rl = strlen(resource);
        if (sub && *sub) {
            if (strncmp(r, resource, rl) == 0 && r[rl] == '/' && strcmp(r + rl + 1, sub) == 0) return true;
            if (r[0] == '*' && r[1] == '/' && strcmp(r + 2, sub) == 0) return true;
        } else if (strcmp(r, resource) == 0) {
            return true;
        }
    }
    return false;
}

/* NonResourceURLMatches: "*", exact, or a prefix when the rule's URL ends in "*". */
static bool url_matches(const char *rule, const char *path) {
    if (strcmp(rule, "*") == 0 || strcmp(rule, path) == 0) return true;
    size_t n = strlen(rule);
    return n && rule[n - 1] == '*' && strncmp(path, rule, n - 1) == 0;
}

bool kite_apiserver_rbac_rule_allows(const struct rbac_rule *r, const struct kite_authz_attrs *a) {
    const char *verb = a->verb ? a->verb : "";
    if (!matches(&r->verbs, verb)) return false;
    if (a->resource) {
        if (!matches(&r->groups, a->group ? a->group : "")) return false;
        if (!resource_matches(&r->resources, a->resource, a->sub)) return false;
        return r->names.n == 0 || (a->name && has(&r->names, a->name));
    }
    if (!a->path) return false;
    for (size_t i = 0; i < r->urls.n; i++)
        if (url_matches(r->urls.v[i], a->path)) return true;
    return false;
}

/* ---- Covers ------------------------------------------------------------------------------- */

/* One piece of a broken-down rule: one verb and either group x resource x name (name NULL:
 * all names) or one URL. */
struct piece {
    const char *verb, *group, *resource, *name, *url;
};

/* ruleCovers for one piece: the owner's lists hold "*" or the piece's value (a "*" piece is
 * covered only by a "*" owner: nobody grants more than they have). */
static bool rule_covers(const struct rbac_rule *o, const struct piece *p) {
    if (!matches(&o->verbs, p->verb)) return false;
    if (p->url) {
        for (size_t i = 0; i < o->urls.n; i++)
            if (strcmp(o->urls.v[i], p->url) == 0 || url_matches(o->urls.v[i], p->url)) return true;
        return false;
    }
    if (!matches(&o->groups, p->group)) return false;
    bool res = has(&o->resources, "*") || has(&o->resources, p->resource);
    const char *slash = strchr(p->resource, '/');
    if (!res && slash) {
        _cleanup_free_ char *any = kite_asprintf("*%s", slash);
        res = has(&o->resources, any);
    }
    if (!res) return false;
    if (o->names.n == 0) return true;
    return p->name && has(&o->names, p->name);
}

static bool covered(const struct rbac_rules *owner, const struct piece *p) {
    for (size_t i = 0; i < owner->n; i++)
        if (rule_covers(&owner->v[i], p)) return true;
    return false;
}

static void quoted_list(struct kite_buf *b, const char *field, const char *v) {
    kite_buf_printf(b, "%s:[\"%s\"]", field, v);
}

/* What Kubernetes prints of an uncovered piece (rbacv1helpers.CompactString). */
static void piece_text(struct kite_buf *b, const struct piece *p) {
    kite_buf_puts(b, "{");
    if (p->url) {
        quoted_list(b, "NonResourceURLs", p->url);
    } else {
        quoted_list(b, "APIGroups", p->group);
        kite_buf_puts(b, ", ");
        quoted_list(b, "Resources", p->resource);
        if (p->name) {
            kite_buf_puts(b, ", ");
            quoted_list(b, "ResourceNames", p->name);
        }
    }
    kite_buf_puts(b, ", ");
    quoted_list(b, "Verbs", p->verb);
    kite_buf_puts(b, "}");
}

bool kite_apiserver_rbac_rules_cover(const struct rbac_rules *owner, const struct rbac_rules *wanted, struct kite_buf *missing) {
    bool all = true;
    for (size_t i = 0; i < wanted->n; i++) {
        const struct rbac_rule *w = &wanted->v[i];
        for (size_t v = 0; v < w->verbs.n; v++) {
            for (size_t g = 0; g < w->groups.n; g++)
                for (size_t r = 0; r < w->resources.n; r++)
                    for (size_t k = 0; k < (w->names.n ? w->names.n : 1); k++) {
                        struct piece p = {.verb = w->verbs.v[v], .group = w->groups.v[g], .resource = w->resources.v[r],
                                          .name = w->names.n ? w->names.v[k] : NULL};
                        if (covered(owner, &p)) continue;
                        all = false;
                        if (missing) piece_text(missing, &p), kite_buf_puts(missing, "\n");
                    }
            for (size_t u = 0; u < w->urls.n; u++) {
                struct piece p = {.verb = w->verbs.v[v], .url = w->urls.v[u]};
                if (covered(owner, &p)) continue;
                all = false;
                if (missing) piece_text(missing, &p), kite_buf_puts(missing, "\n");
            }
        }
    }
    return all;
}

bool kite_apiserver_rbac_subject_matches(const char *kind, const char *name, const char *sa_ns, const char *binding_ns,
                          const struct kite_user *u) {
    if (strcmp(kind, "User") == 0) return strcmp(name, u->name) == 0;
    if (strcmp(kind, "Group") == 0) {
        for (size_t i = 0; i < u->n_groups; i++)
            if (strcmp(u->groups[i], name) == 0) return true;
        return false;
    }
    if (strcmp(kind, "ServiceAccount") != 0) return false;
    const char *ns = sa_ns && *sa_ns ? sa_ns : binding_ns;
    if (!ns || !*ns) return false;
    static const char prefix[] = "system:serviceaccount:";
    const char *p = u->name;
    if (strncmp(p, prefix, sizeof prefix - 1) != 0) return false;
    p += sizeof prefix - 1;
    size_t nl = strlen(ns);
    return strncmp(p, ns, nl) == 0 && p[nl] == ':' && strcmp(p + nl + 1, name) == 0;
}
