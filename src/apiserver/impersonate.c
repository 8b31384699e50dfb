/* Impersonation (k8s.io/apiserver's WithImpersonation): Impersonate-User, repeated
 * Impersonate-Group, Impersonate-Uid and Impersonate-Extra-<key>. Each part is authorized for
 * the authenticated user with verb impersonate: users, groups and serviceaccounts (a user
 * named system:serviceaccount:NS:NAME) in the core group, uids and userextras/<key> in
 * authentication.k8s.io. Then the request runs as the impersonated identity, authorized as
 * itself. Groups, extras or a uid without a user are refused 400, as kube-apiserver 1.32. */
#include "apiserver/internal.h"

#include <ctype.h>

#define SA_PREFIX "system:serviceaccount:"
#define EXTRA_PREFIX "Impersonate-Extra-"

static bool in_groups(const struct kite_user *u, const char *g) {
    for (size_t i = 0; i < u->n_groups; i++)
        if (strcmp(u->groups[i], g) == 0) return true;
    return false;
}

static void add_group(struct kite_user *u, const char *g) {
    if (u->n_groups < KITE_ARRAY_SIZE(u->groups) && !in_groups(u, g)) u->groups[u->n_groups++] = g;
}

/* Kubernetes' forbidden answer for one impersonated part. */
static bool allowed(struct req *rq, const struct kite_authz_attrs *a) {
    _cleanup_free_ char *why = NULL;
    if (kite_authorize(a, &why) == KITE_AUTHZ_ALLOW) return true;
    struct kite_buf m = {0};
    kite_buf_printf(&m, "%s%s%s \"%s\" is forbidden: User \"%s\" cannot impersonate resource \"%s%s%s\" in API group \"%s\" ",
                    a->resource, *a->group ? "." : "", a->group, a->name, a->user->name, a->resource, a->sub ? "/" : "",
                    a->sub ? a->sub : "", a->group);
    if (a->ns) kite_buf_printf(&m, "in the namespace \"%s\"", a->ns);
    else kite_buf_puts(&m, "at the cluster scope");
    if (why && *why) kite_buf_printf(&m, ": %s", why);
    struct status_details d = {.name = a->name, .group = *a->group ? a->group : NULL, .kind = a->resource};
    kite_apiserver_reply_error_about(rq, 403, "Forbidden", &d, "%s", m.p);
    kite_buf_release(&m);
    return false;
}

/* Header names arrive in any case; Kubernetes keys extras by the lower-cased, percent-decoded
 * rest of the name. Appends the key to mem (NUL-terminated) and returns its offset. */
static size_t extra_key(struct kite_buf *mem, const char *name) {
    size_t off = mem->len;
    for (const char *p = name + strlen(EXTRA_PREFIX); *p; p++) {
        if (p[0] == '%' && isxdigit((unsigned char)p[1]) && isxdigit((unsigned char)p[2])) {
            char hex[3] = {p[1], p[2], 0};
            kite_buf_putc(mem, (char)tolower((int)strtol(hex, NULL, 16)));
            p += 2;
        } else {
            kite_buf_putc(mem, (char)tolower((unsigned char)*p));
        }
    }
    kite_buf_putc(mem, 0);
    return off;
}

