/* Typed schemas of the served kinds, and a checker that refuses what Kubernetes' decoder
 * refuses: a value of the wrong JSON type for its Go field, an integer out of its field's
 * range, a malformed time or quantity. kube-apiserver answers those 400 BadRequest before any
 * validation runs (the body cannot be decoded into the Go type); kite stores JSON, so without
 * the check such values were stored and broke every typed client that listed them
 * (`kubectl describe node`, python3-kubernetes).
 *
 * A schema is a tree of static descriptors: an object lists its fields (JSON name and
 * schema), a map or list names its element. A field an object's schema does not list is
 * unknown: the check leaves it alone, and the write path drops it as Go's decoder does, with a
 * warning or a 400 (kite_schema_unknown_fields); an object that lists only part of its Go
 * fields says so (KITE_SCHEMA_PARTIAL) and keeps the rest. JSON null is accepted anywhere, as
 * Go's decoder leaves the field zero. The same schemas give the OpenAPI documents (openapi.h). The kinds' schemas are in their kind files (src/api/kinds/), hung off
 * their registry rows (kite_resource.schema). */
#pragma once
#include "base/base.h"

#include <json-c/json.h>

enum kite_schema_type {
    KITE_SCHEMA_RAW = 0,     /* any JSON (runtime.RawExtension, fieldsV1...) */
    KITE_SCHEMA_STRING,
    KITE_SCHEMA_INT32,
    KITE_SCHEMA_INT64,
    KITE_SCHEMA_BOOL,
    KITE_SCHEMA_FLOAT,       /* float64: any JSON number */
    KITE_SCHEMA_QUANTITY,    /* resource.Quantity: a string (or number) ParseQuantity takes */
    KITE_SCHEMA_TIME,        /* metav1.Time: RFC 3339, stored in UTC to the second */
    KITE_SCHEMA_MICROTIME,   /* metav1.MicroTime: RFC 3339, stored in UTC to the microsecond */
    KITE_SCHEMA_INT_OR_STRING, /* intstr.IntOrString: an int32 or a string */
    KITE_SCHEMA_BYTES,       /* []byte: a string in standard base64 with padding */
    KITE_SCHEMA_OBJECT,      /* a struct: fields */
    KITE_SCHEMA_MAP,         /* map[string]elem */
    KITE_SCHEMA_LIST,        /* []elem */
};

struct kite_schema_field;

struct kite_schema {
    enum kite_schema_type type;
    /* For messages, as Go's decoder names types: objects their struct ("LeaseSpec"), maps
     * and lists optionally their named type ("v1.ResourceList"; default built from elem). */
    const char *go_type;
    const struct kite_schema_field *fields; /* objects; ends with a {NULL} entry */
    const struct kite_schema *elem;         /* maps and lists */
    unsigned flags;                         /* KITE_SCHEMA_PARTIAL */
    const char *description;                /* OpenAPI's (kinds: what upstream says of the kind) */
};

/* Schema flags. */
#define KITE_SCHEMA_PARTIAL 1u /* an object that lists only some of its Go struct's fields: the
                                  others are neither unknown (kept, never warned about) nor
                                  described (OpenAPI marks it x-kubernetes-preserve-unknown-fields) */

/* Field flags. */
#define KITE_SCHEMA_KEEP_ZERO 1u /* a protobuf decode keeps a zero value instead of dropping it:
                                    Go's JSON writes the field even when zero (no omitempty), or
                                    the Go field is a pointer (a zero gracePeriodSeconds is data) */
#define KITE_SCHEMA_REQUIRED 2u  /* required in Kubernetes' OpenAPI (a Go field without omitempty
                                    that is not a pointer); implies KEEP_ZERO */
#define KITE_SCHEMA_INLINE 4u    /* a Go struct embedded inline (an EphemeralContainer's
                                    EphemeralContainerCommon): in JSON its fields are the parent's,
                                    in protobuf a message of their own at this field's number. Only
                                    the protobuf codec looks into it: its parent is
                                    KITE_SCHEMA_PARTIAL, for the other walkers */

struct kite_schema_field {
    const char *name;
    const struct kite_schema *schema;
    /* Field number in Kubernetes' generated.proto (k8s.io/api, k8s.io/apimachinery); 0: not in
     * the protobuf message (kind and apiVersion travel in the envelope). */
    unsigned number;
    unsigned flags;
};

/* The leaves, and compound types every kind shares. */
extern const struct kite_schema kite_schema_raw, kite_schema_string, kite_schema_int32, kite_schema_int64,
    kite_schema_bool, kite_schema_float, kite_schema_quantity, kite_schema_time, kite_schema_microtime,
    kite_schema_int_or_string, kite_schema_string_list, kite_schema_string_map, kite_schema_resource_list,
    kite_schema_bytes, kite_schema_bytes_map;
