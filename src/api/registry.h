/* The resource registry: one table row per resource (DESIGN.md "Resource registry").
 * Everything the API server does differently per kind is data or a hook in its row, as
 * Kubernetes' REST strategies: discovery, scope, subresources, defaulting, validation, the
 * status/spec split, deletion (immediate, or graceful behind finalizers), selectable fields,
 * Table printing and the strategic-merge-patch schema. Each kind is one file in
 * src/api/kinds/ defining its row; adding a kind is that file plus one line in registry.c.
 * The API server names no kind: it reads rows. */
#pragma once
#include "api/schema.h"
#include "api/table.h"
#include "api/validation.h"
#include "json/obj.h"
#include "json/patch.h"

#include <json-c/json.h>

/* PATH_SEGMENT: any name that is a valid URL path segment (not "." or "..", no '/' or '%'),
 * as RBAC objects' names ("system:basic-user"). */
enum kite_name_rule { KITE_NAME_SUBDOMAIN = 0, KITE_NAME_LABEL = 1, KITE_NAME_PATH_SEGMENT = 2, KITE_NAME_DNS1035 = 3 };

/* What a guarded delete may do (kite_subresource.guard): code 0 goes on with the delete, else
 * it is answered code with message (and one cause, cause_reason/cause, when set); update is
 * the index of the guard object whose status is to be replaced by `status` first (SIZE_MAX:
 * none); pin deletes only the object as it was judged (its resourceVersion a precondition). */
struct kite_guard_verdict {
    int code;
    char *message, *cause;     /* malloc'ed or NULL */
    const char *cause_reason;  /* static or NULL */
    size_t update;
    json_object *status;       /* owned */
    bool pin;
};
void kite_guard_verdict_release(struct kite_guard_verdict *v);

/* A subresource written on its own: a write of it changes only `field` of the object (and
 * metadata), whatever else the body holds ("status" -> status; a namespace's "finalize" ->
 * spec). The main resource's writes keep `field` as it was. */
struct kite_subresource {
    const char *name;
    const char *field;
    bool update_only;         /* served for PUT alone (a namespace's finalize); else get/patch/update */
    /* An action subresource is served for POST alone (verb create; a pod's binding and
     * eviction): its body is an object of another kind (body_group/body_version/body_kind:
     * "", "v1", "Binding"; "policy", "v1", "Eviction"), and a success is answered 201 with a
     * Status Success, as kube-apiserver. What the POST does is one of: */
    const char *body_group, *body_version, *body_kind;
    const struct kite_schema *body_schema; /* the body's, for a protobuf body (NULL: the kind's) */
    /* - changes a copy of the current object from the body (now_ns: the server's wall time), written back as an update (the
     *   kind's validation is not run: the action is the check). Returns 0, or an HTTP code
     *   (409, 400, 422) with *ret_msg (malloc'ed): a 409 is answered as Kubernetes' Conflict
     *   on "<plural>/<sub>", `Operation cannot be fulfilled on pods/binding "p": <msg>`. */
    int (*act)(json_object *obj, json_object *body, int64_t now_ns, char **ret_msg);
    /* - deletes the object with the body's deleteOptions (grace period, preconditions), as a
     *   DELETE would; the admission chain sees a delete of this subresource (where a
     *   disruption budget check belongs). */
    bool deletes;
    /* A delete that is first judged against the objects of another resource in the object's
     * namespace (an eviction against the PodDisruptionBudgets, guard_group/guard_plural
     * "policy"/"poddisruptionbudgets"): guard() reads the object and them (borrowed) and
     * decides (kite_guard_verdict); a guard written back is a compare-and-swap, redone from
     * the start when it loses a race. */
    const char *guard_group, *guard_plural;
    void (*guard)(json_object *obj, json_object *const *guards, size_t n, int64_t now_ns, bool dry_run,
                  struct kite_guard_verdict *ret);
    /* Changes the copy a graceful delete through this subresource marks as terminating (an
     * eviction's DisruptionTarget condition). */
    void (*mark)(json_object *obj, int64_t now_ns);
    /* A connect subresource (a pod's log) is served for GET alone (verb get) by proxying to the
     * node agent of the object: connect() reads the object (borrowed) and the request's query
     * (query(qud, name): a value or NULL) and gives the node's name and the agent's path with
     * its query (*ret_node, *ret_path, malloc'ed), or an HTTP code (400, 422) with *ret_msg. */
    int (*connect)(json_object *obj, const char *(*query)(void *qud, const char *name), void *qud, char **ret_node,
                   char **ret_path, char **ret_msg);
    /* ... an upgraded stream (exec, attach): GET (verb get, and create as kube-apiserver 1.35
     * checks a WebSocket's) or POST (create), the connection handed to the agent as it is
     * after the agent's 101; *ret_path has no query: the request's goes along unchanged */
    bool upgrade;
    /* A view subresource (a workload's scale) is served for get, patch and update in another
     * kind's shape (body_group/body_version/body_kind: "autoscaling", "v1", "Scale"): view()
     * makes it from the object (borrowed; returns a new object), apply() writes what a client
     * may change of a view (borrowed) into a copy of the object. A write through it is an
     * update of the object (its `field` alone, and metadata), with the kind's validation. */
    json_object *(*view)(json_object *obj);
    void (*apply)(json_object *obj, json_object *view);
    /* A token subresource (a ServiceAccount's token) is served for POST alone (verb create):
     * the server issues a credential for the object, answered 201 as the body's kind with its
     * status filled in; nothing is stored. */
    bool token;
};

