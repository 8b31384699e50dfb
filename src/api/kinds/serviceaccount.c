/* ServiceAccount (core/v1): an identity for pods. */
#include "api/kinds/kind.h"

STRUCT(sa_local_ref, "LocalObjectReference", F(1, "name", S));
LIST(sa_local_refs, NULL, sa_local_ref);
LIST(sa_secrets, NULL, kite_schema_object_ref);
ROOT_DOC(kite_schema_serviceaccount, "ServiceAccount",
    "ServiceAccount binds together: * a name, understood by users, and perhaps by peripheral systems, for an identity * a principal that can be authenticated and authorized * a set of secrets", TYPE_META, F(2, "secrets", sa_secrets),
     F(3, "imagePullSecrets", sa_local_refs), FK(4, "automountServiceAccountToken", B));

const struct kite_resource kite_kind_serviceaccount = {
    .schema = &kite_schema_serviceaccount,
    KITE_CORE_V1, .kind = "ServiceAccount", .list_kind = "ServiceAccountList", .plural = "serviceaccounts",
    .singular = "serviceaccount", .short_names = {"sa"}, .namespaced = true, .unconditional_update = true,
    .smp = &kite_meta_smp_schema,
};
