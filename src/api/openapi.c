/* OpenAPI v2 and v3 documents generated from the kinds' schemas, strategic-merge rules and
 * registry rows (openapi.h). One walk serves both versions; they differ in where definitions
 * live (#/definitions/ or #/components/schemas/), in how a reference carries a description
 * (v3 wraps it in allOf, as upstream, since siblings of $ref are ignored there) and in how
 * parameters and bodies are declared. */
#include "api/openapi.h"
#include "base/buf.h"
#include "json/patch.h"

#include <stdio.h>
#include <string.h>

#define META_PKG "io.k8s.apimachinery.pkg.apis.meta.v1"
#define CORE_PKG "io.k8s.api.core.v1"
#define MAX_DEPTH 32 /* schemas are trees far shallower; a guard against a cycle */

/* Go types that live in another package than the kind using them: apimachinery's meta/v1
 * structs every kind shares, and core/v1 structs other groups embed. A struct under one of
 * these is in its package too (StatusDetails under Status). */
static const char *const META_TYPES[] = {
    "ObjectMeta", "ListMeta", "OwnerReference", "ManagedFieldsEntry", "Status", "StatusDetails", "StatusCause",
    "DeleteOptions", "Preconditions", "LabelSelector", "LabelSelectorRequirement", "FieldSelectorRequirement",
    "Condition",
};
static const char *const CORE_TYPES[] = {
    "ObjectReference", "LocalObjectReference", "EventSource", "TypedLocalObjectReference",
};

/* Descriptions of the fields every kind has at its root (upstream's words). */
static const struct { const char *field, *text; } ROOT_DESC[] = {
    {"apiVersion", "APIVersion defines the versioned schema of this representation of an object. Servers should convert "
                   "recognized schemas to the latest internal value, and may reject unrecognized values. More info: "
                   "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources"},
    {"kind", "Kind is a string value representing the REST resource this object represents. Servers may infer this from "
             "the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: "
             "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"},
    {"metadata", "Standard object's metadata. More info: "
                 "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"},
    {"spec", "Spec defines the desired state of the object. More info: "
             "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#spec-and-status"},
    {"status", "Status is the most recently observed state of the object. Populated by the system. Read-only. More info: "
               "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#spec-and-status"},
};

/* Named leaves: apimachinery types that serialize as strings (or anything, FieldsV1). */
static const struct {
    enum kite_schema_type type;
    const char *go_type; /* RAW leaves are named by their go_type */
    const char *name, *v2_type, *format, *desc;
} LEAVES[] = {
    {KITE_SCHEMA_TIME, NULL, META_PKG ".Time", "string", "date-time",
     "Time is a wrapper around time.Time which supports correct marshaling to YAML and JSON. Wrappers are provided for "
     "many of the factory methods that the time package offers."},
    {KITE_SCHEMA_MICROTIME, NULL, META_PKG ".MicroTime", "string", "date-time",
     "MicroTime is version of Time with microsecond level precision."},
    {KITE_SCHEMA_QUANTITY, NULL, "io.k8s.apimachinery.pkg.api.resource.Quantity", "string", NULL,
     "Quantity is a fixed-point representation of a number. It provides convenient marshaling/unmarshaling in JSON "
     "and YAML, in addition to String() and AsInt64() accessors.\n\nThe serialization format is:\n\n"
     "<quantity>        ::= <signedNumber><suffix>\n\n(Note that <suffix> may be empty, from the \"\" case in "
     "<decimalSI>.)\n\n<suffix> ::= <binarySI> | <decimalExponent> | <decimalSI>\n<binarySI> ::= Ki | Mi | Gi | Ti | "
     "Pi | Ei\n<decimalSI> ::= m | \"\" | k | M | G | T | P | E"},
    {KITE_SCHEMA_INT_OR_STRING, NULL, "io.k8s.apimachinery.pkg.util.intstr.IntOrString", "string", "int-or-string",
     "IntOrString is a type that can hold an int32 or a string.  When used in JSON or YAML marshalling and "
     "unmarshalling, it produces or consumes the inner type.  This allows you to have, for example, a JSON field "
     "that can accept a name or number."},
    {KITE_SCHEMA_RAW, "FieldsV1", META_PKG ".FieldsV1", "object", NULL,
     "FieldsV1 stores a set of fields in a data structure like a Trie, in JSON format."},
    {KITE_SCHEMA_RAW, "RawExtension", "io.k8s.apimachinery.pkg.runtime.RawExtension", "object", NULL,
     "RawExtension is used to hold extensions in external versions."},
};

