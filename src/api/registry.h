/* The resource registry: one table row per resource kind (DESIGN.md "Resource registry").
 * Everything the API server does differently per kind is data or a hook in this row:
 * discovery, scope, subresources, strategies (defaults, validation, status/spec split),
 * selectable fields, Table printing, and the strategic-merge-patch schema. Adding a kind is
 * adding a row in registry.c. */
#pragma once
#include "api/schema.h"
#include "api/table.h"
#include "api/validation.h"
#include "json/patch.h"

#include <json-c/json.h>

enum kite_name_rule { KITE_NAME_SUBDOMAIN = 0, KITE_NAME_LABEL = 1 };

struct kite_resource {
    const char *group;        /* "" for core */
    const char *version;      /* "v1" */
    const char *kind;         /* "Node" */
    const char *list_kind;    /* "NodeList" */
    const char *plural;       /* "nodes" (URL segment and storage folder) */
    const char *singular;     /* "node" */
    const char *short_names[4];
    const char *categories[2];
    const char *storage;      /* storage folder when shared by several group versions, else plural */
    bool namespaced;
    bool has_status;          /* a /status subresource with the status/spec split */
    bool spec_generation;     /* metadata.generation counts spec changes */
    bool unconditional_update; /* PUT without metadata.resourceVersion allowed */
    bool create_on_update;    /* PUT of a missing object creates it */
    bool status_on_create;    /* status may be set on create (nodes); else it is reset */
    enum kite_name_rule name_rule;
    const struct kite_smp_schema *smp;
    /* The typed schema request bodies and patch results must decode by (schema.h); a
     * failure is 400 BadRequest, as kube-apiserver's decoder error. */
    const struct kite_schema *schema;
    /* Field selector fields beyond metadata.name / metadata.namespace (NULL-terminated). */
    const char *const *fields;
    /* Kind-specific hooks, all optional. obj/old are borrowed. */
    void (*defaults)(json_object *obj);
    void (*validate)(json_object *obj, json_object *old, struct kite_causes *causes);
    /* Converts between this group version's shape and the stored shape (events.k8s.io/v1 is
     * stored as core v1 Event). to_storage/from_storage edit obj in place. */
    void (*to_storage)(json_object *obj);
    void (*from_storage)(json_object *obj);
};

/* All registered resources, for discovery; terminated by a row with kind == NULL. */
extern const struct kite_resource kite_resources[];

/* Looks up by group, version and plural (or a short name or singular when by_alias). */
const struct kite_resource *kite_registry_find(const char *group, const char *version, const char *plural);
const struct kite_resource *kite_registry_find_kind(const char *group, const char *kind);
/* Kubernetes' qualified names, as its error messages print them: "nodes",
 * "leases.coordination.k8s.io" (resource) and "Node", "Lease.coordination.k8s.io" (kind). */
void kite_resource_gr(const struct kite_resource *r, char out[128]);
void kite_resource_gk(const struct kite_resource *r, char out[128]);
/* "v1" or "coordination.k8s.io/v1" (static storage). */
const char *kite_resource_api_version(const struct kite_resource *r);
/* Value of a selectable field (metadata.name, metadata.namespace, or one of r->fields) as a
 * string; "" when absent. buf is scratch space. */
const char *kite_resource_field(const struct kite_resource *r, json_object *obj, const char *field,
                                struct kite_buf *buf);
bool kite_resource_field_supported(const struct kite_resource *r, const char *field);

/* --- stored objects ---------------------------------------------------------------------
 * Objects are stored as JSON with metadata.resourceVersion held as the empty placeholder
 * `"resourceVersion":""`; the revision is spliced in when serving (the revision is only known
 * once the store's writer commits). Keys order kind, apiVersion, metadata (name, generateName,
 * namespace, uid, resourceVersion, ...) first, so the first occurrence of the placeholder is
 * metadata's (a quote inside a JSON string is always escaped, so user data cannot forge it). */

/* Serializes obj in the canonical stored form (metadata.resourceVersion replaced by the
 * placeholder). Returns malloc'ed bytes. obj is borrowed and not modified. */
char *kite_object_encode(json_object *obj, size_t *ret_len);
/* Appends the stored bytes with the revision spliced in (or as is, when no placeholder). */
void kite_object_render(const char *data, size_t len, int64_t rev, struct kite_buf *out);
/* Parses stored bytes and sets metadata.resourceVersion = rev. New object or NULL. */
json_object *kite_object_decode(const char *data, size_t len, int64_t rev);
/* Storage key: /registry/<storage>/<ns>/<name> or /registry/<storage>/<name>. */
char *kite_object_key(const struct kite_resource *r, const char *ns, const char *name);
/* Prefix for a list: /registry/<storage>/ or /registry/<storage>/<ns>/ when ns is set. */
char *kite_object_prefix(const struct kite_resource *r, const char *ns);

/* Small accessors (borrowed results; NULL/"" when absent). */
json_object *kite_obj_get(json_object *obj, const char *k);
json_object *kite_obj_meta(json_object *obj);
const char *kite_obj_str(json_object *obj, const char *k);
const char *kite_meta_str(json_object *obj, const char *k);
/* Sets obj[k] = v (takes ownership of v); creates the object member. */
void kite_obj_set(json_object *obj, const char *k, json_object *v);
json_object *kite_obj_ensure(json_object *obj, const char *k);

/* Random RFC 4122 v4 UUID. out must hold 37 bytes. */
void kite_uuid4(char out[37]);
