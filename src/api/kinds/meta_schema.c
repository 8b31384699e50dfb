/* The typed schemas every kind shares: metav1.ObjectMeta and v1.ObjectReference, and the meta/v1
 * messages that travel around objects (ListMeta, Status, DeleteOptions). Field numbers from
 * k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto and k8s.io/api/core/v1/generated.proto. */
#include "api/kinds/kind.h"

/* ---- metav1.ObjectMeta --------------------------------------------------------------------- */
STRUCT(owner_ref, "OwnerReference", FR(5, "apiVersion", S), FR(1, "kind", S), FR(3, "name", S), FR(4, "uid", S),
    FK(6, "controller", B), FK(7, "blockOwnerDeletion", B));
LIST(owner_refs, NULL, owner_ref);
STRUCT(managed_entry, "ManagedFieldsEntry", F(1, "manager", S), F(2, "operation", S), F(3, "apiVersion", S),
    F(4, "time", T), F(6, "fieldsType", S), F(7, "fieldsV1", FV1), F(8, "subresource", S));
LIST(managed_fields, NULL, managed_entry);
ROOT_DOC(kite_schema_object_meta, "ObjectMeta",
    "ObjectMeta is metadata that all persisted resources must have, which includes all objects users must create.", F(1, "name", S), F(2, "generateName", S), F(3, "namespace", S),
    F(4, "selfLink", S), F(5, "uid", S), F(6, "resourceVersion", S), F(7, "generation", I64),
    F(8, "creationTimestamp", T), F(9, "deletionTimestamp", T), FK(10, "deletionGracePeriodSeconds", I64),
    F(11, "labels", SMAP), F(12, "annotations", SMAP), F(13, "ownerReferences", owner_refs),
    F(14, "finalizers", SLIST), F(17, "managedFields", managed_fields));

ROOT(kite_schema_object_ref, "ObjectReference", F(1, "kind", S), F(2, "namespace", S), F(3, "name", S),
    F(4, "uid", S), F(5, "apiVersion", S), F(6, "resourceVersion", S), F(7, "fieldPath", S));

/* ---- metav1.ListMeta, Status, DeleteOptions ------------------------------------------------- */
ROOT(kite_schema_list_meta, "ListMeta", F(1, "selfLink", S), F(2, "resourceVersion", S), F(3, "continue", S),
    FK(4, "remainingItemCount", I64));
ROOT(kite_schema_partial_object_metadata, "PartialObjectMetadata", TYPE_META);
STRUCT(status_cause, "StatusCause", F(1, "reason", S), F(2, "message", S), F(3, "field", S));
LIST(status_causes, NULL, status_cause);
STRUCT(status_details, "StatusDetails", F(1, "name", S), F(2, "group", S), F(3, "kind", S), F(6, "uid", S),
    F(4, "causes", status_causes), F(5, "retryAfterSeconds", I32));
ROOT(kite_schema_status, "Status", F(0, "kind", S), F(0, "apiVersion", S), F(1, "metadata", kite_schema_list_meta),
    F(2, "status", S), F(3, "message", S), F(4, "reason", S), F(5, "details", status_details), F(6, "code", I32));
STRUCT(preconditions, "Preconditions", FK(1, "uid", S), FK(2, "resourceVersion", S));
ROOT(kite_schema_delete_options, "DeleteOptions", F(0, "kind", S), F(0, "apiVersion", S),
    FK(1, "gracePeriodSeconds", I64), F(2, "preconditions", preconditions), FK(3, "orphanDependents", B),
    FK(4, "propagationPolicy", S), F(5, "dryRun", SLIST), FK(6, "ignoreStoreReadErrorWithClusterBreakingPotential", B));