struct gen {
    bool v3;
    json_object *defs;                   /* name -> schema */
    const struct kite_smp_schema *smp;   /* the kind being walked */
};

static json_object *str(const char *s) { return json_object_new_string(s); }

static json_object *ref(const struct gen *g, const char *name) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s%s", g->v3 ? "#/components/schemas/" : "#/definitions/", name);
    json_object *o = json_object_new_object();
    json_object_object_add(o, "$ref", str(buf));
    return o;
}

static json_object *typed(const char *type, const char *format) {
    json_object *o = json_object_new_object();
    json_object_object_add(o, "type", str(type));
    if (format) json_object_object_add(o, "format", str(format));
    return o;
}

static bool in_list(const char *s, const char *const *list, size_t n) {
    for (size_t i = 0; s && i < n; i++)
        if (strcmp(s, list[i]) == 0) return true;
    return false;
}

/* The package of a Go struct found under pkg. */
static const char *struct_pkg(const struct kite_schema *s, const char *pkg) {
    if (in_list(s->go_type, META_TYPES, KITE_ARRAY_SIZE(META_TYPES))) return META_PKG;
    if (in_list(s->go_type, CORE_TYPES, KITE_ARRAY_SIZE(CORE_TYPES))) return CORE_PKG;
    return pkg;
}

static void group_pkg(const char *group, const char *version, char out[96]) {
    if (!*group) snprintf(out, 96, "io.k8s.api.core.%s", version);
    else snprintf(out, 96, "io.k8s.api.%.*s.%s", (int)strcspn(group, "."), group, version); /* rbac.authorization.k8s.io: rbac */
}

void kite_openapi_kind_name(const struct kite_resource *r, char out[160]) {
    char pkg[96];
    group_pkg(r->group, r->version, pkg);
    snprintf(out, 160, "%s.%s", pkg, r->kind);
}

static json_object *leaf_ref(struct gen *g, size_t i) {
    if (!json_object_object_get_ex(g->defs, LEAVES[i].name, NULL)) {
        json_object *d = json_object_new_object();
        json_object_object_add(d, "description", str(LEAVES[i].desc));
        if (g->v3 && LEAVES[i].type == KITE_SCHEMA_QUANTITY) {
            /* a string or a bare number, as upstream's v3 says it */
            json_object *one = json_object_new_array();
            json_object_array_add(one, typed("string", NULL));
            json_object_array_add(one, typed("number", NULL));
            json_object_object_add(d, "oneOf", one);
        } else {
            json_object_object_add(d, "type", str(LEAVES[i].v2_type));
            if (LEAVES[i].format) json_object_object_add(d, "format", str(LEAVES[i].format));
        }
        if (g->v3 && LEAVES[i].type == KITE_SCHEMA_INT_OR_STRING)
            json_object_object_add(d, "x-kubernetes-int-or-string", json_object_new_boolean(true));
        json_object_object_add(g->defs, LEAVES[i].name, d);
    }
    return ref(g, LEAVES[i].name);
}

static const struct kite_smp_rule *rule_for(const struct gen *g, const char *path) {
    for (size_t i = 0; g->smp && i < g->smp->n_rules; i++)
        if (strcmp(g->smp->rules[i].path, path) == 0) return &g->smp->rules[i];
    return NULL;
}

/* The extensions the kind's strategic-merge rule for the list at path gives it: the same rule
 * the server merges by, so a client computing a patch from the document agrees with it. */
