/* Kubernetes Status objects (metav1.Status), the body of every API error. */
#pragma once
#include "api/validation.h"

/* Builds a compact JSON Status: {"kind":"Status","apiVersion":"v1","metadata":{},
 * "status":"Failure","message":..,"reason":..,"details":{"name":..,"group":..,"kind":..,
 * "causes":[{"reason":..,"message":..,"field":..}]},"code":..}.
 * name/group/kind may be NULL (omitted); causes may be NULL or empty (omitted); details is
 * omitted when it would be empty; reason NULL = kite_status_reason_for(code); message NULL
 * is omitted. Returns a malloc'ed string. */
char *kite_status_failure(int code, const char *reason, const char *message, const char *name,
                          const char *group, const char *kind, const struct kite_causes *causes);
/* The 422 Invalid Status for a failed validation, as apierrors.NewInvalid builds it:
 * message `<Kind>[.<group>] "<name>" is invalid: <kite_causes_summary>`, reason "Invalid",
 * details {name, group, kind, causes}. group/name may be NULL or "" (omitted). Malloc'ed. */
char *kite_status_invalid(const char *group, const char *kind, const char *name, const struct kite_causes *causes);
/* {"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success","details":{"name":..,
 * "group":..,"kind":..,"uid":..}} as kube-apiserver returns for DELETE of a resource without
 * a body to return. NULL fields are omitted; code is included when non-zero. Malloc'ed. */
char *kite_status_success(int code, const char *name, const char *group, const char *kind, const char *uid);
/* The 504 Timeout kube-apiserver answers to a read at a revision it does not have yet
 * (storage.NewTooLargeResourceVersionError): message "Timeout: Too large resource version: W,
 * current: C", details {causes [ResourceVersionTooLarge], retryAfterSeconds}. Malloc'ed. */
#define KITE_TOO_LARGE_RV_RETRY_S 1 /* upstream's resourceVersionTooHighRetrySeconds */
char *kite_status_too_large_rv(long long want, long long current);
/* Reason for an HTTP code: 400 BadRequest, 401 Unauthorized, 403 Forbidden, 404 NotFound,
 * 405 MethodNotAllowed, 406 NotAcceptable, 409 Conflict (AlreadyExists is passed explicitly),
 * 410 Expired, 413 RequestEntityTooLarge, 415 UnsupportedMediaType, 422 Invalid,
 * 429 TooManyRequests, 500 InternalError, 503 ServiceUnavailable, 504 Timeout;
 * "" for other codes. Static string. */
const char *kite_status_reason_for(int code);
/* The 422 a strategic merge patch gets when its result does not decode into the kind
 * (kube-apiserver's applyPatchToObject): NewInvalid(GroupKind{}, "", patch: Invalid value:
 * fmt.Sprintf("%+v", patchMap), err), so the message is ` "" is invalid: patch: Invalid
 * value: "map[metadata:map[labels:x]]": cannot restore map from string`. Malloc'ed. */
char *kite_status_patch_invalid(json_object *patch, const char *err);
