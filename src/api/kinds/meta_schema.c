/* The typed schemas every kind shares: metav1.ObjectMeta and v1.ObjectReference. */
#include "api/kinds/kind.h"

/* ---- metav1.ObjectMeta --------------------------------------------------------------------- */
STRUCT(owner_ref, "OwnerReference", F("apiVersion", S), F("kind", S), F("name", S), F("uid", S),
    F("controller", B), F("blockOwnerDeletion", B));
LIST(owner_refs, NULL, owner_ref);
STRUCT(managed_entry, "ManagedFieldsEntry", F("manager", S), F("operation", S), F("apiVersion", S), F("time", T),
    F("fieldsType", S), F("fieldsV1", RAW), F("subresource", S));
LIST(managed_fields, NULL, managed_entry);
ROOT(kite_schema_object_meta, "ObjectMeta", F("name", S), F("generateName", S), F("namespace", S), F("selfLink", S),
    F("uid", S), F("resourceVersion", S), F("generation", I64), F("creationTimestamp", T),
    F("deletionTimestamp", T), F("deletionGracePeriodSeconds", I64), F("labels", SMAP), F("annotations", SMAP),
    F("ownerReferences", owner_refs), F("finalizers", SLIST), F("managedFields", managed_fields));

ROOT(kite_schema_object_ref, "ObjectReference", F("kind", S), F("namespace", S), F("name", S), F("uid", S),
    F("apiVersion", S), F("resourceVersion", S), F("fieldPath", S));