static void add_patch_extensions(const struct gen *g, json_object *prop, const char *path) {
    const struct kite_smp_rule *r = rule_for(g, path);
    if (!r) return;
    bool merge = r->flags & (KITE_SMP_MERGE | KITE_SMP_MERGE_PRIMITIVES);
    if (merge)
        json_object_object_add(prop, "x-kubernetes-patch-strategy",
                               str(r->flags & KITE_SMP_RETAIN_KEYS ? "merge,retainKeys" : "merge"));
    else if (r->flags & KITE_SMP_RETAIN_KEYS)
        json_object_object_add(prop, "x-kubernetes-patch-strategy", str("retainKeys"));
    if ((r->flags & KITE_SMP_MERGE) && r->merge_key) {
        json_object_object_add(prop, "x-kubernetes-patch-merge-key", str(r->merge_key));
        json_object_object_add(prop, "x-kubernetes-list-type", str("map"));
        json_object *keys = json_object_new_array();
        if (!r->map_keys) json_object_array_add(keys, str(r->merge_key));
        for (const char *p = r->map_keys; p && *p;) { /* "a,b=default": the names */
            size_t len = strcspn(p, ","), nlen = strcspn(p, ",=");
            json_object_array_add(keys, json_object_new_string_len(p, (int)nlen));
            p += len + (p[len] == ',');
        }
        json_object_object_add(prop, "x-kubernetes-list-map-keys", keys);
    } else if (r->flags & KITE_SMP_MERGE_PRIMITIVES) {
        json_object_object_add(prop, "x-kubernetes-list-type", str("set"));
    }
}

static json_object *value_schema(struct gen *g, const struct kite_schema *s, const char *pkg, const char *path, int depth);

/* Defines (or revisits, for the rules of another path to it) the struct s, named name. */
static void define_struct(struct gen *g, const struct kite_schema *s, const char *pkg, const char *path, int depth,
                          char name[192]) {
    pkg = struct_pkg(s, pkg);
    snprintf(name, 192, "%s.%s", pkg, s->go_type);
    json_object *def = NULL, *props = NULL;
    if (!json_object_object_get_ex(g->defs, name, &def)) {
        def = json_object_new_object();
        if (s->description) json_object_object_add(def, "description", str(s->description));
        json_object_object_add(def, "type", str("object"));
        json_object *req = json_object_new_array();
        for (const struct kite_schema_field *f = s->fields; f && f->name; f++)
            if (f->flags & KITE_SCHEMA_REQUIRED) json_object_array_add(req, str(f->name));
        json_object_object_add(def, "properties", json_object_new_object());
        if (json_object_array_length(req)) json_object_object_add(def, "required", req);
        else json_object_put(req);
        if (s->flags & KITE_SCHEMA_PARTIAL)
            json_object_object_add(def, "x-kubernetes-preserve-unknown-fields", json_object_new_boolean(true));
        json_object_object_add(g->defs, name, def);
    }
    json_object_object_get_ex(def, "properties", &props);
    if (depth > MAX_DEPTH) return;
    struct kite_buf fpath = {0};
    for (const struct kite_schema_field *f = s->fields; f && f->name; f++) {
        if (f->flags & KITE_SCHEMA_INLINE) continue; /* its fields are the parent's (preserved unknown) */
        fpath.len = 0;
        kite_buf_printf(&fpath, "%s%s%s", path, *path ? "." : "", f->name);
        json_object *prop = value_schema(g, f->schema, pkg, fpath.p, depth + 1);
        if (g->v3 && json_object_object_get_ex(prop, "$ref", NULL)) {
            /* siblings of $ref are ignored in 3.0: upstream wraps it */
            json_object *all = json_object_new_array(), *w = json_object_new_object();
            json_object_array_add(all, prop);
            json_object_object_add(w, "allOf", all);
            prop = w;
        }
        if (!*path)
            for (size_t i = 0; i < KITE_ARRAY_SIZE(ROOT_DESC); i++)
                if (strcmp(ROOT_DESC[i].field, f->name) == 0) json_object_object_add(prop, "description", str(ROOT_DESC[i].text));
        add_patch_extensions(g, prop, fpath.p);
        json_object *have = NULL;
        if (!json_object_object_get_ex(props, f->name, &have)) {
            json_object_object_add(props, f->name, prop);
            continue;
        }
        /* seen from another path: keep the first, with any rule this path adds */
        json_object_object_foreach(prop, k, v)
            if (strncmp(k, "x-kubernetes-patch", 18) == 0 || strncmp(k, "x-kubernetes-list", 17) == 0)
                if (!json_object_object_get_ex(have, k, NULL)) json_object_object_add(have, k, json_object_get(v));
        json_object_put(prop);
    }
    kite_buf_release(&fpath);
}