/* metav1.FieldsV1: any JSON, which protobuf carries as its text in a message {1: bytes} */
extern const struct kite_schema kite_schema_fields_v1;
/* runtime.RawExtension holding JSON (ControllerRevision.data): protobuf {1: raw}, as FieldsV1 */
extern const struct kite_schema kite_schema_raw_extension;

/* The served kinds' root schemas (src/api/kinds/). events.k8s.io/v1 Events are checked
 * in their own shape, before conversion to the stored core/v1 one. */
extern const struct kite_schema kite_schema_namespace, kite_schema_node, kite_schema_pod, kite_schema_event,
    kite_schema_event_v1, kite_schema_lease, kite_schema_configmap, kite_schema_secret, kite_schema_serviceaccount,
    kite_schema_csr, kite_schema_selfsubjectaccessreview, kite_schema_subjectaccessreview,
    kite_schema_localsubjectaccessreview, kite_schema_selfsubjectrulesreview, kite_schema_selfsubjectreview,
    kite_schema_role, kite_schema_clusterrole, kite_schema_rolebinding, kite_schema_clusterrolebinding,
    kite_schema_replicaset, kite_schema_deployment, kite_schema_service, kite_schema_endpointslice,
    kite_schema_endpoints;
extern const struct kite_schema kite_schema_pdb, kite_schema_eviction, kite_schema_token_request;
/* batch/v1 Job, apps/v1 DaemonSet */
extern const struct kite_schema kite_schema_job, kite_schema_daemonset;
/* v1 ReplicationController */
extern const struct kite_schema kite_schema_replicationcontroller;
/* apps/v1 StatefulSet */
extern const struct kite_schema kite_schema_statefulset;
extern const struct kite_schema kite_schema_controllerrevision;
/* autoscaling/v2 HorizontalPodAutoscaler */
extern const struct kite_schema kite_schema_hpa, kite_schema_hpa_v1;
/* batch/v1 CronJob */
extern const struct kite_schema kite_schema_cronjob;
/* meta/v1 messages that are not kinds of their own (meta_schema.c): a List's metadata, a
 * Status (errors and delete answers) and the DeleteOptions a delete may carry. */
extern const struct kite_schema kite_schema_list_meta, kite_schema_status, kite_schema_delete_options;
/* meta/v1 PartialObjectMetadata: {typeMeta, 1: metadata} (metadata-only reads) */
extern const struct kite_schema kite_schema_partial_object_metadata;

/* Checks obj (an object whose root follows s; s NULL checks only the strings) and puts
 * every value of a time field in the form Kubernetes serializes it (UTC; Time to the second,
 * MicroTime with six fractional digits, so Go clients, which parse MicroTime with exactly
 * six, read it back) and every quantity given as a JSON number as a string.
 * Also checks every string and object key in the whole tree, listed in s or not: it must be
 * well-formed UTF-8 and hold no NUL.
 * Returns 0, or -EINVAL with *ret_error (malloc'ed) the first error as Kubernetes' decoder
 * words it, e.g. `json: cannot unmarshal number 99999999999 into Go struct field
 * LeaseSpec.spec.leaseDurationSeconds of type int32`, `parsing time "garbage" as
 * "2006-01-02T15:04:05.000000Z07:00": cannot parse "garbage" as "2006"`, or `quantities
 * must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'`. */
int kite_schema_check(const struct kite_schema *s, json_object *obj, char **ret_error);
/* The same check, with a value of the wrong type worded as apimachinery's unstructured
 * converter words it (`cannot restore map from string`, `cannot restore struct from: slice`,
 * `unrecognized type: int32`, `cannot convert float64 to int32`): kube-apiserver decodes a
 * strategic merge patch's result with it rather than with encoding/json. A float with no
 * fraction is an integer to it. */
int kite_schema_check_unstructured(const struct kite_schema *s, json_object *obj, char **ret_error);

/* Fields of obj its schema s does not know (kube-apiserver's strict decoding: a field the Go
 * struct lacks). Objects flagged KITE_SCHEMA_PARTIAL and RAW values are not looked into.
 * Calls found(ud, path) for each, path as Kubernetes names it ("spec.foo",
 * "spec.containers[0].foo"), and deletes the field when drop (what Go's decoder keeps of it:
 * nothing). Returns how many were found. */
size_t kite_schema_unknown_fields(const struct kite_schema *s, json_object *obj, bool drop,
                                  void (*found)(void *ud, const char *path), void *ud);

