/* Access reviews, impersonation and the audit log, through HTTPS against a server in the test
 * process (harness.h), and the audit writer alone. */
#include "harness.h"
#include "apiserver/internal.h"
#include "base/buf.h"
#include "json/parse.h"
#include "pki/pki.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

TestSuite(access, .init = api_start, .fini = api_stop, .timeout = 120);

#define AZ "/apis/authorization.k8s.io/v1/"
#define SSR "/apis/authentication.k8s.io/v1/selfsubjectreviews"

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
}

/* Later requests present a client certificate for cn (in organizations orgs). */
static void become(const char *cn, const char *const *orgs, size_t n_orgs) {
    _cleanup_free_ char *pki = kite_asprintf("%s/data/pki", api.dir);
    char *cert = NULL, *key = NULL;
    cr_assert_eq(kite_pki_issue_client(pki, cn, orgs, n_orgs, &cert, &key), 0);
    free(api.cert);
    free(api.key);
    api.cert = kite_asprintf("%s/%s.crt", api.dir, cn);
    api.key = kite_asprintf("%s/%s.key", api.dir, cn);
    write_file(api.cert, cert);
    write_file(api.key, key);
    free(cert);
    free(key);
}

static bool has_cause(json_object *st, const char *field, const char *needle) {
    json_object *causes = jget(st, "details.causes");
    for (size_t i = 0; causes && i < json_object_array_length(causes); i++) {
        json_object *c = json_object_array_get_idx(causes, i);
        if (strcmp(jstr(c, "field"), field) == 0 && strstr(jstr(c, "message"), needle)) return true;
    }
    return false;
}

static bool jbool(json_object *o, const char *path) {
    json_object *v = jget(o, path);
    return v && json_object_get_boolean(v);
}

/* ---- access reviews ---------------------------------------------------------------------- */

Test(access, self_subject_access_review_json) {
    json_object *o = NULL;
    cr_assert_eq(api_reqf("POST", AZ "selfsubjectaccessreviews", &o,
                          "{\"apiVersion\":\"authorization.k8s.io/v1\",\"kind\":\"SelfSubjectAccessReview\","
                          "\"spec\":{\"resourceAttributes\":{\"verb\":\"create\",\"resource\":\"pods\",\"namespace\":\"default\"}}}"),
                 201);
    cr_assert_str_eq(jstr(o, "kind"), "SelfSubjectAccessReview");
    cr_assert_str_eq(jstr(o, "apiVersion"), "authorization.k8s.io/v1");
    cr_assert(jbool(o, "status.allowed"));
    cr_assert_str_eq(jstr(o, "spec.resourceAttributes.resource"), "pods", "the request comes back");
    json_object_put(o);
    /* nothing was stored: the kind serves create alone */
    cr_assert_eq(api_req("GET", AZ "selfsubjectaccessreviews", NULL, NULL, &o), 405);
    cr_assert_str_eq(jstr(o, "reason"), "MethodNotAllowed");
    json_object_put(o);
    cr_assert_eq(api_req("DELETE", AZ "selfsubjectaccessreviews", NULL, NULL, NULL), 405);
    /* a non-resource question */
    cr_assert_eq(api_reqf("POST", AZ "selfsubjectaccessreviews", &o,
                          "{\"spec\":{\"nonResourceAttributes\":{\"verb\":\"get\",\"path\":\"/metrics\"}}}"),
                 201);
    cr_assert(jbool(o, "status.allowed"));
    json_object_put(o);
}