static json_object *value_schema(struct gen *g, const struct kite_schema *s, const char *pkg, const char *path, int depth) {
    for (size_t i = 0; i < KITE_ARRAY_SIZE(LEAVES); i++)
        if (LEAVES[i].type == s->type && (!LEAVES[i].go_type || (s->go_type && strcmp(s->go_type, LEAVES[i].go_type) == 0)))
            return leaf_ref(g, i);
    switch (s->type) {
    case KITE_SCHEMA_STRING: return typed("string", NULL);
    case KITE_SCHEMA_INT32: return typed("integer", "int32");
    case KITE_SCHEMA_INT64: return typed("integer", "int64");
    case KITE_SCHEMA_BOOL: return typed("boolean", NULL);
    case KITE_SCHEMA_FLOAT: return typed("number", "double");
    case KITE_SCHEMA_BYTES: return typed("string", "byte");
    case KITE_SCHEMA_OBJECT:
        if (s->go_type) {
            char name[192];
            define_struct(g, s, pkg, path, depth, name);
            return ref(g, name);
        }
        return typed("object", NULL);
    case KITE_SCHEMA_MAP: {
        json_object *o = typed("object", NULL);
        json_object_object_add(o, "additionalProperties", value_schema(g, s->elem, pkg, path, depth + 1));
        return o;
    }
    case KITE_SCHEMA_LIST: {
        json_object *o = typed("array", NULL);
        json_object_object_add(o, "items", value_schema(g, s->elem, pkg, path, depth + 1));
        return o;
    }
    default: {
        /* RAW: a part kite does not transcribe (probes, affinity...): any JSON */
        json_object *o = json_object_new_object();
        json_object_object_add(o, "x-kubernetes-preserve-unknown-fields", json_object_new_boolean(true));
        return o;
    }
    }
}

static void add_gvk(json_object *def, const char *group, const char *version, const char *kind) {
    json_object *list = NULL;
    if (!json_object_object_get_ex(def, "x-kubernetes-group-version-kind", &list)) {
        list = json_object_new_array();
        json_object_object_add(def, "x-kubernetes-group-version-kind", list);
    }
    for (size_t i = 0; i < json_object_array_length(list); i++) {
        json_object *e = json_object_array_get_idx(list, i), *eg, *ek, *ev;
        if (json_object_object_get_ex(e, "group", &eg) && json_object_object_get_ex(e, "kind", &ek) &&
            json_object_object_get_ex(e, "version", &ev) && !strcmp(json_object_get_string(eg), group) &&
            !strcmp(json_object_get_string(ek), kind) && !strcmp(json_object_get_string(ev), version))
            return;
    }
    json_object *gvk = json_object_new_object();
    json_object_object_add(gvk, "group", str(group));
    json_object_object_add(gvk, "kind", str(kind));
    json_object_object_add(gvk, "version", str(version));
    json_object_array_add(list, gvk);
}

static json_object *def_of(struct gen *g, const char *name) {
    json_object *d = NULL;
    json_object_object_get_ex(g->defs, name, &d);
    return d;
}