/* ---- kinds that are never stored (access reviews) --------------------------------------
 * A POST of such a kind asks the server a question; the answer is the request's object with
 * its status filled. The kind's hook words the question and the answer; the server answers
 * what it is asked through a kite_review_env, so neither names the other. */

/* An identity as authentication.k8s.io's UserInfo carries it. extra: n_extra (key, value)
 * pairs, extra[2i] the key and extra[2i+1] one of its values. All borrowed. */
struct kite_review_user {
    const char *name, *uid;
    const char *const *groups;
    size_t n_groups;
    const char *const *extra;
    size_t n_extra;
};

/* One access question: a resource request (resource set) or a non-resource one (path set). */
struct kite_review_attrs {
    const struct kite_review_user *user;
    const char *verb, *group, *version, *resource, *sub, *ns, *name;
    const char *path;
};

/* The answer of the server's authorizer chain; reason and error malloc'ed (may be NULL). */
struct kite_review_decision {
    bool allowed, denied;
    char *reason, *error;
};

struct kite_review_env {
    const struct kite_review_user *requester; /* who asks (the impersonated user, if any) */
    const char *ns;                           /* the request's namespace (namespaced kinds); NULL */
    int64_t now_ns;                           /* the server's wall time */
    void (*authorize)(const struct kite_review_env *env, const struct kite_review_attrs *a,
                      struct kite_review_decision *ret);
    /* Sets status.resourceRules, nonResourceRules, incomplete and evaluationError: what the
     * chain lists u may do in ns (SubjectRulesReviewStatus). */
    void (*rules)(const struct kite_review_env *env, const struct kite_review_user *u, const char *ns,
                  json_object *status);
    void *ud;
};

/* ---- values the server hands out ------------------------------------------------------
 * Some fields hold values unique among a kind's objects that the server allocates from ranges
 * of its configuration (a Service's cluster IPs from --service-cluster-ip-range, its node
 * ports from 30000-32767), as kube-apiserver's allocators. The kind's hooks say which values an
 * object holds and fill in the ones it asks for; the server keeps what is in use. */
