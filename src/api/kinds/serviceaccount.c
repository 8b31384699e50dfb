/* ServiceAccount (core/v1): an identity for pods. */
#include "api/kinds/kind.h"

STRUCT(sa_local_ref, "LocalObjectReference", F(1, "name", S));
LIST(sa_local_refs, NULL, sa_local_ref);
LIST(sa_secrets, NULL, kite_schema_object_ref);
ROOT_DOC(kite_schema_serviceaccount, "ServiceAccount",
    "ServiceAccount binds together: * a name, understood by users, and perhaps by peripheral systems, for an identity * a principal that can be authenticated and authorized * a set of secrets", TYPE_META, F(2, "secrets", sa_secrets),
     F(3, "imagePullSecrets", sa_local_refs), FK(4, "automountServiceAccountToken", B));

/* authentication.k8s.io/v1 TokenRequest, the body of serviceaccounts/token */
STRUCT(tr_bound_ref, "BoundObjectReference", F(1, "kind", S), F(2, "apiVersion", S), F(3, "name", S), F(4, "uid", S));
STRUCT(tr_spec, "TokenRequestSpec", F(1, "audiences", SLIST), FK(4, "expirationSeconds", I64),
       F(3, "boundObjectRef", tr_bound_ref));
STRUCT(tr_status, "TokenRequestStatus", F(1, "token", S), FK(2, "expirationTimestamp", T));
ROOT(kite_schema_token_request, "TokenRequest", TYPE_META, F(2, "spec", tr_spec), F(3, "status", tr_status));

static const struct kite_subresource subresources[] = {
    {.name = "token", .body_group = "authentication.k8s.io", .body_version = "v1", .body_kind = "TokenRequest",
     .body_schema = &kite_schema_token_request, .token = true},
    {0},
};

/* printServiceAccount: how many secrets it lists */
static json_object *sa_secret_count(const struct kite_table_row *r) { return json_object_new_int64((int64_t)arr_len(OBJ(r->obj, "secrets"))); }
static const struct kite_table_column sa_cols[] = {
    COL_NAME,
    {"Secrets", sa_secret_count, "string", "",
     "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed "
     "to use. Pods are only limited to this list if this service account has a "
     "\"kubernetes.io/enforce-mountable-secrets\" annotation set to \"true\". The "
     "\"kubernetes.io/enforce-mountable-secrets\" annotation is deprecated since v1.32. Prefer separate namespaces to "
     "isolate access to mounted secrets. This field should not be used to find auto-generated service account token "
     "secrets for use outside of pods. Instead, tokens can be requested directly using the TokenRequest API, or "
     "service account token secrets can be manually created. More info: "
     "https://kubernetes.io/docs/concepts/configuration/secret",
     0},
    COL_AGE,
};
static const struct kite_table_printer printer = TABLE_PRINTER(sa_cols);

const struct kite_resource kite_kind_serviceaccount = {
    .schema = &kite_schema_serviceaccount,
    KITE_CORE_V1, .kind = "ServiceAccount", .list_kind = "ServiceAccountList", .plural = "serviceaccounts",
    .singular = "serviceaccount", .short_names = {"sa"}, .namespaced = true, .unconditional_update = true,
    .smp = &kite_meta_smp_schema, .subresources = subresources, .table = &printer,
};
