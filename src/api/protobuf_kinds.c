/* The protobuf codec's view of the registry: which schema a kind's protobuf message follows.
 * Apart from protobuf.c so the codec links without the registry (the fuzz targets). */
#include "api/protobuf.h"
#include "api/registry.h"

#include <string.h>

const struct kite_schema *kite_pb_schema_for(const char *api_version, const char *kind, bool *ret_list) {
    *ret_list = false;
    if (!api_version || !kind) return NULL;
    if (strcmp(kind, "Status") == 0 && strcmp(api_version, "v1") == 0) return &kite_schema_status;
    /* metadata-only answers (as=PartialObjectMetadata(List)): {1: ObjectMeta}, and a list of them */
    if (strcmp(api_version, "meta.k8s.io/v1") == 0 || strcmp(api_version, "meta.k8s.io/v1beta1") == 0) {
        *ret_list = strcmp(kind, "PartialObjectMetadataList") == 0;
        return *ret_list || strcmp(kind, "PartialObjectMetadata") == 0 ? &kite_schema_partial_object_metadata : NULL;
    }
    for (size_t i = 0; kite_resources[i]; i++) {
        const struct kite_resource *r = kite_resources[i];
        if (strcmp(kite_resource_api_version(r), api_version) != 0) continue;
        if (strcmp(r->kind, kind) == 0) return r->schema;
        if (r->list_kind && strcmp(r->list_kind, kind) == 0) {
            *ret_list = true;
            return r->schema;
        }
    }
    return NULL;
}

int kite_pb_encode_any(json_object *obj, struct kite_buf *out) {
    if (!json_object_is_type(obj, json_type_object)) return -ENOTSUP;
    json_object *kind = json_object_object_get(obj, "kind"), *av = json_object_object_get(obj, "apiVersion");
    if (!json_object_is_type(kind, json_type_string) || !json_object_is_type(av, json_type_string)) return -ENOTSUP;
    bool list;
    const struct kite_schema *s = kite_pb_schema_for(json_object_get_string(av), json_object_get_string(kind), &list);
    return s ? kite_pb_encode(s, list, obj, out) : -ENOTSUP;
}
