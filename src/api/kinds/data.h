/* What ConfigMaps and Secrets share: the keys of their data maps and the immutable flag
 * (k8s.io/kubernetes pkg/apis/core/validation: ValidateConfigMap, ValidateSecret). */
#pragma once
#include "api/kinds/kind.h"

/* Total size of the data a ConfigMap or Secret holds (corev1.MaxSecretSize). */
#define KITE_MAX_DATA_BYTES (1024 * 1024)

/* Checks the keys of map `field` of obj (IsConfigMapKey) and adds its values' sizes
 * (decoded=true: base64 values count their decoded length) to *total. */
void kite_data_keys_validate(json_object *obj, const char *field, bool decoded, size_t *total, struct kite_causes *c);
/* `immutable`: once true, it stays true and the fields listed (NULL-terminated) stay as they are. */
void kite_data_immutable_validate(json_object *obj, json_object *old, const char *const *fields, struct kite_causes *c);
