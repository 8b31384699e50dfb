/* Name and ObjectMeta validation, transcribed from k8s.io/apimachinery/pkg/util/validation
 * and pkg/api/validation/objectmeta.go. The messages are Kubernetes' own, word for word
 * (including the doubled spaces in "'MyName',  or"), because kubectl and client tests show
 * them to users and compare them. Regexes are matched by hand: each is a simple character
 * class with alphanumeric ends. */
#include "api/validation.h"
#include "api/internal.h"
#include "base/buf.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>

#define DNS1123_LABEL_FMT "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
#define DNS1123_SUBDOMAIN_FMT DNS1123_LABEL_FMT "(\\." DNS1123_LABEL_FMT ")*"
#define QUALIFIED_NAME_FMT "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
#define QUALIFIED_NAME_ERR "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
#define SUBDOMAIN_MSG                                                                                          \
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must " \
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '"        \
    DNS1123_SUBDOMAIN_FMT "')"
#define LABEL_MSG                                                                                           \
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start " \
    "and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '" \
    DNS1123_LABEL_FMT "')"
#define QNAME_REGEX_MSG \
    QUALIFIED_NAME_ERR " (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '" QUALIFIED_NAME_FMT "')"
#define LABEL_VALUE_MSG                                                                                       \
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must " \
    "start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used " \
    "for validation is '(" QUALIFIED_NAME_FMT ")?')"

static bool lower_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
static bool any_alnum(char c) { return isascii((unsigned char)c) && isalnum((unsigned char)c); }

/* [a-z0-9]([-a-z0-9]*[a-z0-9])? over s[0..n). */
static bool match_label(const char *s, size_t n) {
    if (n == 0 || !lower_alnum(s[0]) || !lower_alnum(s[n - 1])) return false;
    for (size_t i = 0; i < n; i++)
        if (!lower_alnum(s[i]) && s[i] != '-') return false;
    return true;
}

static bool match_subdomain(const char *s, size_t n) {
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i == n || s[i] == '.') {
            if (!match_label(s + start, i - start)) return false;
            start = i + 1;
        }
    }
    return true;
}

/* ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9] over s[0..n). */
static bool match_qname(const char *s, size_t n) {
    if (n == 0 || !any_alnum(s[0]) || !any_alnum(s[n - 1])) return false;
    for (size_t i = 0; i < n; i++)
        if (!any_alnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.') return false;
    return true;
}

size_t kite_dns1123_subdomain_errs(const char *s, const char *msgs[KITE_NAME_ERRS_MAX]) {
    size_t n = 0, len = strlen(s);
    if (len > KITE_DNS1123_SUBDOMAIN_MAX) msgs[n++] = "must be no more than 253 characters";
    if (!match_subdomain(s, len)) msgs[n++] = SUBDOMAIN_MSG;
    return n;
}

size_t kite_path_segment_errs(const char *s, const char *msgs[KITE_NAME_ERRS_MAX]) {
    size_t n = 0;
    if (strcmp(s, ".") == 0) msgs[n++] = "may not be '.'";
    else if (strcmp(s, "..") == 0) msgs[n++] = "may not be '..'";
    if (strchr(s, '/')) msgs[n++] = "may not contain '/'";
    if (strchr(s, '%')) msgs[n++] = "may not contain '%'";
    return n;
}

size_t kite_dns1123_label_errs(const char *s, const char *msgs[KITE_NAME_ERRS_MAX]) {
    size_t n = 0, len = strlen(s);
    if (len > KITE_DNS1123_LABEL_MAX) msgs[n++] = "must be no more than 63 characters";
    if (!match_label(s, len)) {
        /* A valid subdomain that is not a label can only be failing on its dots. */
        msgs[n++] = match_subdomain(s, len) ? "must not contain dots" : LABEL_MSG;
    }
    return n;
}

#define DNS1035_LABEL_MSG                                                                                   \
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "   \
    "character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for "       \
    "validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"

size_t kite_dns1035_label_errs(const char *s, const char *msgs[KITE_NAME_ERRS_MAX]) {
    size_t n = 0, len = strlen(s);
    if (len > KITE_DNS1123_LABEL_MAX) msgs[n++] = "must be no more than 63 characters";
    if (!match_label(s, len) || !(s[0] >= 'a' && s[0] <= 'z')) msgs[n++] = DNS1035_LABEL_MSG;
    return n;
}

size_t kite_qualified_name_errs(const char *s, const char *msgs[KITE_NAME_ERRS_MAX]) {
    size_t n = 0;
    const char *slash = strchr(s, '/');
    const char *name = s;
    if (slash && strchr(slash + 1, '/')) {
        msgs[n++] = "a qualified name " QNAME_REGEX_MSG " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')";
        return n;
    }
    if (slash) {
        size_t plen = (size_t)(slash - s);
        if (plen == 0) {
            msgs[n++] = "prefix part must be non-empty";
        } else {
            if (plen > KITE_DNS1123_SUBDOMAIN_MAX) msgs[n++] = "prefix part must be no more than 253 characters";
            if (!match_subdomain(s, plen)) msgs[n++] = "prefix part " SUBDOMAIN_MSG;
        }
        name = slash + 1;
    }
    size_t nlen = strlen(name);
    if (nlen == 0)
        msgs[n++] = "name part must be non-empty";
    else if (nlen > KITE_QUALIFIED_NAME_MAX)
        msgs[n++] = "name part must be no more than 63 characters";
    if (!match_qname(name, nlen)) msgs[n++] = "name part " QNAME_REGEX_MSG;
    return n;
}

size_t kite_label_value_errs(const char *s, const char *msgs[KITE_NAME_ERRS_MAX]) {
    size_t n = 0, len = strlen(s);
    if (len > KITE_LABEL_VALUE_MAX) msgs[n++] = "must be no more than 63 characters";
    if (len > 0 && !match_qname(s, len)) msgs[n++] = LABEL_VALUE_MSG;
    return n;
}

bool kite_is_dns1123_subdomain(const char *s) {
    const char *m[KITE_NAME_ERRS_MAX];
    return s && kite_dns1123_subdomain_errs(s, m) == 0;
}
bool kite_is_dns1123_label(const char *s) {
    const char *m[KITE_NAME_ERRS_MAX];
    return s && kite_dns1123_label_errs(s, m) == 0;
}
bool kite_is_qualified_name(const char *s) {
    const char *m[KITE_NAME_ERRS_MAX];
    return s && kite_qualified_name_errs(s, m) == 0;
}
bool kite_is_label_value(const char *s) {
    const char *m[KITE_NAME_ERRS_MAX];
    return s && kite_label_value_errs(s, m) == 0;
}

void kite_api_go_quote(struct kite_buf *b, const char *s) {
    kite_buf_putc(b, '"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': kite_buf_puts(b, "\\\""); break;
        case '\\': kite_buf_puts(b, "\\\\"); break;
        case '\n': kite_buf_puts(b, "\\n"); break;
        case '\t': kite_buf_puts(b, "\\t"); break;
        case '\r': kite_buf_puts(b, "\\r"); break;
        case '\a': kite_buf_puts(b, "\\a"); break;
        case '\b': kite_buf_puts(b, "\\b"); break;
        case '\f': kite_buf_puts(b, "\\f"); break;
        case '\v': kite_buf_puts(b, "\\v"); break;
        default:
            if (*p < 0x20 || *p == 0x7f)
                kite_buf_printf(b, "\\x%02x", *p);
            else
                kite_buf_putc(b, (char)*p);
        }
    }
    kite_buf_putc(b, '"');
}

/* ---- causes ---- */

void kite_causes_add(struct kite_causes *c, const char *reason, const char *field, const char *fmt, ...) {
    if (c->n == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 4;
        c->v = kite_realloc(c->v, c->cap * sizeof(*c->v));
    }
    struct kite_buf m = {0};
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (len > 0) {
        kite_buf_grow(&m, (size_t)len);
        va_start(ap, fmt);
        vsnprintf(m.p, (size_t)len + 1, fmt, ap);
        va_end(ap);
        m.len = (size_t)len;
    }
    c->v[c->n++] = (struct kite_cause){
        .reason = kite_strdup(reason ? reason : ""),
        .message = kite_buf_detach(&m, NULL),
        .field = kite_strdup(field ? field : ""),
    };
}

