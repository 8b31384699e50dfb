/* ControllerRevision (apps/v1): an immutable snapshot of a controller's template, as the
 * StatefulSet controller writes them (src/controllers/statefulset.c) and kubectl rollout
 * history/undo reads them. Schema (k8s.io/api apps/v1 generated.proto), validation
 * (ValidateControllerRevision, ValidateControllerRevisionUpdate) and kubectl's printer
 * (printControllerRevision). */
#include "api/kinds/kind.h"

ROOT_DOC(kite_schema_controllerrevision, "ControllerRevision",
         "ControllerRevision implements an immutable snapshot of state data. Clients are responsible for serializing "
         "and deserializing the objects that contain their internal state. Once a ControllerRevision has been "
         "successfully created, it can not be updated. The API Server will fail validation of all requests that "
         "attempt to mutate the Data field. ControllerRevisions may, however, be deleted. Note that, due to its use "
         "by both the DaemonSet and StatefulSet controllers for update and rollback, this object is beta. However, it "
         "may be subject to name and representation changes in future releases, and clients should not depend on its "
         "stability. It is primarily for internal use by controllers.",
         TYPE_META, F(2, "data", kite_schema_raw_extension), FR(3, "revision", I64));

static void cr_validate(json_object *obj, json_object *old, struct kite_causes *c) {
    json_object *data = kite_obj_get(obj, "data");
    if (!data || json_object_is_type(data, json_type_null))
        kite_causes_add(c, "FieldValueRequired", "data", "Required value");
    int64_t rev = int_of(kite_obj_get(obj, "revision"));
    if (rev < 0)
        kite_causes_add(c, "FieldValueInvalid", "revision", "Invalid value: %lld: must be greater than or equal to 0",
                        (long long)rev);
    if (old && !kite_json_equal(data, kite_obj_get(old, "data")))
        kite_causes_add(c, "FieldValueInvalid", "data", "Invalid value: %s: field is immutable",
                        data ? json_object_to_json_string_ext(data, JSON_C_TO_STRING_PLAIN) : "null");
}

/* formatResourceName of the controller's GroupKind: "statefulset.apps/web", "<none>" */
static json_object *cr_controller(const struct kite_table_row *r) {
    json_object *refs = OBJ(r->obj, "metadata", "ownerReferences");
    for (size_t i = 0; i < arr_len(refs); i++) {
        json_object *ref = json_object_array_get_idx(refs, i), *ctl = kite_obj_get(ref, "controller");
        if (!ctl || !json_object_get_boolean(ctl)) continue;
        const char *av = str_of(kite_obj_get(ref, "apiVersion")), *slash = strchr(av, '/');
        struct kite_buf b = {0};
        for (const char *k = str_of(kite_obj_get(ref, "kind")); *k; k++) kite_buf_putc(&b, (char)tolower((unsigned char)*k));
        if (slash) kite_buf_printf(&b, ".%.*s", (int)(slash - av), av);
        kite_buf_printf(&b, "/%s", str_of(kite_obj_get(ref, "name")));
        json_object *s = json_object_new_string(b.p ? b.p : "");
        kite_buf_release(&b);
        return s;
    }
    return cell_str("<none>");
}

static json_object *cr_revision(const struct kite_table_row *r) { return json_object_new_int64(int_of(OBJ(r->obj, "revision"))); }

static const struct kite_table_column cr_cols[] = {
    COL_NAME,
    {"Controller", cr_controller, "string", "", "Controller of the object", 0},
    {"Revision", cr_revision, "number", "", "Revision of the ControllerRevision", 0},
    COL_AGE,
};
static const struct kite_table_printer printer = TABLE_PRINTER(cr_cols);

const struct kite_resource kite_kind_controllerrevision = {
    .schema = &kite_schema_controllerrevision,
    KITE_GROUP_VERSION("apps", "v1"), .kind = "ControllerRevision", .list_kind = "ControllerRevisionList",
    .plural = "controllerrevisions", .singular = "controllerrevision", .namespaced = true,
    .unconditional_update = true, .gc_owner = true, .smp = &kite_meta_smp_schema, .table = &printer,
    .validate = cr_validate,
};