enum kite_pool { KITE_POOL_SERVICE_IP, KITE_POOL_NODE_PORT, KITE_POOL_COUNT };
struct kite_pools {
    /* Takes value v (an IPv4 address in host order, or a port): 0; -EEXIST when in use; -ERANGE
     * when outside the pool's range. */
    int (*take)(struct kite_pools *ps, enum kite_pool p, uint32_t v);
    /* Takes a free value: 0 and *ret; -ENOSPC when the range is full. */
    int (*pick)(struct kite_pools *ps, enum kite_pool p, uint32_t *ret);
    /* The pool's range as its flag spells it ("10.96.0.0/12", "30000-32767"), for messages. */
    const char *(*range)(struct kite_pools *ps, enum kite_pool p);
    /* The first address of the service range (the `kubernetes` Service's). */
    uint32_t (*first)(struct kite_pools *ps, enum kite_pool p);
    void *ud;
};
/* One value an object holds. */
struct kite_pool_value {
    enum kite_pool pool;
    uint32_t v;
};
#define KITE_POOL_VALUES_MAX 64 /* values one object may hold (more are not recorded) */

/* A row's group and version, and its apiVersion derived from them at compile time. */
#define KITE_CORE_V1 .group = "", .version = "v1", .api_version = "v1"
#define KITE_GROUP_VERSION(g, v) .group = g, .version = v, .api_version = g "/" v

