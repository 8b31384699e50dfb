/* OpenAPI documents (openapi.h) generated from the kinds' schemas, and the unknown-field walk
 * (kite_schema_unknown_fields) fieldValidation is made of. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "api/openapi.h"
#include "api/schema.h"
#include "json/parse.h"

static json_object *get(json_object *o, const char *k) {
    json_object *v = NULL;
    if (!o || !json_object_object_get_ex(o, k, &v)) return NULL;
    return v;
}

/* Follows a "#/components/schemas/NAME" or "#/definitions/NAME" reference, directly or in a
 * one-element allOf. */
static json_object *deref(json_object *doc, json_object *s) {
    json_object *all = get(s, "allOf");
    if (all) s = json_object_array_get_idx(all, 0);
    json_object *r = get(s, "$ref");
    if (!r) return s;
    const char *ref = json_object_get_string(r);
    json_object *defs = get(doc, "swagger") ? get(doc, "definitions") : get(get(doc, "components"), "schemas");
    const char *name = strrchr(ref, '/') + 1;
    json_object *d = get(defs, name);
    cr_assert(d, "reference %s resolves in its document", ref);
    return d;
}

static bool has_string(json_object *arr, const char *s) {
    for (size_t i = 0; arr && i < json_object_array_length(arr); i++)
        if (strcmp(json_object_get_string(json_object_array_get_idx(arr, i)), s) == 0) return true;
    return false;
}

/* Every $ref in o resolves in doc. */
static void check_refs(json_object *doc, json_object *o, int *n) {
    if (json_object_is_type(o, json_type_array)) {
        for (size_t i = 0; i < json_object_array_length(o); i++) check_refs(doc, json_object_array_get_idx(o, i), n);
        return;
    }
    if (!json_object_is_type(o, json_type_object)) return;
    json_object_object_foreach(o, k, v) {
        if (strcmp(k, "$ref") == 0) {
            deref(doc, o);
            ++*n;
        } else {
            check_refs(doc, v, n);
        }
    }
}

Test(openapi, every_kind_has_a_schema_in_v2_and_its_v3_document) {
    json_object *v2 = kite_openapi_v2();
    json_object *defs = get(v2, "definitions");
    cr_assert_str_eq(json_object_get_string(get(v2, "swagger")), "2.0");
    for (size_t k = 0; kite_resources[k]; k++) {
        const struct kite_resource *r = kite_resources[k];
        cr_assert(r->schema, "%s has a schema", r->kind);
        char name[160];
        kite_openapi_kind_name(r, name);
        json_object *d = get(defs, name);
        cr_assert(d, "v2 defines %s", name);
        cr_assert(json_object_object_length(get(d, "properties")) > 2, "%s has its fields", name);
        json_object *gvks = get(d, "x-kubernetes-group-version-kind");
        cr_assert(gvks && json_object_array_length(gvks) >= 1);
        json_object *gvk = json_object_array_get_idx(gvks, 0);
        cr_assert_str_eq(json_object_get_string(get(gvk, "kind")), r->kind);
        cr_assert_str_eq(json_object_get_string(get(gvk, "group")), r->group);
        cr_assert_str_eq(json_object_get_string(get(gvk, "version")), r->version);

        json_object *v3 = kite_openapi_v3(r->group, r->version);
        cr_assert(v3, "a v3 document for %s", r->api_version);
        cr_assert_str_eq(json_object_get_string(get(v3, "openapi")), "3.0.0");
        json_object *d3 = get(get(get(v3, "components"), "schemas"), name);
        cr_assert(d3, "v3 defines %s", name);
        /* the PATCH of the object declares fieldValidation: kubectl then leaves validation to us */
        char path[256];
        snprintf(path, sizeof path, "/%s/%s%s/%s/{name}", *r->group ? "apis" : "api", r->api_version,
                 r->namespaced ? "/namespaces/{namespace}" : "", r->plural);
        json_object *patch = get(get(get(v3, "paths"), path), "patch");
        if (!kite_resource_stored(r)) { /* a review: only POST on its collection */
            cr_assert_null(get(get(v3, "paths"), path), "%s has no object path", r->kind);
            *strrchr(path, '/') = 0;
            json_object *coll = get(get(v3, "paths"), path);
            cr_assert(get(coll, "post") && !get(coll, "get") && !get(coll, "delete"), "%s: POST alone", r->kind);
            json_object_put(v3);
            continue;
        }
        if (r->read_only) { /* get, list and watch alone */
            json_object *item = get(get(v3, "paths"), path);
            cr_assert(get(item, "get") && !patch && !get(item, "put") && !get(item, "delete"), "%s: read-only", r->kind);
            *strrchr(path, '/') = 0;
            cr_assert(!get(get(get(v3, "paths"), path), "post"), "%s: no POST", r->kind);
            json_object_put(v3);
            continue;
        }
        cr_assert(patch, "v3 has PATCH %s", path);
        cr_assert_str_eq(json_object_get_string(get(patch, "x-kubernetes-action")), "patch");
        cr_assert_str_eq(json_object_get_string(get(get(patch, "x-kubernetes-group-version-kind"), "kind")), r->kind);
        bool fv = false;
        json_object *ps = get(patch, "parameters");
        for (size_t i = 0; i < json_object_array_length(ps); i++)
            fv |= strcmp(json_object_get_string(get(json_object_array_get_idx(ps, i), "name")), "fieldValidation") == 0;
        cr_assert(fv);
        int n = 0;
        check_refs(v3, v3, &n);
        cr_assert(n > 10);
        json_object_put(v3);
    }
    int n = 0;
    check_refs(v2, v2, &n);
    cr_assert(n > 10);
    json_object_put(v2);
    cr_assert_null(kite_openapi_v3("nosuch.example.com", "v1"));
}