Test(access, self_subject_access_review_validation) {
    json_object *o = NULL;
    cr_assert_eq(api_reqf("POST", AZ "selfsubjectaccessreviews", &o, "{\"spec\":{}}"), 422);
    cr_assert_str_eq(jstr(o, "reason"), "Invalid");
    cr_assert(has_cause(o, "spec.resourceAttributes", "exactly one of nonResourceAttributes or resourceAttributes"));
    json_object_put(o);
    cr_assert_eq(api_reqf("POST", AZ "selfsubjectaccessreviews", &o,
                          "{\"spec\":{\"resourceAttributes\":{\"verb\":\"get\"},\"nonResourceAttributes\":{\"path\":\"/\"}}}"),
                 422);
    cr_assert(has_cause(o, "spec.nonResourceAttributes", "cannot be specified in combination with resourceAttributes"));
    json_object_put(o);
    cr_assert_eq(api_reqf("POST", AZ "selfsubjectaccessreviews", &o,
                          "{\"metadata\":{\"name\":\"x\"},\"spec\":{\"resourceAttributes\":{\"verb\":\"get\"}}}"),
                 422);
    cr_assert(has_cause(o, "metadata", "must be empty"));
    json_object_put(o);
    /* the decoder's type errors come first, as kube-apiserver's */
    cr_assert_eq(api_reqf("POST", AZ "selfsubjectaccessreviews", &o, "{\"spec\":{\"resourceAttributes\":{\"verb\":5}}}"), 400);
    cr_assert(strstr(jstr(o, "message"), "cannot be handled as a SelfSubjectAccessReview"));
    json_object_put(o);
    cr_assert_eq(api_reqf("POST", AZ "selfsubjectaccessreviews", &o, "{\"kind\":\"SubjectAccessReview\",\"spec\":{}}"), 400);
    json_object_put(o);
}

/* The body kubectl auth can-i update nodes --subresource=status sends (research: kubectl-wire.md §6.3). */
Test(access, self_subject_access_review_protobuf_from_kubectl) {
    static const unsigned char pb[] = {
        0x6b, 0x38, 0x73, 0x00, 0x0a, 0x32, 0x0a, 0x17, 'a', 'u', 't', 'h', 'o', 'r', 'i', 'z', 'a', 't', 'i', 'o', 'n',
        '.', 'k', '8', 's', '.', 'i', 'o', '/', 'v', '1', 0x12, 0x17, 'S', 'e', 'l', 'f', 'S', 'u', 'b', 'j', 'e', 'c',
        't', 'A', 'c', 'c', 'e', 's', 's', 'R', 'e', 'v', 'i', 'e', 'w', 0x12, 0x46,
        0x0a, 0x10, 0x0a, 0x00, 0x12, 0x00, 0x1a, 0x00, 0x22, 0x00, 0x2a, 0x00, 0x32, 0x00, 0x38, 0x00, 0x42, 0x00,
        0x12, 0x28, 0x0a, 0x26, 0x0a, 0x07, 'd', 'e', 'f', 'a', 'u', 'l', 't', 0x12, 0x06, 'u', 'p', 'd', 'a', 't', 'e',
        0x1a, 0x00, 0x22, 0x00, 0x2a, 0x05, 'n', 'o', 'd', 'e', 's', 0x32, 0x06, 's', 't', 'a', 't', 'u', 's', 0x3a, 0x00,
        0x1a, 0x08, 0x08, 0x00, 0x12, 0x00, 0x1a, 0x00, 0x20, 0x00, 0x1a, 0x00, 0x22, 0x00};
    cr_assert_eq(sizeof pb, 132);
    json_object *o = NULL;
    cr_assert_eq(api_req_len("POST", AZ "selfsubjectaccessreviews", "application/vnd.kubernetes.protobuf", (const char *)pb,
                             sizeof pb, &o),
                 201);
    cr_assert(jbool(o, "status.allowed"));
    cr_assert_str_eq(jstr(o, "spec.resourceAttributes.subresource"), "status");
    json_object_put(o);
    /* a node is asked as itself through impersonation */
    become("kite-admin-2", (const char *[]){"system:masters"}, 1);
    const char *const as_node[] = {"Impersonate-User: system:node:a", "Impersonate-Group: system:nodes", NULL};
    api_headers = as_node;
    cr_assert_eq(api_req_len("POST", AZ "selfsubjectaccessreviews", "application/vnd.kubernetes.protobuf", (const char *)pb,
                             sizeof pb, &o),
                 201);
    cr_assert(jbool(o, "status.allowed"), "the interim chain lets nodes do anything but impersonate");
    json_object_put(o);
}

