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

/* ≤253, lowercase RFC 1123 subdomain. */
bool kite_is_dns1123_subdomain(const char *s);
/* ≤63, lowercase RFC 1123 label. */
bool kite_is_dns1123_label(const char *s);
/* Label key (optional DNS-subdomain prefix + '/' + name ≤63 [A-Za-z0-9_.-], alnum at ends).
 * Also used for annotation keys and finalizers. */
bool kite_is_qualified_name(const char *s);
/* ≤63, may be empty; otherwise [A-Za-z0-9_.-] with alnum at ends. */
bool kite_is_label_value(const char *s);

/* Kubernetes' message texts, for callers that validate other fields the same way
 * (e.g. spec.nodeName). Static strings. */
extern const char KITE_DNS1123_SUBDOMAIN_MSG[];
extern const char KITE_DNS1123_LABEL_MSG[];

/* Validates metadata (borrowed; NULL is treated as {}) of an object being created/updated:
 * name (per name_rule: 0 = DNS-1123 subdomain, 1 = DNS-1123 label; name or generateName is
 * required), namespace (required iff namespaced, forbidden otherwise), labels, annotations
 * (keys qualified names; total annotation size ≤ 256 KiB), generateName, finalizers
 * (qualified names). Adds causes with Kubernetes' field paths and messages (e.g. field
 * "metadata.name", message `a lowercase RFC 1123 subdomain must consist of ...`). */
void kite_validate_object_meta(json_object *meta, bool namespaced, int name_rule, struct kite_causes *causes);