Test(openapi, nested_refs_types_and_list_extensions) {
    json_object *doc = kite_openapi_v3("", "v1");
    json_object *defs = get(get(doc, "components"), "schemas");
    json_object *node = get(defs, "io.k8s.api.core.v1.Node");
    /* metadata is apimachinery's ObjectMeta, wrapped in allOf with a description */
    json_object *meta = get(get(node, "properties"), "metadata");
    cr_assert(get(meta, "allOf") && get(meta, "description"));
    json_object *om = deref(doc, meta);
    cr_assert_eq(om, get(defs, "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"));
    json_object *ct = deref(doc, get(get(om, "properties"), "creationTimestamp"));
    cr_assert_str_eq(json_object_get_string(get(ct, "format")), "date-time");
    json_object *gen = get(get(om, "properties"), "generation");
    cr_assert_str_eq(json_object_get_string(get(gen, "format")), "int64");
    json_object *owners = get(get(om, "properties"), "ownerReferences");
    cr_assert_str_eq(json_object_get_string(get(owners, "x-kubernetes-patch-merge-key")), "uid");
    cr_assert_str_eq(json_object_get_string(get(owners, "x-kubernetes-patch-strategy")), "merge");
    json_object *oref = deref(doc, get(owners, "items"));
    cr_assert(has_string(get(oref, "required"), "uid") && has_string(get(oref, "required"), "apiVersion"));
    json_object *labels = get(get(om, "properties"), "labels");
    cr_assert_str_eq(json_object_get_string(get(labels, "type")), "object");
    cr_assert_str_eq(json_object_get_string(get(get(labels, "additionalProperties"), "type")), "string");
    cr_assert_str_eq(json_object_get_string(get(get(get(om, "properties"), "finalizers"), "x-kubernetes-list-type")), "set");

    /* node.status.conditions: a list map keyed by type, merged by type */
    json_object *status = deref(doc, get(get(node, "properties"), "status"));
    json_object *conds = get(get(status, "properties"), "conditions");
    cr_assert_str_eq(json_object_get_string(get(conds, "type")), "array");
    cr_assert_str_eq(json_object_get_string(get(conds, "x-kubernetes-list-type")), "map");
    cr_assert(has_string(get(conds, "x-kubernetes-list-map-keys"), "type"));
    cr_assert_str_eq(json_object_get_string(get(conds, "x-kubernetes-patch-merge-key")), "type");
    json_object *cond = deref(doc, get(conds, "items"));
    cr_assert(has_string(get(cond, "required"), "type") && has_string(get(cond, "required"), "status"));
    /* capacity: a map of Quantity */
    json_object *cap = get(get(status, "properties"), "capacity");
    json_object *q = deref(doc, get(cap, "additionalProperties"));
    cr_assert_eq(q, get(defs, "io.k8s.apimachinery.pkg.api.resource.Quantity"));
    cr_assert(get(q, "oneOf"));

    /* pod.spec.containers: keyed by name; a Container's ports by containerPort; its
     * resources' limits Quantity; initContainers get the same type */
    json_object *pod = get(defs, "io.k8s.api.core.v1.Pod");
    json_object *spec = deref(doc, get(get(pod, "properties"), "spec"));
    cr_assert(has_string(get(spec, "required"), "containers"));
    json_object *cs = get(get(spec, "properties"), "containers");
    cr_assert_str_eq(json_object_get_string(get(cs, "x-kubernetes-list-type")), "map");
    cr_assert(has_string(get(cs, "x-kubernetes-list-map-keys"), "name"));
    cr_assert_str_eq(json_object_get_string(get(cs, "x-kubernetes-patch-merge-key")), "name");
    json_object *c = deref(doc, get(cs, "items"));
    cr_assert_eq(c, get(defs, "io.k8s.api.core.v1.Container"));
    cr_assert_eq(deref(doc, get(get(get(spec, "properties"), "initContainers"), "items")), c);
    json_object *ports = get(get(c, "properties"), "ports");
    cr_assert_str_eq(json_object_get_string(get(ports, "x-kubernetes-patch-merge-key")), "containerPort");
    json_object *res = deref(doc, get(get(c, "properties"), "resources"));
    cr_assert(get(get(res, "properties"), "limits"));
    /* volumes carry sources kite does not transcribe: open, merged with retainKeys */
    json_object *vols = get(get(spec, "properties"), "volumes");
    cr_assert_str_eq(json_object_get_string(get(vols, "x-kubernetes-patch-strategy")), "merge,retainKeys");
    cr_assert(json_object_get_boolean(get(deref(doc, get(vols, "items")), "x-kubernetes-preserve-unknown-fields")));
    /* taints have no strategy upstream (atomic) */
    json_object *nspec = deref(doc, get(get(node, "properties"), "spec"));
    cr_assert_null(get(get(get(nspec, "properties"), "taints"), "x-kubernetes-patch-strategy"));
    /* byte fields */
    json_object *secret = get(defs, "io.k8s.api.core.v1.Secret");
    cr_assert_str_eq(json_object_get_string(get(get(get(get(secret, "properties"), "data"), "additionalProperties"), "format")), "byte");
    /* list kinds */
    json_object *nl = get(defs, "io.k8s.api.core.v1.NodeList");
    cr_assert(nl && has_string(get(nl, "required"), "items"));
    cr_assert_eq(deref(doc, get(get(get(nl, "properties"), "items"), "items")), node);
    json_object_put(doc);

    /* other groups: their own package, meta types still apimachinery's */
    doc = kite_openapi_v3("coordination.k8s.io", "v1");
    defs = get(get(doc, "components"), "schemas");
    json_object *lease = get(defs, "io.k8s.api.coordination.v1.Lease");
    cr_assert(lease);
    json_object *ls = deref(doc, get(get(lease, "properties"), "spec"));
    cr_assert_eq(ls, get(defs, "io.k8s.api.coordination.v1.LeaseSpec"));
    json_object *rt = deref(doc, get(get(ls, "properties"), "renewTime"));
    cr_assert_eq(rt, get(defs, "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime"));
    cr_assert_str_eq(json_object_get_string(get(get(get(ls, "properties"), "leaseDurationSeconds"), "format")), "int32");
    cr_assert(get(defs, "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"));
    cr_assert_null(get(defs, "io.k8s.api.core.v1.Node"), "a group version's document holds its own kinds");
    json_object_put(doc);
    doc = kite_openapi_v3("events.k8s.io", "v1");
    defs = get(get(doc, "components"), "schemas");
    json_object *ev = get(defs, "io.k8s.api.events.v1.Event");
    cr_assert_eq(deref(doc, get(get(ev, "properties"), "regarding")), get(defs, "io.k8s.api.core.v1.ObjectReference"));
    json_object_put(doc);
}