Test(access, subject_access_review) {
    json_object *o = NULL;
    /* no authorizer has an opinion about bob: neither allowed nor denied */
    cr_assert_eq(api_reqf("POST", AZ "subjectaccessreviews", &o,
                          "{\"spec\":{\"user\":\"bob\",\"resourceAttributes\":{\"verb\":\"get\",\"resource\":\"pods\"}}}"),
                 201);
    cr_assert(!jbool(o, "status.allowed"));
    cr_assert_null(jget(o, "status.denied"));
    cr_assert_not_null(jget(o, "status.allowed"), "allowed is written even when false");
    json_object_put(o);
    cr_assert_eq(api_reqf("POST", AZ "subjectaccessreviews", &o,
                          "{\"spec\":{\"user\":\"bob\",\"groups\":[\"system:masters\"],\"extra\":{\"k\":[\"v\"]},"
                          "\"resourceAttributes\":{\"verb\":\"delete\",\"resource\":\"nodes\",\"name\":\"n1\"}}}"),
                 201);
    cr_assert(jbool(o, "status.allowed"));
    json_object_put(o);
    /* impersonate is never a node's */
    cr_assert_eq(api_reqf("POST", AZ "subjectaccessreviews", &o,
                          "{\"spec\":{\"user\":\"system:node:a\",\"groups\":[\"system:nodes\"],"
                          "\"resourceAttributes\":{\"verb\":\"impersonate\",\"resource\":\"users\"}}}"),
                 201);
    cr_assert(!jbool(o, "status.allowed"));
    json_object_put(o);
    cr_assert_eq(api_reqf("POST", AZ "subjectaccessreviews", &o, "{\"spec\":{\"resourceAttributes\":{\"verb\":\"get\"}}}"), 422);
    cr_assert(has_cause(o, "spec.user", "at least one of user or group must be specified"));
    json_object_put(o);
    cr_assert_eq(api_reqf("POST", AZ "subjectaccessreviews", &o,
                          "{\"spec\":{\"user\":\"u\",\"extra\":{\"k\":\"v\"},\"resourceAttributes\":{}}}"),
                 422);
    json_object_put(o);
    /* a subject the server could not hold is refused, not cut short (a group past the 32nd is data) */
    struct kite_buf b = {0};
    kite_buf_puts(&b, "{\"spec\":{\"user\":\"u\",\"resourceAttributes\":{},\"groups\":[");
    for (int i = 0; i < 33; i++) kite_buf_printf(&b, "%s\"g%d\"", i ? "," : "", i);
    kite_buf_puts(&b, "]}}");
    cr_assert_eq(api_req("POST", AZ "subjectaccessreviews", NULL, b.p, &o), 422);
    cr_assert(has_cause(o, "spec.groups", "must have at most 32 items"));
    json_object_put(o);
    kite_buf_release(&b);
    /* creating one needs create on subjectaccessreviews, which bob has not */
    become("bob", NULL, 0);
    cr_assert_eq(api_reqf("POST", AZ "subjectaccessreviews", &o,
                          "{\"spec\":{\"user\":\"bob\",\"resourceAttributes\":{\"verb\":\"get\"}}}"),
                 403);
    cr_assert_str_eq(jstr(o, "message"), "subjectaccessreviews.authorization.k8s.io is forbidden: User \"bob\" cannot "
                                         "create resource \"subjectaccessreviews\" in API group \"authorization.k8s.io\" at "
                                         "the cluster scope");
    json_object_put(o);
    /* but may ask about itself (system:basic-user) */
    cr_assert_eq(api_reqf("POST", AZ "selfsubjectaccessreviews", &o,
                          "{\"spec\":{\"resourceAttributes\":{\"verb\":\"get\",\"resource\":\"pods\"}}}"),
                 201);
    cr_assert(!jbool(o, "status.allowed"));
    json_object_put(o);
}

Test(access, local_subject_access_review) {
    json_object *o = NULL;
    cr_assert_eq(api_reqf("POST", "/apis/authorization.k8s.io/v1/namespaces/default/localsubjectaccessreviews", &o,
                          "{\"spec\":{\"groups\":[\"system:masters\"],\"resourceAttributes\":{\"namespace\":\"default\","
                          "\"verb\":\"get\",\"resource\":\"pods\"}}}"),
                 201);
    cr_assert(jbool(o, "status.allowed"));
    cr_assert_str_eq(jstr(o, "metadata.namespace"), "default");
    json_object_put(o);
    cr_assert_eq(api_reqf("POST", "/apis/authorization.k8s.io/v1/namespaces/default/localsubjectaccessreviews", &o,
                          "{\"spec\":{\"user\":\"u\",\"resourceAttributes\":{\"namespace\":\"other\",\"verb\":\"get\"}}}"),
                 422);
    cr_assert(has_cause(o, "spec.resourceAttributes.namespace", "must match metadata.namespace"));
    json_object_put(o);
    cr_assert_eq(api_reqf("POST", "/apis/authorization.k8s.io/v1/namespaces/default/localsubjectaccessreviews", &o,
                          "{\"spec\":{\"user\":\"u\",\"nonResourceAttributes\":{\"path\":\"/\"}}}"),
                 422);
    cr_assert(has_cause(o, "spec.nonResourceAttributes", "disallowed on this kind of request"));
    json_object_put(o);
    cr_assert_eq(api_reqf("POST", "/apis/authorization.k8s.io/v1/namespaces/default/localsubjectaccessreviews", &o,
                          "{\"metadata\":{\"namespace\":\"other\"},\"spec\":{\"user\":\"u\",\"resourceAttributes\":{}}}"),
                 400);
    json_object_put(o);
    /* namespaced: the cluster-wide path does not exist */
    cr_assert_eq(api_reqf("POST", AZ "localsubjectaccessreviews", &o, "{}"), 404);
    json_object_put(o);
}