/* The meta/v1 messages the paths name: Status, DeleteOptions, WatchEvent, Patch. */
static void define_meta(struct gen *g) {
    char name[192];
    define_struct(g, &kite_schema_status, META_PKG, "", 0, name);
    define_struct(g, &kite_schema_delete_options, META_PKG, "", 0, name);
    if (!def_of(g, META_PKG ".WatchEvent")) {
        json_object *d = typed("object", NULL), *props = json_object_new_object(), *req = json_object_new_array();
        json_object *obj = json_object_new_object();
        json_object_object_add(obj, "description",
                               str("Object is:\n * If Type is Added or Modified: the new state of the object.\n"
                                   " * If Type is Deleted: the state of the object immediately before deletion.\n"
                                   " * If Type is Error: *Status is recommended; other types may make sense\n"
                                   "   depending on context."));
        json_object_object_add(obj, "type", str("object"));
        json_object_object_add(props, "object", obj);
        json_object_object_add(props, "type", typed("string", NULL));
        json_object_array_add(req, str("type"));
        json_object_array_add(req, str("object"));
        json_object_object_add(d, "description", str("Event represents a single event to a watched resource."));
        json_object_object_add(d, "properties", props);
        json_object_object_add(d, "required", req);
        json_object_object_add(g->defs, META_PKG ".WatchEvent", d);
        json_object *p = typed("object", NULL);
        json_object_object_add(p, "description", str("Patch is provided to give a concrete name and type to the Kubernetes PATCH request body."));
        json_object_object_add(g->defs, META_PKG ".Patch", p);
    }
}

/* r's kind and list kind. */
static void define_kind(struct gen *g, const struct kite_resource *r) {
    char pkg[96], name[192], list[192];
    group_pkg(r->group, r->version, pkg);
    g->smp = r->smp;
    define_struct(g, r->schema, pkg, "", 0, name);
    g->smp = NULL;
    add_gvk(def_of(g, name), r->group, r->version, r->kind);
    snprintf(list, sizeof list, "%s.%s", pkg, r->list_kind);
    json_object *d = typed("object", NULL), *props = json_object_new_object(), *items = typed("array", NULL);
    char desc[160];
    snprintf(desc, sizeof desc, "%s is a list of %s objects.", r->list_kind, r->kind);
    json_object_object_add(d, "description", str(desc));
    json_object_object_add(props, "apiVersion", typed("string", NULL));
    json_object_object_add(items, "items", ref(g, name));
    json_object_object_add(props, "items", items);
    json_object_object_add(props, "kind", typed("string", NULL));
    json_object_object_add(props, "metadata", value_schema(g, &kite_schema_list_meta, META_PKG, "", 1));
    json_object_object_add(d, "properties", props);
    json_object *req = json_object_new_array();
    json_object_array_add(req, str("items"));
    json_object_object_add(d, "required", req);
    add_gvk(d, r->group, r->version, r->list_kind);
    json_object_object_add(g->defs, list, d);
    add_gvk(def_of(g, META_PKG ".DeleteOptions"), r->group, r->version, "DeleteOptions");
    add_gvk(def_of(g, META_PKG ".WatchEvent"), r->group, r->version, "WatchEvent");
}

/* ---- paths --------------------------------------------------------------------------------- */

enum { P_NS = 1, P_NAME = 2 };
static const struct { const char *name, *desc; } QUERY[] = {
    {"dryRun", "When present, indicates that modifications should not be persisted. Valid values are: - All: all dry run stages will be processed"},
    {"fieldManager", "fieldManager is a name associated with the actor or entity that is making these changes."},
    {"fieldValidation", "fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: - Ignore - Warn (the default) - Strict"},
    {"force", "Force is going to \"force\" Apply requests."},
    {"labelSelector", "A selector to restrict the list of returned objects by their labels. Defaults to everything."},
    {"fieldSelector", "A selector to restrict the list of returned objects by their fields. Defaults to everything."},
    {"limit", "limit is a maximum number of responses to return for a list call."},
    {"continue", "The continue option should be set when retrieving more results from the server."},
    {"resourceVersion", "resourceVersion sets a constraint on what resource versions a request may be served from."},
    {"watch", "Watch for changes to the described resources and return them as a stream of add, update, and remove notifications."},
    {"gracePeriodSeconds", "The duration in seconds before the object should be deleted."},
    {"propagationPolicy", "Whether and how garbage collection will be performed."},
};