bool kite_apiserver_impersonate(struct req *rq) {
    struct kite_http_req *h = rq->http;
    /* the common case, no impersonation, costs one pass over the headers */
    if (!kite_http_header_prefixed(h, "Impersonate-", NULL, NULL, 0)) return true;
    const char *as = kite_http_header(h, "Impersonate-User"), *uid = kite_http_header(h, "Impersonate-Uid");
    const char *groups[KITE_IMPERSONATE_GROUPS_MAX], *xnames[KITE_IMPERSONATE_EXTRA_MAX], *xvalues[KITE_IMPERSONATE_EXTRA_MAX];
    size_t ng = kite_http_header_all(h, "Impersonate-Group", groups, KITE_ARRAY_SIZE(groups));
    size_t nx = kite_http_header_prefixed(h, EXTRA_PREFIX, xnames, xvalues, KITE_ARRAY_SIZE(xnames));
    if (as && !*as) as = NULL;
    if (uid && !*uid) uid = NULL;
    if (!as && !ng && !nx && !uid) return true;
    if (!as) {
        kite_apiserver_reply_error(rq, 400, "BadRequest", "requested %s%s%s without impersonating a user", ng ? "groups " : "",
                    nx ? "extra " : "", uid ? "uid " : "");
        return false;
    }
    if (ng > KITE_ARRAY_SIZE(groups) || nx > KITE_ARRAY_SIZE(xnames)) {
        kite_apiserver_reply_error(rq, 400, "BadRequest", "too many impersonation headers: at most %d Impersonate-Group and %d Impersonate-Extra-*",
                    KITE_IMPERSONATE_GROUPS_MAX, KITE_IMPERSONATE_EXTRA_MAX);
        return false;
    }
    const struct kite_user *me = &rq->user;
    struct kite_user to = {.name = as, .uid = uid};
    struct kite_authz_attrs a = {.user = me, .verb = "impersonate", .group = "", .view = rq->srv};

    /* the user: a service account's name is authorized as that ServiceAccount object */
    _cleanup_free_ char *sa_ns = NULL;
    const char *sa_name = NULL;
    if (kite_startswith(as, SA_PREFIX)) {
        const char *rest = as + strlen(SA_PREFIX), *colon = strchr(rest, ':');
        if (colon && colon != rest && colon[1] && !strchr(colon + 1, ':')) {
            sa_ns = kite_strndup(rest, (size_t)(colon - rest));
            sa_name = colon + 1;
        }
    }
    a.resource = sa_ns ? "serviceaccounts" : "users";
    a.ns = sa_ns;
    a.name = sa_ns ? sa_name : as;
    if (!allowed(rq, &a)) return false;
    a.ns = NULL;

    a.resource = "groups";
    for (size_t i = 0; i < ng; i++) {
        a.name = groups[i];
        if (!allowed(rq, &a)) return false;
        add_group(&to, groups[i]);
    }
    a.group = "authentication.k8s.io";
    if (uid) {
        a.resource = "uids";
        a.name = uid;
        if (!allowed(rq, &a)) return false;
    }
    struct kite_buf mem = {0};
    size_t offs[KITE_IMPERSONATE_EXTRA_MAX];
    for (size_t i = 0; i < nx; i++) offs[i] = extra_key(&mem, xnames[i]);
    a.resource = "userextras";
    for (size_t i = 0; i < nx; i++) {
        a.sub = mem.p + offs[i];
        a.name = xvalues[i];
        if (!allowed(rq, &a)) {
            kite_buf_release(&mem);
            return false;
        }
    }
    /* a service account without groups given has its fixed ones */
    size_t sa_group = 0;
    if (sa_ns && !ng) {
        sa_group = mem.len;
        kite_buf_printf(&mem, "system:serviceaccounts:%s", sa_ns);
        kite_buf_putc(&mem, 0);
    }
    rq->impersonation_mem = kite_buf_detach(&mem, NULL);
    for (size_t i = 0; i < nx; i++) {
        to.extra[2 * i] = rq->impersonation_mem + offs[i];
        to.extra[2 * i + 1] = xvalues[i];
    }
    to.n_extra = nx;
    if (sa_ns && !ng) {
        add_group(&to, "system:serviceaccounts");
        add_group(&to, rq->impersonation_mem + sa_group);
    }
    /* everyone but anonymous is authenticated, unless the groups given say otherwise */
    if (strcmp(as, "system:anonymous") != 0 && !in_groups(&to, "system:unauthenticated"))
        add_group(&to, "system:authenticated");
    rq->impersonator = rq->user;
    rq->user = to;
    return true;
}
