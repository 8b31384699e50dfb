/* Lease (coordination.k8s.io/v1): node heartbeats in kube-node-lease, leader election. */
#include "api/kinds/kind.h"

/* ---- coordination.k8s.io/v1 Lease ------------------------------------------------------------ */
STRUCT(lease_spec, "LeaseSpec", FK(1, "holderIdentity", S), FK(2, "leaseDurationSeconds", I32), F(3, "acquireTime", MT),
    F(4, "renewTime", MT), FK(5, "leaseTransitions", I32), FK(6, "strategy", S), FK(7, "preferredHolder", S));
ROOT_DOC(kite_schema_lease, "Lease",
    "Lease defines a lease concept.", TYPE_META, F(2, "spec", lease_spec));

static void lease_validate(json_object *obj, json_object *old, struct kite_causes *c) {
    json_object *spec = kite_obj_get(obj, "spec");
    json_object *d = kite_obj_get(spec, "leaseDurationSeconds");
    if (d && (!json_object_is_type(d, json_type_int) || json_object_get_int64(d) <= 0))
        kite_causes_add(c, "FieldValueInvalid", "spec.leaseDurationSeconds", "Invalid value: %s: must be greater than 0",
                        json_object_to_json_string(d));
    json_object *t = kite_obj_get(spec, "leaseTransitions");
    if (t && (!json_object_is_type(t, json_type_int) || json_object_get_int64(t) < 0))
        kite_causes_add(c, "FieldValueInvalid", "spec.leaseTransitions", "Invalid value: %s: must be greater than or equal to 0",
                        json_object_to_json_string(t));
}

static json_object *lease_holder(const struct kite_table_row *r) { return cell_str(STR(r->obj, "spec", "holderIdentity")); }

static const struct kite_table_column lease_cols[] = {
    COL_NAME,
    {"Holder", lease_holder, "string", "",
     "holderIdentity contains the identity of the holder of a current lease. If Coordinated Leader Election is "
     "used, the holder identity must be equal to the elected LeaseCandidate.metadata.name field.",
     0},
    COL_AGE,
};
static const struct kite_table_printer printer = TABLE_PRINTER(lease_cols);

const struct kite_resource kite_kind_lease = {
    .schema = &kite_schema_lease,
    KITE_GROUP_VERSION("coordination.k8s.io", "v1"), .kind = "Lease", .list_kind = "LeaseList", .plural = "leases",
    .singular = "lease", .namespaced = true, .unconditional_update = true, .status_on_create = true,
    .smp = &kite_meta_smp_schema, .table = &printer, .validate = lease_validate,
};