static json_object *param(const struct gen *g, const char *name, const char *in, const char *desc, const char *type) {
    json_object *p = json_object_new_object();
    json_object_object_add(p, "name", str(name));
    json_object_object_add(p, "in", str(in));
    if (desc) json_object_object_add(p, "description", str(desc));
    if (!strcmp(in, "path")) json_object_object_add(p, "required", json_object_new_boolean(true));
    json_object_object_add(p, "uniqueItems", json_object_new_boolean(true));
    if (g->v3) json_object_object_add(p, "schema", typed(type, NULL));
    else json_object_object_add(p, "type", str(type));
    return p;
}

static json_object *query_params(const struct gen *g, const char *const *names) {
    json_object *a = json_object_new_array();
    for (; *names; names++)
        for (size_t i = 0; i < KITE_ARRAY_SIZE(QUERY); i++)
            if (strcmp(QUERY[i].name, *names) == 0) {
                const char *type = !strcmp(*names, "force") || !strcmp(*names, "watch") ? "boolean"
                                   : !strcmp(*names, "limit") || !strcmp(*names, "gracePeriodSeconds") ? "integer"
                                                                                                       : "string";
                json_object_array_add(a, param(g, *names, "query", QUERY[i].desc, type));
            }
    return a;
}

static json_object *content(const struct gen *g, const char *const *types, const char *schema) {
    json_object *c = json_object_new_object();
    for (; *types; types++) {
        json_object *m = json_object_new_object();
        json_object_object_add(m, "schema", ref(g, schema));
        json_object_object_add(c, *types, m);
    }
    return c;
}

static const char *const JSON_TYPES[] = {"application/json", "application/yaml", "application/vnd.kubernetes.protobuf", NULL};
static const char *const PATCH_TYPES[] = {"application/json-patch+json", "application/merge-patch+json",
                                          "application/strategic-merge-patch+json", "application/apply-patch+yaml", NULL};

/* One operation: action (x-kubernetes-action), body schema (or NULL), reply schema. */
static json_object *operation(const struct gen *g, const struct kite_resource *r, const char *action, const char *verb_id,
                              const char *body, const char *kite_apiserver_reply, const char *const *params, bool patch) {
    json_object *op = json_object_new_object();
    char id[160];
    snprintf(id, sizeof id, "%s%s%s", verb_id, r->namespaced ? "Namespaced" : "", r->kind);
    json_object_object_add(op, "operationId", str(id));
    json_object *tags = json_object_new_array();
    json_object_array_add(tags, str(*r->group ? r->group : "core_v1"));
    json_object_object_add(op, "tags", tags);
    json_object *ps = query_params(g, params);
    if (body && g->v3) {
        json_object *rb = json_object_new_object();
        json_object_object_add(rb, "content", content(g, patch ? PATCH_TYPES : (const char *const[]){"*/*", NULL}, body));
        json_object_object_add(rb, "required", json_object_new_boolean(true));
        json_object_object_add(op, "requestBody", rb);
    } else if (body) {
        json_object *p = json_object_new_object();
        json_object_object_add(p, "name", str("body"));
        json_object_object_add(p, "in", str("body"));
        json_object_object_add(p, "required", json_object_new_boolean(true));
        json_object_object_add(p, "schema", ref(g, body));
        json_object_array_add(ps, p);
        json_object *consumes = json_object_new_array();
        for (const char *const *t = patch ? PATCH_TYPES : (const char *const[]){"*/*", NULL}; *t; t++)
            json_object_array_add(consumes, str(*t));
        json_object_object_add(op, "consumes", consumes);
    }
    json_object_object_add(op, "parameters", ps);
    json_object *resp = json_object_new_object(), *ok = json_object_new_object();
    json_object_object_add(ok, "description", str("OK"));
    if (g->v3) {
        json_object_object_add(ok, "content", content(g, JSON_TYPES, kite_apiserver_reply));
    } else {
        json_object_object_add(ok, "schema", ref(g, kite_apiserver_reply));
        json_object *produces = json_object_new_array();
        for (const char *const *t = JSON_TYPES; *t; t++) json_object_array_add(produces, str(*t));
        json_object_object_add(op, "produces", produces);
    }
    json_object_object_add(resp, "200", ok);
    json_object *unauth = json_object_new_object();
    json_object_object_add(unauth, "description", str("Unauthorized"));
    json_object_object_add(resp, "401", unauth);
    json_object_object_add(op, "responses", resp);
    json_object_object_add(op, "x-kubernetes-action", str(action));
    json_object *gvk = json_object_new_object();
    json_object_object_add(gvk, "group", str(r->group));
    json_object_object_add(gvk, "kind", str(r->kind));
    json_object_object_add(gvk, "version", str(r->version));
    json_object_object_add(op, "x-kubernetes-group-version-kind", gvk);
    return op;
}