static bool has_rule(json_object *rules, const char *list, const char *value) {
    for (size_t i = 0; rules && i < json_object_array_length(rules); i++) {
        json_object *l = jget(json_object_array_get_idx(rules, i), list);
        for (size_t j = 0; l && j < json_object_array_length(l); j++)
            if (strcmp(json_object_get_string(json_object_array_get_idx(l, j)), value) == 0) return true;
    }
    return false;
}

Test(access, self_subject_rules_review) {
    json_object *o = NULL;
    cr_assert_eq(api_reqf("POST", AZ "selfsubjectrulesreviews", &o, "{\"spec\":{\"namespace\":\"default\"}}"), 201);
    cr_assert(has_rule(jget(o, "status.resourceRules"), "resources", "*"), "an admin may do anything");
    cr_assert(has_rule(jget(o, "status.nonResourceRules"), "nonResourceURLs", "*"));
    cr_assert_not_null(jget(o, "status.incomplete"));
    cr_assert(!jbool(o, "status.incomplete"), "every authorizer lists its rules");
    json_object_put(o);
    cr_assert_eq(api_reqf("POST", AZ "selfsubjectrulesreviews", &o, "{\"spec\":{}}"), 400);
    cr_assert_str_eq(jstr(o, "message"), "no namespace on request");
    json_object_put(o);
    become("bob", NULL, 0);
    cr_assert_eq(api_reqf("POST", AZ "selfsubjectrulesreviews", &o, "{\"spec\":{\"namespace\":\"default\"}}"), 201);
    cr_assert(!has_rule(jget(o, "status.resourceRules"), "resources", "*"));
    cr_assert(has_rule(jget(o, "status.resourceRules"), "resources", "selfsubjectaccessreviews"));
    cr_assert(has_rule(jget(o, "status.nonResourceRules"), "nonResourceURLs", "/version"));
    json_object_put(o);
}

Test(access, self_subject_review) {
    json_object *o = NULL;
    cr_assert_eq(api_reqf("POST", SSR, &o, "{\"apiVersion\":\"authentication.k8s.io/v1\",\"kind\":\"SelfSubjectReview\"}"), 201);
    cr_assert_str_eq(jstr(o, "status.userInfo.username"), "kite-admin");
    cr_assert_str_eq(jstr(o, "status.userInfo.groups.0"), "system:masters");
    cr_assert_str_eq(jstr(o, "status.userInfo.groups.1"), "system:authenticated");
    cr_assert_str_eq(jstr(o, "metadata.creationTimestamp"), API_T0);
    json_object_put(o);
}

/* ---- impersonation ----------------------------------------------------------------------- */