void kite_causes_release(struct kite_causes *c) {
    for (size_t i = 0; i < c->n; i++) {
        free(c->v[i].reason);
        free(c->v[i].message);
        free(c->v[i].field);
    }
    free(c->v);
    *c = (struct kite_causes){0};
}

void kite_causes_add_invalid(struct kite_causes *c, const char *field, const char *value,
                             const char *const *msgs, size_t n) {
    if (n == 0) return; /* valid: nothing to quote (this runs for every name of every write) */
    struct kite_buf q = {0};
    kite_api_go_quote(&q, value);
    for (size_t i = 0; i < n; i++) kite_causes_add(c, "FieldValueInvalid", field, "Invalid value: %s: %s", q.p, msgs[i]);
    kite_buf_release(&q);
}

char *kite_causes_summary(const struct kite_causes *c) {
    struct kite_buf b = {0};
    if (c->n > 1) kite_buf_putc(&b, '[');
    for (size_t i = 0; i < c->n; i++) {
        if (i) kite_buf_puts(&b, ", ");
        kite_buf_printf(&b, "%s: %s", c->v[i].field, c->v[i].message);
    }
    if (c->n > 1) kite_buf_putc(&b, ']');
    return kite_buf_detach(&b, NULL);
}

/* ---- ObjectMeta ---- */

static const char *meta_str(json_object *meta, const char *key) {
    json_object *v;
    if (!meta || !json_object_object_get_ex(meta, key, &v) || !json_object_is_type(v, json_type_string)) return "";
    return json_object_get_string(v);
}

/* Kubernetes' generateName rule: the prefix may end in '-' (a suffix is appended). */
static void validate_name_value(struct kite_causes *c, const char *field, const char *value, int name_rule, bool prefix) {
    const char *msgs[KITE_NAME_ERRS_MAX];
    _cleanup_free_ char *masked = NULL;
    const char *v = value;
    size_t len = strlen(value);
    if (prefix && len > 0 && value[len - 1] == '-') {
        masked = kite_strdup(value);
        masked[len - 1] = 'a';
        v = masked;
    }
    size_t n = name_rule == 3   ? kite_dns1035_label_errs(v, msgs)
               : name_rule == 2 ? kite_path_segment_errs(v, msgs)
               : name_rule == 1 ? kite_dns1123_label_errs(v, msgs)
                                : kite_dns1123_subdomain_errs(v, msgs);
    kite_causes_add_invalid(c, field, value, msgs, n);
}

/* Labels and annotations must be objects of strings; json-c documents can hold anything,
 * where Go's decoder would have refused the request. */
static json_object *string_map(json_object *meta, const char *key, const char *field, struct kite_causes *c) {
    json_object *m;
    if (!meta || !json_object_object_get_ex(meta, key, &m) || json_object_is_type(m, json_type_null)) return NULL;
    if (!json_object_is_type(m, json_type_object)) {
        kite_causes_add(c, "FieldValueInvalid", field, "Invalid value: %s: must be a map of string keys to string values",
                        json_type_to_name(json_object_get_type(m)));
        return NULL;
    }
    json_object_object_foreach(m, k, v) {
        if (!json_object_is_type(v, json_type_string)) {
            kite_causes_add(c, "FieldValueInvalid", field, "Invalid value: %s: value of key \"%s\" must be a string",
                            json_type_to_name(json_object_get_type(v)), k);
            return NULL;
        }
    }
    return m;
}

static void validate_labels(json_object *meta, struct kite_causes *c) {
    json_object *labels = string_map(meta, "labels", "metadata.labels", c);
    if (!labels) return;
    json_object_object_foreach(labels, k, v) {
        const char *msgs[KITE_NAME_ERRS_MAX];
        size_t n = kite_qualified_name_errs(k, msgs);
        kite_causes_add_invalid(c, "metadata.labels", k, msgs, n);
        n = kite_label_value_errs(json_object_get_string(v), msgs);
        kite_causes_add_invalid(c, "metadata.labels", json_object_get_string(v), msgs, n);
    }
}

