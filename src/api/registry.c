/* The resource table: one line per resource; each row is defined in its kind's file in
 * src/api/kinds/ (registry.h says what a row holds). */
#include "api/registry.h"
#include "api/kinds/kind.h"
#include "api/kinds/kinds.h"
#include "api/selector.h"
#include "base/buf.h"

#include <stdio.h>

const struct kite_resource *const kite_resources[] = {
    &kite_kind_namespace,
    &kite_kind_node,
    &kite_kind_pod,
    &kite_kind_event,
    &kite_kind_event_v1,
    &kite_kind_lease,
    &kite_kind_configmap,
    &kite_kind_secret,
    &kite_kind_serviceaccount,
    &kite_kind_csr,
    &kite_kind_selfsubjectaccessreview,
    &kite_kind_subjectaccessreview,
    &kite_kind_localsubjectaccessreview,
    &kite_kind_selfsubjectrulesreview,
    &kite_kind_selfsubjectreview,
    &kite_kind_role,
    &kite_kind_clusterrole,
    &kite_kind_rolebinding,
    &kite_kind_clusterrolebinding,
    &kite_kind_pdb,
    &kite_kind_replicaset,
    &kite_kind_replicationcontroller,
    &kite_kind_deployment,
    &kite_kind_job,
    &kite_kind_cronjob,
    &kite_kind_daemonset,
    &kite_kind_statefulset,
    &kite_kind_controllerrevision,
    &kite_kind_hpa,
    &kite_kind_hpa_v1,
    &kite_kind_service,
    &kite_kind_endpoints,
    &kite_kind_endpointslice,
    &kite_kind_crd,
    NULL,
};

static const struct kite_smp_rule meta_rules[] = {META_RULES};
const struct kite_smp_schema kite_meta_smp_schema = {meta_rules, KITE_ARRAY_SIZE(meta_rules)};

const struct kite_resource *kite_registry_namespaces(void) { return &kite_kind_namespace; }

const struct kite_subresource *kite_resource_subresource(const struct kite_resource *r, const char *name) {
    static const struct kite_subresource status = {.name = "status", .field = "status"};
    if (r->has_status && kite_streq(name, "status")) return &status;
    for (const struct kite_subresource *s = r->subresources; s && s->name; s++)
        if (kite_streq(s->name, name)) return s;
    return NULL;
}

const struct kite_resource *kite_registry_find(const char *group, const char *version, const char *plural) {
    for (size_t i = 0; kite_resources[i]; i++) {
        const struct kite_resource *r = kite_resources[i];
        if (strcmp(r->group, group) == 0 && strcmp(r->version, version) == 0 && strcmp(r->plural, plural) == 0)
            return r;
    }
    return NULL;
}

const struct kite_resource *kite_registry_find_kind(const char *group, const char *kind) {
    for (size_t i = 0; kite_resources[i]; i++)
        if (strcmp(kite_resources[i]->group, group) == 0 && strcmp(kite_resources[i]->kind, kind) == 0)
            return kite_resources[i];
    return NULL;
}

const char *kite_resource_api_version(const struct kite_resource *r) { return r->api_version; }

void kite_resource_gr(const struct kite_resource *r, char out[128]) {
    snprintf(out, 128, "%s%s%s", r->plural, *r->group ? "." : "", r->group);
}

void kite_resource_gk(const struct kite_resource *r, char out[128]) {
    snprintf(out, 128, "%s%s%s", r->kind, *r->group ? "." : "", r->group);
}

/* Field labels, as kube-apiserver's field label conversion funcs take them: metadata.name
 * everywhere, metadata.namespace except on the cluster-scoped kinds that list fields of their
 * own (Node, Namespace: their conversion funcs know no namespace), and the kind's fields. */
static const struct { const char *kind, *label, *field; } field_aliases[] = {
    {"Pod", "spec.host", "spec.nodeName"}, /* old v1 clients' name, converted upstream too */
};

static const char *field_alias(const struct kite_resource *r, const char *label) {
    for (size_t i = 0; i < KITE_ARRAY_SIZE(field_aliases); i++)
        if (!*r->group && strcmp(r->kind, field_aliases[i].kind) == 0 && strcmp(label, field_aliases[i].label) == 0)
            return field_aliases[i].field;
    return label;
}

bool kite_resource_field_supported(const struct kite_resource *r, const char *field) {
    field = field_alias(r, field);
    if (kite_streq(field, "metadata.name")) return true;
    if (kite_streq(field, "metadata.namespace")) return r->namespaced || !r->fields;
    for (const char *const *f = r->fields; f && *f; f++)
        if (strcmp(*f, field) == 0) return true;
    return false;
}

/* The schema type of a dotted field path in r's schema (KITE_SCHEMA_RAW when not listed). */
static enum kite_schema_type field_type(const struct kite_resource *r, const char *dotted) {
    const struct kite_schema *s = r->schema;
    while (s && *dotted) {
        size_t n = strcspn(dotted, ".");
        const struct kite_schema_field *f = s->type == KITE_SCHEMA_OBJECT ? s->fields : NULL;
        while (f && f->name && !(strlen(f->name) == n && strncmp(f->name, dotted, n) == 0)) f++;
        s = f && f->name ? f->schema : NULL;
        dotted += n + (dotted[n] == '.');
    }
    return s ? s->type : KITE_SCHEMA_RAW;
}

/* As the kinds' ToSelectableFields render values: an absent bool is strconv.FormatBool(false),
 * any other absent value "", and an Event's source is its source.component or, when that is
 * empty, its reportingComponent. */
const char *kite_resource_field(const struct kite_resource *r, json_object *obj, const char *field,
                                struct kite_buf *buf) {
    field = field_alias(r, field);
    if (kite_streq(field, "source")) {
        const char *v = kite_json_path_string(obj, "source.component", buf);
        return *v ? v : kite_json_path_string(obj, "reportingComponent", buf);
    }
    const char *v = kite_json_path_string(obj, field, buf);
    if (!*v && field_type(r, field) == KITE_SCHEMA_BOOL) return "false";
    return v;
}