static json_object *path_item(const struct gen *g, unsigned which) {
    json_object *item = json_object_new_object(), *ps = json_object_new_array();
    if (which & P_NAME) json_object_array_add(ps, param(g, "name", "path", "name of the object", "string"));
    if (which & P_NS) json_object_array_add(ps, param(g, "namespace", "path", "object name and auth scope, such as for teams and projects", "string"));
    json_object_array_add(ps, param(g, "pretty", "query", "If 'true', then the output is pretty printed.", "string"));
    json_object_object_add(item, "parameters", ps);
    return item;
}

static void add_paths(const struct gen *g, json_object *paths, const struct kite_resource *r) {
    static const char *const WRITE[] = {"dryRun", "fieldManager", "fieldValidation", NULL};
    static const char *const PATCH[] = {"dryRun", "fieldManager", "fieldValidation", "force", NULL};
    static const char *const LIST[] = {"labelSelector", "fieldSelector", "limit", "continue", "resourceVersion", "watch", NULL};
    static const char *const DELETE[] = {"dryRun", "gracePeriodSeconds", "propagationPolicy", NULL};
    static const char *const NONE[] = {NULL};
    char kind[160], list[192], base[256], p[320];
    kite_openapi_kind_name(r, kind);
    snprintf(list, sizeof list, "%.*s%s", (int)(strlen(kind) - strlen(r->kind)), kind, r->list_kind);
    snprintf(base, sizeof base, "/%s/%s%s/%s", *r->group ? "apis" : "api", r->api_version,
             r->namespaced ? "/namespaces/{namespace}" : "", r->plural);
    unsigned ns = r->namespaced ? P_NS : 0;

    json_object *coll = path_item(g, ns);
    if (!kite_resource_stored(r)) { /* a review: create is all there is, as upstream */
        json_object_object_add(coll, "post", operation(g, r, "post", "create", kind, kind, WRITE, false));
        json_object_object_add(paths, base, coll);
        return;
    }
    json_object_object_add(coll, "get", operation(g, r, "list", "list", NULL, list, LIST, false));
    if (!r->read_only) json_object_object_add(coll, "post", operation(g, r, "post", "create", kind, kind, WRITE, false));
    if (!r->no_deletecollection && !r->read_only)
        json_object_object_add(coll, "delete", operation(g, r, "deletecollection", "deleteCollection",
                                                         META_PKG ".DeleteOptions", META_PKG ".Status", DELETE, false));
    json_object_object_add(paths, base, coll);

    snprintf(p, sizeof p, "%s/{name}", base);
    json_object *item = path_item(g, ns | P_NAME);
    json_object_object_add(item, "get", operation(g, r, "get", "read", NULL, kind, NONE, false));
    if (r->read_only) {
        json_object_object_add(paths, p, item);
        return;
    }
    json_object_object_add(item, "put", operation(g, r, "put", "replace", kind, kind, WRITE, false));
    json_object_object_add(item, "patch", operation(g, r, "patch", "patch", META_PKG ".Patch", kind, PATCH, true));
    json_object_object_add(item, "delete", operation(g, r, "delete", "delete", META_PKG ".DeleteOptions",
                                                     r->delete_returns_object ? kind : META_PKG ".Status", DELETE, false));
    json_object_object_add(paths, p, item);

    if (r->has_status) {
        snprintf(p, sizeof p, "%s/{name}/status", base);
        json_object *st = path_item(g, ns | P_NAME);
        json_object_object_add(st, "get", operation(g, r, "get", "readStatus", NULL, kind, NONE, false));
        json_object_object_add(st, "put", operation(g, r, "put", "replaceStatus", kind, kind, WRITE, false));
        json_object_object_add(st, "patch", operation(g, r, "patch", "patchStatus", META_PKG ".Patch", kind, PATCH, true));
        json_object_object_add(paths, p, st);
    }
}