Test(openapi, v2_references_carry_descriptions_beside_ref) {
    json_object *doc = kite_openapi_v2();
    json_object *node = get(get(doc, "definitions"), "io.k8s.api.core.v1.Node");
    json_object *meta = get(get(node, "properties"), "metadata");
    cr_assert_str_eq(json_object_get_string(get(meta, "$ref")), "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta");
    cr_assert(get(meta, "description"));
    json_object *q = get(get(doc, "definitions"), "io.k8s.apimachinery.pkg.api.resource.Quantity");
    cr_assert_str_eq(json_object_get_string(get(q, "type")), "string");
    json_object *ios = get(get(doc, "definitions"), "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions");
    cr_assert(json_object_array_length(get(ios, "x-kubernetes-group-version-kind")) >= 3, "one per served group version");
    json_object_put(doc);
}

/* ---- unknown fields ---- */

struct found { char paths[8][96]; size_t n; };
static void record(void *ud, const char *path) {
    struct found *f = ud;
    if (f->n < 8) snprintf(f->paths[f->n], sizeof f->paths[0], "%s", path);
    f->n++;
}

static json_object *parse(const char *s) {
    json_object *o = json_tokener_parse(s);
    cr_assert(o, "%s", s);
    return o;
}

Test(openapi, unknown_fields_found_with_their_paths_and_dropped) {
    json_object *o = parse("{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\",\"labels\":{\"x\":\"y\"},\"bogus\":1},"
                           "\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i\"},{\"name\":\"d\",\"imagee\":\"i\","
                           "\"livenessProbe\":{\"anything\":{\"goes\":1}}}],"
                           "\"volumes\":[{\"name\":\"v\",\"emptyDir\":{}}],\"foo\":{\"bar\":1}},\"top\":true}");
    struct found f = {0};
    size_t n = kite_schema_unknown_fields(&kite_schema_pod, o, true, record, &f);
    cr_assert_eq(n, 4);
    cr_assert_str_eq(f.paths[0], "metadata.bogus");
    cr_assert_str_eq(f.paths[1], "spec.containers[1].imagee");
    cr_assert_str_eq(f.paths[2], "spec.foo");
    cr_assert_str_eq(f.paths[3], "top");
    cr_assert_str_eq(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN),
                     "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\",\"labels\":{\"x\":\"y\"}},"
                     "\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i\"},{\"name\":\"d\","
                     "\"livenessProbe\":{\"anything\":{\"goes\":1}}}],\"volumes\":[{\"name\":\"v\",\"emptyDir\":{}}]}}");
    /* nothing left: a second walk finds nothing */
    cr_assert_eq(kite_schema_unknown_fields(&kite_schema_pod, o, true, NULL, NULL), 0);
    json_object_put(o);

    /* without drop the object is kept as it was; many unknown keys in one object */
    o = parse("{\"spec\":{\"a\":1,\"b\":2,\"c\":3,\"d\":4,\"e\":5,\"f\":6,\"g\":7,\"h\":8,\"i\":9,\"j\":10,\"holderIdentity\":\"x\"}}");
    cr_assert_eq(kite_schema_unknown_fields(&kite_schema_lease, o, false, NULL, NULL), 10);
    cr_assert_eq(json_object_object_length(json_object_object_get(o, "spec")), 11);
    cr_assert_eq(kite_schema_unknown_fields(&kite_schema_lease, o, true, NULL, NULL), 10);
    cr_assert_str_eq(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN), "{\"spec\":{\"holderIdentity\":\"x\"}}");
    json_object_put(o);
}