struct kite_resource {
    const char *group;        /* "" for core */
    const char *version;      /* "v1" */
    const char *api_version;  /* "v1", "coordination.k8s.io/v1" (KITE_CORE_V1, KITE_GROUP_VERSION) */
    const char *kind;         /* "Node" */
    const char *list_kind;    /* "NodeList" */
    const char *plural;       /* "nodes" (URL segment and storage folder) */
    const char *singular;     /* "node" */
    const char *short_names[4];
    const char *categories[2];
    const char *storage;      /* storage folder when shared by several group versions, else plural */
    bool namespaced;
    bool has_status;          /* a /status subresource with the status/spec split */
    bool read_only;           /* get, list and watch alone (a write is 405 MethodNotAllowed): a
                                 collection kite keeps empty (CustomResourceDefinitions) */
    bool spec_generation;     /* metadata.generation counts spec changes */
    bool unconditional_update; /* PUT without metadata.resourceVersion allowed */
    bool create_on_update;    /* PUT of a missing object creates it */
    bool status_on_create;    /* status may be set on create (nodes); else it is reset */
    /* Metadata fields a /status write keeps as they were, as the kind's upstream status
     * strategy resets them (pods: ownerReferences; deployments: labels); the rest of metadata
     * is the writer's, name, uid and timestamps aside. */
    const char *status_keeps_meta[2];
    bool no_deletecollection; /* DELETE of the collection is not served (namespaces) */
    bool delete_returns_object; /* DELETE answers with the object (pods, namespaces), else a Status */
    bool encrypted;           /* stored encrypted at rest (secrets) */
    bool gc_owner;            /* owns dependents the garbage collector watches (its KITE_GC_KINDS): a
                                 DELETE with propagationPolicy Foreground or Orphan holds it with that
                                 finalizer; other kinds go at once, as with Background */
    enum kite_name_rule name_rule;
    const struct kite_smp_schema *smp;
    const struct kite_table_printer *table; /* NULL: the default Name/Age printer */
    /* Other writable subresources beyond status ({NULL}-terminated; may be NULL). */
    const struct kite_subresource *subresources;
    /* Objects created at startup when missing (cluster-scoped kinds; NULL-terminated names)
     * and names no DELETE may remove. */
    const char *const *bootstrap;
    const char *const *undeletable;
    /* The typed schema request bodies and patch results must decode by (schema.h); a
     * failure is 400 BadRequest, as kube-apiserver's decoder error. */
    const struct kite_schema *schema;
    /* Field selector fields beyond metadata.name / metadata.namespace (NULL-terminated). */
    const char *const *fields;
    /* Kind-specific hooks, all optional. obj/old are borrowed. */
    void (*defaults)(json_object *obj);
    void (*validate)(json_object *obj, json_object *old, struct kite_causes *causes);
    /* Graceful deletion beyond metadata.finalizers: true while the kind's own finalizers
     * still hold the object (a namespace's spec.finalizers). */
    bool (*finalizing)(json_object *obj);
    /* Called on an object a DELETE leaves in place, terminating (a namespace's phase). */
    void (*terminating)(json_object *obj);
    /* Graceful deletion (pods): the grace period in seconds a DELETE gives obj, from the
     * request's DeleteOptions.gracePeriodSeconds (`requested`, or -1 when it gave none). 0
     * deletes at once; more marks the object (deletionTimestamp = now + grace,
     * deletionGracePeriodSeconds = grace) and it stays until a DELETE with a shorter grace
     * ends it sooner, one with grace 0 removing it (its node agent confirming the end). */
    int64_t (*delete_grace)(json_object *obj, int64_t requested);
    /* Defaults the DefaultTolerationSeconds admission plugin applies on create (pods: the
     * not-ready and unreachable NoExecute tolerations, each for the given seconds). */
    void (*default_tolerations)(json_object *obj, int64_t not_ready_s, int64_t unreachable_s);
    /* Where the kind holds a pod (its metadata and spec) for the PodSecurity admission plugin:
     * "" = the object is the pod (pods), "spec.template" = a pod template (workloads); NULL: none. */
    const char *pod_template;
    /* Objects of kinds with this hook expire: deleted once the wall time it returns (when the
     * object last happened, ns) is older than the event TTL (events). */
    int64_t (*last_seen)(json_object *obj);
    /* A kind that is never stored (access reviews): only POST of the collection is served
     * (verb create), and it answers 201 with obj, the decoded and schema-checked body, as the
     * hook fills it in place. Returns 0; 422 with causes added (the kind's validation); or
     * 400 with *ret_msg (malloc'ed). */
    int (*evaluate)(json_object *obj, const struct kite_review_env *env, struct kite_causes *causes,
                    char **ret_msg);
    /* Allocated values (kite_pools above). allocate runs on create and update after the
     * defaults, before validation: it fills the values obj asks the server to choose (old: the
     * current object on update, whose values it keeps), takes the ones obj names that old did
     * not hold, and adds a cause for each it cannot have (422). held lists the values obj
     * holds (at most max) and returns their number; the server takes them as in use while obj
     * is stored. */
    void (*allocate)(json_object *obj, json_object *old, struct kite_pools *ps, struct kite_causes *causes);
    size_t (*held)(json_object *obj, struct kite_pool_value *out, size_t max);
    /* Converts between this group version's shape and the stored shape (events.k8s.io/v1 is
     * stored as core v1 Event). to_storage/from_storage edit obj in place. */
    void (*to_storage)(json_object *obj);
    void (*from_storage)(json_object *obj);
    /* spec.username, uid, groups and extra are the creating user's, whatever the body says
     * (CertificateSigningRequests: who asked is what the approver judges). */
    bool spec_requester;
};

/* All registered resources, NULL-terminated, in discovery order. */
extern const struct kite_resource *const kite_resources[];
/* The row that holds namespaces (routing, namespace lifecycle, bootstrap). */
const struct kite_resource *kite_registry_namespaces(void);
/* The subresource `name` of r ("status" when r has_status), or NULL. */
const struct kite_subresource *kite_resource_subresource(const struct kite_resource *r, const char *name);
/* sr is an action (POST) subresource. */
static inline bool kite_subresource_is_action(const struct kite_subresource *sr) { return sr && (sr->act || sr->deletes || sr->token); }

/* r's objects are kept in the store (every kind but the evaluated ones). */
static inline bool kite_resource_stored(const struct kite_resource *r) { return !r->evaluate; }

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

/* Random RFC 4122 v4 UUID. out must hold 37 bytes. */
void kite_uuid4(char out[37]);
