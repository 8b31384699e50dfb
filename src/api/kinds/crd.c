/* CustomResourceDefinition (apiextensions.k8s.io/v1), served read-only: kite has no custom
 * resources, so the collection is always empty and writes are refused (405). Clients ask for it
 * before they act: kubectl's field validation lists CRDs to tell a custom kind from a built-in
 * one it found no PATCH for (the access reviews), and fails when the list is not served. */
#include "api/kinds/kind.h"

ROOT_DOC(kite_schema_crd, "CustomResourceDefinition",
         "CustomResourceDefinition represents a resource that should be exposed on the API server.  Its name MUST be "
         "in the format <.spec.name>.<.spec.group>.",
         TYPE_META, F(2, "spec", RAW), F(3, "status", RAW));

const struct kite_resource kite_kind_crd = {
    .schema = &kite_schema_crd,
    KITE_GROUP_VERSION("apiextensions.k8s.io", "v1"), .kind = "CustomResourceDefinition",
    .list_kind = "CustomResourceDefinitionList", .plural = "customresourcedefinitions",
    .singular = "customresourcedefinition", .short_names = {"crd", "crds"}, .categories = {"api-extensions"},
    .read_only = true, .smp = &kite_meta_smp_schema,
};
