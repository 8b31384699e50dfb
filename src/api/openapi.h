/* OpenAPI documents of the served kinds, as kube-apiserver publishes them (/openapi/v2 in
 * Swagger 2.0, /openapi/v3/<group-version> in OpenAPI 3.0), derived from what each kind declares
 * once: its typed schema (schema.h: types, formats, required fields, Go type names), its
 * strategic-merge rules (patch strategy and merge key, list type and map keys) and its registry
 * row (group, version, kind, list kind, scope, paths and verbs). A kind added to the registry
 * gets its documents from these alone.
 *
 * Definitions are named as upstream's: the Go package's path reversed and the type
 * (io.k8s.api.core.v1.Node, io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta). */
#pragma once
#include "api/registry.h"

#include <json-c/json.h>

/* The v3 document of one group version (group "" for core/v1); NULL when none is served. */
json_object *kite_openapi_v3(const char *group, const char *version);
/* The v2 document of every served kind. */
json_object *kite_openapi_v2(void);
/* doc (kite_openapi_v2's, borrowed) as gnostic's openapi.v2.Document protobuf, appended to out:
 * what kube-apiserver serves for application/com.github.proto-openapi.spec.v2@v1.0+protobuf.
 * 0, or -EINVAL when doc is no object. */
struct kite_buf;
int kite_openapi_v2_protobuf(json_object *doc, struct kite_buf *out);
/* r's definition name, "io.k8s.api.core.v1.Node"; out holds 160 bytes. */
void kite_openapi_kind_name(const struct kite_resource *r, char out[160]);