Test(access, impersonation_becomes_the_identity) {
    json_object *o = NULL;
    const char *const h[] = {"Impersonate-User: jane", "Impersonate-Group: dev", "Impersonate-Group: ops",
                             "Impersonate-Uid: 1234", "Impersonate-Extra-Scopes: view", "Impersonate-Extra-scopes: edit",
                             "Impersonate-Extra-Acme.com%2Fproject: x", NULL};
    api_headers = h;
    cr_assert_eq(api_reqf("POST", SSR, &o, "{}"), 201);
    cr_assert_str_eq(jstr(o, "status.userInfo.username"), "jane");
    cr_assert_str_eq(jstr(o, "status.userInfo.uid"), "1234");
    cr_assert_str_eq(jstr(o, "status.userInfo.groups.0"), "dev");
    cr_assert_str_eq(jstr(o, "status.userInfo.groups.1"), "ops");
    cr_assert_str_eq(jstr(o, "status.userInfo.groups.2"), "system:authenticated");
    cr_assert_null(jget(o, "status.userInfo.groups.3"));
    cr_assert_str_eq(jstr(o, "status.userInfo.extra.scopes.0"), "view");
    cr_assert_str_eq(jstr(o, "status.userInfo.extra.scopes.1"), "edit");
    json_object *project = json_object_object_get(jget(o, "status.userInfo.extra"), "acme.com/project");
    cr_assert_str_eq(json_object_get_string(json_object_array_get_idx(project, 0)), "x", "lower-cased, percent-decoded");
    json_object_put(o);
    /* and is authorized as itself: jane may not list pods */
    cr_assert_eq(api_req("GET", "/api/v1/pods", NULL, NULL, &o), 403);
    cr_assert(strstr(jstr(o, "message"), "User \"jane\" cannot list"));
    json_object_put(o);
    /* a service account gets its groups */
    const char *const sa[] = {"Impersonate-User: system:serviceaccount:team-a:builder", NULL};
    api_headers = sa;
    cr_assert_eq(api_reqf("POST", SSR, &o, "{}"), 201);
    cr_assert_str_eq(jstr(o, "status.userInfo.groups.0"), "system:serviceaccounts");
    cr_assert_str_eq(jstr(o, "status.userInfo.groups.1"), "system:serviceaccounts:team-a");
    cr_assert_str_eq(jstr(o, "status.userInfo.groups.2"), "system:authenticated");
    json_object_put(o);
    /* a node identity sees a node's rights: its own Node, not the list of all */
    const char *const node[] = {"Impersonate-User: system:node:a", "Impersonate-Group: system:nodes", NULL};
    api_headers = node;
    cr_assert_eq(api_req("GET", "/api/v1/nodes/a", NULL, NULL, &o), 404);
    json_object_put(o);
    cr_assert_eq(api_req("GET", "/api/v1/nodes", NULL, NULL, &o), 403);
    json_object_put(o);
}

Test(access, impersonation_refusals) {
    json_object *o = NULL;
    const char *const groups_only[] = {"Impersonate-Group: system:masters", NULL};
    api_headers = groups_only;
    cr_assert_eq(api_req("GET", "/api/v1/pods", NULL, NULL, &o), 400);
    cr_assert(strstr(jstr(o, "message"), "without impersonating a user"));
    json_object_put(o);
    const char *const uid_only[] = {"Impersonate-Uid: 1", NULL};
    api_headers = uid_only;
    cr_assert_eq(api_req("GET", "/api/v1/pods", NULL, NULL, &o), 400);
    json_object_put(o);
    /* a node may not impersonate, whatever part it asks for */
    become("system:node:a", (const char *[]){"system:nodes"}, 1);
    const struct {
        const char *const h[3];
        const char *message;
    } cases[] = {
        {{"Impersonate-User: bob", NULL}, "users \"bob\" is forbidden: User \"system:node:a\" cannot impersonate resource "
                                          "\"users\" in API group \"\" at the cluster scope"},
        {{"Impersonate-User: system:serviceaccount:ns1:sa1", NULL},
         "serviceaccounts \"sa1\" is forbidden: User \"system:node:a\" cannot impersonate resource \"serviceaccounts\" in "
         "API group \"\" in the namespace \"ns1\": can only create tokens for individual service accounts"},
        {{"Impersonate-User: system:node:a", "Impersonate-Group: system:masters", NULL},
         "users \"system:node:a\" is forbidden: User \"system:node:a\" cannot impersonate resource \"users\" in API group "
         "\"\" at the cluster scope"},
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(cases); i++) {
        api_headers = cases[i].h;
        cr_assert_eq(api_req("GET", "/api/v1/pods", NULL, NULL, &o), 403, "case %zu", i);
        cr_assert_str_eq(jstr(o, "reason"), "Forbidden");
        cr_assert_str_eq(jstr(o, "message"), cases[i].message);
        json_object_put(o);
    }
    api_headers = NULL;
    cr_assert_eq(api_req("GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Da", NULL, NULL, NULL), 200,
                 "without the headers the node is itself: it lists its own pods");
}

/* ---- anonymous and broken credentials ---------------------------------------------------- */