static void validate_annotations(json_object *meta, struct kite_causes *c) {
    json_object *ann = string_map(meta, "annotations", "metadata.annotations", c);
    if (!ann) return;
    size_t total = 0;
    json_object_object_foreach(ann, k, v) {
        /* Annotation keys are qualified names compared case-insensitively. */
        _cleanup_free_ char *lower = kite_strdup(k);
        for (char *p = lower; *p; p++) *p = (char)tolower((unsigned char)*p);
        const char *msgs[KITE_NAME_ERRS_MAX];
        size_t n = kite_qualified_name_errs(lower, msgs);
        kite_causes_add_invalid(c, "metadata.annotations", k, msgs, n);
        total += strlen(k) + (size_t)json_object_get_string_len(v);
    }
    if (total > KITE_ANNOTATIONS_TOTAL_MAX)
        kite_causes_add(c, "FieldValueTooLong", "metadata.annotations", "Too long: may not be more than %d bytes",
                        KITE_ANNOTATIONS_TOTAL_MAX);
}

static void validate_finalizers(json_object *meta, struct kite_causes *c) {
    json_object *f;
    if (!meta || !json_object_object_get_ex(meta, "finalizers", &f) || json_object_is_type(f, json_type_null)) return;
    if (!json_object_is_type(f, json_type_array)) {
        kite_causes_add(c, "FieldValueInvalid", "metadata.finalizers", "Invalid value: %s: must be a list of strings",
                        json_type_to_name(json_object_get_type(f)));
        return;
    }
    bool orphan = false, foreground = false;
    for (size_t i = 0; i < json_object_array_length(f); i++) {
        json_object *e = json_object_array_get_idx(f, i);
        if (!json_object_is_type(e, json_type_string)) {
            kite_causes_add(c, "FieldValueInvalid", "metadata.finalizers", "Invalid value: %s: must be a string",
                            json_type_to_name(json_object_get_type(e)));
            continue;
        }
        const char *name = json_object_get_string(e);
        const char *msgs[KITE_NAME_ERRS_MAX];
        size_t n = kite_qualified_name_errs(name, msgs);
        kite_causes_add_invalid(c, "metadata.finalizers", name, msgs, n);
        orphan |= kite_streq(name, "orphan");
        foreground |= kite_streq(name, "foregroundDeletion");
    }
    if (orphan && foreground) {
        _cleanup_free_ char *list = kite_strdup(json_object_to_json_string_ext(f, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
        kite_causes_add(c, "FieldValueInvalid", "metadata.finalizers",
                        "Invalid value: %s: finalizer orphan and foregroundDeletion cannot be both set", list);
    }
}

void kite_validate_object_meta(json_object *meta, bool namespaced, int name_rule, struct kite_causes *causes) {
    if (meta && !json_object_is_type(meta, json_type_object)) {
        kite_causes_add(causes, "FieldValueInvalid", "metadata", "Invalid value: %s: must be an object",
                        json_type_to_name(json_object_get_type(meta)));
        return;
    }
    const char *gen = meta_str(meta, "generateName");
    if (*gen) validate_name_value(causes, "metadata.generateName", gen, name_rule, true);
    const char *name = meta_str(meta, "name");
    if (!*name)
        kite_causes_add(causes, "FieldValueRequired", "metadata.name", "Required value: name or generateName is required");
    else
        validate_name_value(causes, "metadata.name", name, name_rule, false);

    const char *ns = meta_str(meta, "namespace");
    if (namespaced) {
        if (!*ns)
            kite_causes_add(causes, "FieldValueRequired", "metadata.namespace", "Required value");
        else
            validate_name_value(causes, "metadata.namespace", ns, 1, false);
    } else if (*ns) {
        kite_causes_add(causes, "FieldValueForbidden", "metadata.namespace", "Forbidden: not allowed on this type");
    }

    json_object *g;
    if (meta && json_object_object_get_ex(meta, "generation", &g) && json_object_is_type(g, json_type_int) &&
        json_object_get_int64(g) < 0)
        kite_causes_add(causes, "FieldValueInvalid", "metadata.generation",
                        "Invalid value: %lld: must be greater than or equal to 0", (long long)json_object_get_int64(g));

    validate_labels(meta, causes);
    validate_annotations(meta, causes);
    validate_finalizers(meta, causes);
}
