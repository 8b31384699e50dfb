/* Validation of names and ObjectMeta, with Kubernetes' messages and field paths so that
 * kubectl and client libraries show the same errors as against kube-apiserver. */
#pragma once
#include "base/base.h"

#include <json-c/json.h>

/* Limits from k8s.io/apimachinery validation. */
#define KITE_DNS1123_SUBDOMAIN_MAX 253
#define KITE_DNS1123_LABEL_MAX 63
#define KITE_QUALIFIED_NAME_MAX 63
#define KITE_LABEL_VALUE_MAX 63
#define KITE_ANNOTATIONS_TOTAL_MAX (256 * 1024)

/* One field error, as in a Kubernetes Status "causes" entry. All strings owned by the entry.
 * message is the whole error body as Kubernetes puts it in a cause (field.Error.ErrorBody()),
 * e.g. `Invalid value: "Foo": a lowercase RFC 1123 subdomain must ...` or
 * `Required value: name or generateName is required`.
 * reason: FieldValueInvalid, FieldValueRequired, FieldValueTooLong, FieldValueForbidden,
 * FieldValueDuplicate, FieldValueNotSupported */
struct kite_cause {
    char *reason;
    char *message;
    char *field;
};
/* A zeroed struct is a valid empty list. */
struct kite_causes {
    struct kite_cause *v;
    size_t n, cap;
};
/* Appends a cause; strings are copied, message formatted from fmt. */
void kite_causes_add(struct kite_causes *c, const char *reason, const char *field, const char *fmt, ...)
    KITE_PRINTF(4, 5);
/* Frees all entries and leaves c empty (reusable). */
void kite_causes_release(struct kite_causes *c);

/* Each check below also exists as *_errs(s, msgs): it stores Kubernetes' messages for why s
 * is invalid (static strings, at most KITE_NAME_ERRS_MAX) in msgs and returns their number
 * (0 = valid), in the order apimachinery's validation functions report them. */
#define KITE_NAME_ERRS_MAX 4
size_t kite_dns1123_subdomain_errs(const char *s, const char *msgs[KITE_NAME_ERRS_MAX]);
size_t kite_dns1123_label_errs(const char *s, const char *msgs[KITE_NAME_ERRS_MAX]);
size_t kite_qualified_name_errs(const char *s, const char *msgs[KITE_NAME_ERRS_MAX]);
/* DNS-1035 label (a Service's name): a DNS-1123 label starting with a letter. */
size_t kite_dns1035_label_errs(const char *s, const char *msgs[KITE_NAME_ERRS_MAX]);
size_t kite_label_value_errs(const char *s, const char *msgs[KITE_NAME_ERRS_MAX]);
/* path.IsValidPathSegmentName (RBAC names): not "." or "..", no '/' or '%'. */
size_t kite_path_segment_errs(const char *s, const char *msgs[KITE_NAME_ERRS_MAX]);

/* ≤253, lowercase RFC 1123 subdomain. */
bool kite_is_dns1123_subdomain(const char *s);
/* ≤63, lowercase RFC 1123 label. */
bool kite_is_dns1123_label(const char *s);
/* Label key (optional DNS-subdomain prefix + '/' + name ≤63 [A-Za-z0-9_.-], alnum at ends).
 * Also used for annotation keys and finalizers. */
bool kite_is_qualified_name(const char *s);
/* ≤63, may be empty; otherwise [A-Za-z0-9_.-] with alnum at ends. */
bool kite_is_label_value(const char *s);

/* Adds one FieldValueInvalid cause per message, as field.Invalid(path, value, msg) does:
 * message `Invalid value: "<value>": <msg>`. For callers validating other fields the same
 * way (e.g. spec.nodeName with kite_dns1123_subdomain_errs). */
void kite_causes_add_invalid(struct kite_causes *c, const char *field, const char *value,
                             const char *const *msgs, size_t n);
/* The aggregated text of all causes as Kubernetes prints a field.ErrorList:
 * "<field>: <message>" for one cause, "[<a>, <b>]" for several. Malloc'ed; "" when empty. */
char *kite_causes_summary(const struct kite_causes *c);

/* Validates metadata (borrowed; NULL is treated as {}) of an object being created/updated:
 * name (per name_rule: 0 = DNS-1123 subdomain, 1 = DNS-1123 label, 3 = DNS-1035 label; name or generateName is
 * required), namespace (required iff namespaced, forbidden otherwise), labels, annotations
 * (keys qualified names; total annotation size ≤ 256 KiB), generateName, finalizers
 * (qualified names), generation ≥ 0. Adds causes with Kubernetes' field paths and messages
 * (e.g. field "metadata.name", message `Invalid value: "Foo": a lowercase RFC 1123 subdomain
 * must consist of ...`). As upstream, run it after generating the name from generateName:
 * a generateName-only meta reports metadata.name as required. */
void kite_validate_object_meta(json_object *meta, bool namespaced, int name_rule, struct kite_causes *causes);