Test(access, anonymous_gets_only_public_paths) {
    free(api.cert);
    free(api.key);
    api.cert = api.key = NULL; /* no client certificate */
    json_object *o = NULL;
    cr_assert_eq(api_req("GET", "/version", NULL, NULL, &o), 200);
    json_object_put(o);
    cr_assert_eq(api_req("GET", "/healthz", NULL, NULL, NULL), 200);
    cr_assert_eq(api_req("GET", "/readyz", NULL, NULL, NULL), 200);
    cr_assert_eq(api_req("GET", "/livez", NULL, NULL, NULL), 200);
    const char *const paths[] = {"/api", "/api/v1/pods", "/apis", "/metrics", "/openapi/v3", SSR};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(paths); i++) {
        cr_assert_eq(api_req("GET", paths[i], NULL, NULL, &o), 401, "%s", paths[i]);
        cr_assert_str_eq(jstr(o, "reason"), "Unauthorized");
        json_object_put(o);
    }
    /* anonymous cannot impersonate, even on a public path */
    const char *const h[] = {"Impersonate-User: kite-admin", NULL};
    api_headers = h;
    cr_assert_eq(api_req("GET", "/version", NULL, NULL, &o), 403);
    json_object_put(o);
}

/* ---- the audit log ----------------------------------------------------------------------- */

/* The audit lines written so far, parsed. */
static json_object *audit_lines(const char *file) {
    kite_audit_flush(api.srv->audit);
    _cleanup_free_ char *path = kite_asprintf("%s/%s", api.dir, file);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "%s", path);
    json_object *all = json_object_new_array();
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0) {
        enum json_tokener_error e;
        json_object *o = kite_json_parse(line, strlen(line), 64, &e, NULL);
        cr_assert_not_null(o, "not JSON: %s", line);
        json_object_array_add(all, o);
    }
    free(line);
    fclose(f);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0600, "the audit log is private");
    return all;
}

static json_object *find_event(json_object *all, const char *verb, const char *resource) {
    for (size_t i = 0; i < json_object_array_length(all); i++) {
        json_object *e = json_object_array_get_idx(all, i);
        if (strcmp(jstr(e, "verb"), verb) == 0 && jstr(e, "objectRef.resource") &&
            strcmp(jstr(e, "objectRef.resource"), resource) == 0)
            return e;
    }
    return NULL;
}

static void start_audited(void) {
    api_audit_file = "logs/audit.log";
    api_start();
}

Test(audit, events_for_requests, .init = start_audited, .fini = api_stop, .timeout = 120) {
    json_object *o = NULL;
    cr_assert_eq(api_reqf("POST", "/api/v1/namespaces", &o, "{\"metadata\":{\"name\":\"team-a\"}}"), 201);
    json_object_put(o);
    cr_assert_eq(api_req("GET", "/api/v1/namespaces/team-a", NULL, NULL, NULL), 200);
    const char *const h[] = {"Impersonate-User: jane", "User-Agent: test-agent/1", "Audit-ID: my-id-1", NULL};
    api_headers = h;
    cr_assert_eq(api_req("GET", "/api/v1/namespaces/team-a/pods/p1", NULL, NULL, NULL), 403);
    api_headers = NULL;
    json_object *all = audit_lines("logs/audit.log");
    json_object *e = find_event(all, "create", "namespaces");
    cr_assert_not_null(e);
    cr_assert_str_eq(jstr(e, "kind"), "Event");
    cr_assert_str_eq(jstr(e, "apiVersion"), "audit.k8s.io/v1");
    cr_assert_str_eq(jstr(e, "level"), "Metadata");
    cr_assert_str_eq(jstr(e, "stage"), "ResponseComplete");
    cr_assert_eq(strlen(jstr(e, "auditID")), 36);
    cr_assert_str_eq(jstr(e, "requestURI"), "/api/v1/namespaces");
    cr_assert_str_eq(jstr(e, "user.username"), "kite-admin");
    cr_assert_str_eq(jstr(e, "user.groups.0"), "system:masters");
    cr_assert_str_eq(jstr(e, "sourceIPs.0"), "127.0.0.1");
    cr_assert_str_eq(jstr(e, "objectRef.apiVersion"), "v1");
    cr_assert_eq(json_object_get_int(jget(e, "responseStatus.code")), 201);
    cr_assert_str_eq(jstr(e, "requestReceivedTimestamp"), "2030-01-02T03:04:05.000000Z");
    cr_assert_str_eq(jstr(e, "stageTimestamp"), "2030-01-02T03:04:05.000000Z");
    e = find_event(all, "get", "namespaces");
    cr_assert_not_null(e);
    cr_assert_str_eq(jstr(e, "objectRef.name"), "team-a");
    cr_assert_eq(json_object_get_int(jget(e, "responseStatus.code")), 200);
    e = find_event(all, "get", "pods");
    cr_assert_not_null(e);
    cr_assert_str_eq(jstr(e, "auditID"), "my-id-1");
    cr_assert_str_eq(jstr(e, "userAgent"), "test-agent/1");
    cr_assert_str_eq(jstr(e, "user.username"), "kite-admin", "user is who authenticated");
    cr_assert_str_eq(jstr(e, "impersonatedUser.username"), "jane");
    cr_assert_str_eq(jstr(e, "objectRef.namespace"), "team-a");
    cr_assert_eq(json_object_get_int(jget(e, "responseStatus.code")), 403);
    json_object_put(all);
    /* counted in /metrics */
    struct kite_buf m = {0};
    kite_audit_metrics(api.srv->audit, &m);
    cr_assert(strstr(m.p, "apiserver_audit_event_total "));
    cr_assert(strstr(m.p, "apiserver_audit_error_total{plugin=\"log\"} 0"));
    kite_buf_release(&m);
}