/* ---- documents ----------------------------------------------------------------------------- */

static json_object *info(void) {
    json_object *i = json_object_new_object();
    json_object_object_add(i, "title", str("Kubernetes"));
    json_object_object_add(i, "version", str("v1.32.0"));
    return i;
}

static bool in_doc(const struct kite_resource *r, const char *group, const char *version) {
    return r->schema && (!group || (strcmp(r->group, group) == 0 && strcmp(r->version, version) == 0));
}

static void build(struct gen *g, json_object *paths, const char *group, const char *version) {
    define_meta(g);
    for (size_t k = 0; kite_resources[k]; k++)
        if (in_doc(kite_resources[k], group, version)) define_kind(g, kite_resources[k]);
    for (size_t k = 0; kite_resources[k]; k++)
        if (in_doc(kite_resources[k], group, version)) add_paths(g, paths, kite_resources[k]);
}

json_object *kite_openapi_v3(const char *group, const char *version) {
    bool any = false;
    for (size_t k = 0; kite_resources[k]; k++) any |= in_doc(kite_resources[k], group, version);
    if (!any) return NULL;
    struct gen g = {.v3 = true, .defs = json_object_new_object()};
    json_object *doc = json_object_new_object(), *paths = json_object_new_object(), *comp = json_object_new_object();
    build(&g, paths, group, version);
    json_object_object_add(doc, "openapi", str("3.0.0"));
    json_object_object_add(doc, "info", info());
    json_object_object_add(doc, "paths", paths);
    json_object_object_add(comp, "schemas", g.defs);
    json_object *sec = json_object_new_object(), *bearer = json_object_new_object();
    json_object_object_add(bearer, "type", str("apiKey"));
    json_object_object_add(bearer, "name", str("authorization"));
    json_object_object_add(bearer, "in", str("header"));
    json_object_object_add(bearer, "description", str("Bearer Token authentication"));
    json_object_object_add(sec, "BearerToken", bearer);
    json_object_object_add(comp, "securitySchemes", sec);
    json_object_object_add(doc, "components", comp);
    return doc;
}

json_object *kite_openapi_v2(void) {
    struct gen g = {.v3 = false, .defs = json_object_new_object()};
    json_object *doc = json_object_new_object(), *paths = json_object_new_object();
    build(&g, paths, NULL, NULL);
    json_object_object_add(doc, "swagger", str("2.0"));
    json_object_object_add(doc, "info", info());
    json_object_object_add(doc, "paths", paths);
    json_object_object_add(doc, "definitions", g.defs);
    json_object *sec = json_object_new_object(), *bearer = json_object_new_object();
    json_object_object_add(bearer, "type", str("apiKey"));
    json_object_object_add(bearer, "name", str("authorization"));
    json_object_object_add(bearer, "in", str("header"));
    json_object_object_add(bearer, "description", str("Bearer Token authentication"));
    json_object_object_add(sec, "BearerToken", bearer);
    json_object_object_add(doc, "securityDefinitions", sec);
    json_object *security = json_object_new_array(), *s1 = json_object_new_object();
    json_object_object_add(s1, "BearerToken", json_object_new_array());
    json_object_array_add(security, s1);
    json_object_object_add(doc, "security", security);
    return doc;
}