/* ---- the writer alone: rotation by size -------------------------------------------------- */

static size_t count_backups(const char *dir, size_t *ret_max_size) {
    DIR *d = opendir(dir);
    cr_assert_not_null(d);
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "audit-", 6) != 0) continue;
        cr_assert_str_eq(e->d_name + strlen(e->d_name) - 4, ".log");
        _cleanup_free_ char *p = kite_asprintf("%s/%s", dir, e->d_name);
        struct stat st;
        cr_assert_eq(stat(p, &st), 0);
        if ((size_t)st.st_size > *ret_max_size) *ret_max_size = (size_t)st.st_size;
        n++;
    }
    closedir(d);
    return n;
}

Test(audit_writer, rotates_by_size_and_keeps_maxbackup) {
    char dir[] = "/tmp/kite-audit-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    struct kite_fake_clock clock;
    kite_fake_clock_init(&clock, API_T0_S * KITE_NS_PER_SEC);
    _cleanup_free_ char *path = kite_asprintf("%s/audit.log", dir);
    struct kite_audit_options o = {.path = path, .max_size_mb = 1, .max_backups = 2, .clock = &clock.clock};
    struct kite_audit *a = NULL;
    cr_assert_eq(kite_audit_open(&o, &a), 0);
    /* 100 KiB lines: ten fit in a MiB; 45 lines make five files, of which two backups stay */
    char *line = kite_malloc(100 * 1024);
    memset(line, 'x', 100 * 1024 - 1);
    line[100 * 1024 - 1] = '\n';
    for (int i = 0; i < 45; i++) {
        kite_audit_append(a, line, 100 * 1024);
        kite_fake_clock_advance(&clock, KITE_NS_PER_SEC); /* backups named a second apart */
        kite_audit_flush(a);
    }
    free(line);
    size_t biggest = 0;
    cr_assert_eq(count_backups(dir, &biggest), 2);
    cr_assert_leq(biggest, 1024 * 1024, "no file passes the size");
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_leq(st.st_size, 1024 * 1024);
    cr_assert_eq(st.st_size % (100 * 1024), 0, "whole lines only");
    struct kite_buf m = {0};
    kite_audit_metrics(a, &m);
    cr_assert(strstr(m.p, "kite_audit_rotations_total 4"), "%s", m.p);
    kite_buf_release(&m);
    kite_audit_close(a);
    _cleanup_free_ char *rm = kite_asprintf("rm -rf %s", dir);
    cr_assert_eq(system(rm), 0);
}

Test(audit_writer, write_errors_are_counted_not_fatal) {
    /* /dev/full: every write fails with ENOSPC */
    struct kite_audit_options o = {.path = "/dev/full"};
    struct kite_audit *a = NULL;
    cr_assert_eq(kite_audit_open(&o, &a), 0);
    kite_audit_append(a, "{}\n", 3);
    kite_audit_flush(a);
    struct kite_buf m = {0};
    kite_audit_metrics(a, &m);
    cr_assert(strstr(m.p, "kite_audit_write_errors_total 1"), "%s", m.p);
    kite_buf_release(&m);
    kite_audit_close(a);
}
