/* metav1.Status bodies. Keys are written in the order Go's encoder emits the struct fields
 * and empty ones are omitted as omitempty does, so bodies match kube-apiserver's (except
 * that Go also escapes <, > and & as \u003c...; both parse to the same strings). */
#include "api/status.h"
#include "api/internal.h"
#include "api/registry.h"
#include "base/buf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *kite_status_reason_for(int code) {
    static const struct { int code; const char *reason; } table[] = {
        {400, "BadRequest"},
        {401, "Unauthorized"},
        {403, "Forbidden"},
        {404, "NotFound"},
        {405, "MethodNotAllowed"},
        {406, "NotAcceptable"},
        {409, "Conflict"},
        {410, "Expired"},
        {413, "RequestEntityTooLarge"},
        {415, "UnsupportedMediaType"},
        {422, "Invalid"},
        {429, "TooManyRequests"},
        {500, "InternalError"},
        {503, "ServiceUnavailable"},
        {504, "Timeout"},
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(table); i++)
        if (table[i].code == code) return table[i].reason;
    return "";
}

static void field(struct kite_buf *b, bool *first, const char *key, const char *val) {
    if (!val) return;
    kite_buf_printf(b, "%s\"%s\":", *first ? "" : ",", key);
    kite_buf_json_str(b, val);
    *first = false;
}

char *kite_status_failure(int code, const char *reason, const char *message, const char *name,
                          const char *group, const char *kind, const struct kite_causes *causes) {
    struct kite_buf b = {0};
    kite_buf_puts(&b, "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\"");
    if (message) {
        kite_buf_puts(&b, ",\"message\":");
        kite_buf_json_str(&b, message);
    }
    if (!reason) reason = kite_status_reason_for(code);
    if (*reason) {
        kite_buf_puts(&b, ",\"reason\":");
        kite_buf_json_str(&b, reason);
    }
    bool has_causes = causes && causes->n > 0;
    if (name || group || kind || has_causes) {
        bool first = true;
        kite_buf_puts(&b, ",\"details\":{");
        field(&b, &first, "name", name);
        field(&b, &first, "group", group);
        field(&b, &first, "kind", kind);
        if (has_causes) {
            kite_buf_printf(&b, "%s\"causes\":[", first ? "" : ",");
            for (size_t i = 0; i < causes->n; i++) {
                bool f = true;
                kite_buf_puts(&b, i ? ",{" : "{");
                /* Go omits empty strings here (omitempty). */
                const struct kite_cause *c = &causes->v[i];
                field(&b, &f, "reason", c->reason && *c->reason ? c->reason : NULL);
                field(&b, &f, "message", c->message && *c->message ? c->message : NULL);
                field(&b, &f, "field", c->field && *c->field ? c->field : NULL);
                kite_buf_putc(&b, '}');
            }
            kite_buf_putc(&b, ']');
        }
        kite_buf_putc(&b, '}');
    }
    kite_buf_printf(&b, ",\"code\":%d}", code);
    return kite_buf_detach(&b, NULL);
}

char *kite_status_too_large_rv(long long want, long long current) {
    return kite_asprintf("{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
                         "\"message\":\"Timeout: Too large resource version: %lld, current: %lld\",\"reason\":\"Timeout\","
                         "\"details\":{\"causes\":[{\"reason\":\"ResourceVersionTooLarge\",\"message\":\"Too large "
                         "resource version\"}],\"retryAfterSeconds\":%d},\"code\":504}",
                         want, current, KITE_TOO_LARGE_RV_RETRY_S);
}

char *kite_status_success(int code, const char *name, const char *group, const char *kind, const char *uid) {
    struct kite_buf b = {0};
    kite_buf_puts(&b, "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Success\"");
    if (name || group || kind || uid) {
        bool first = true;
        kite_buf_puts(&b, ",\"details\":{");
        field(&b, &first, "name", name);
        field(&b, &first, "group", group);
        field(&b, &first, "kind", kind);
        field(&b, &first, "uid", uid);
        kite_buf_putc(&b, '}');
    }
    if (code) kite_buf_printf(&b, ",\"code\":%d", code);
    kite_buf_putc(&b, '}');
    return kite_buf_detach(&b, NULL);
}

char *kite_status_invalid(const char *group, const char *kind, const char *name, const struct kite_causes *causes) {
    static const struct kite_causes none = {0};
    if (!causes) causes = &none;
    if (group && !*group) group = NULL;
    if (name && !*name) name = NULL;
    struct kite_buf msg = {0};
    /* fmt.Sprintf("%s %q is invalid: %v", GroupKind, name, errs); GroupKind prints "Kind.group". */
    kite_buf_printf(&msg, "%s%s%s ", kind ? kind : "", group ? "." : "", group ? group : "");
    kite_api_go_quote(&msg, name ? name : "");
    kite_buf_puts(&msg, " is invalid");
    if (causes->n) {
        _cleanup_free_ char *summary = kite_causes_summary(causes);
        kite_buf_printf(&msg, ": %s", summary);
    }
    char *r = kite_status_failure(422, "Invalid", msg.p, name, group, kind, causes);
    kite_buf_release(&msg);
    return r;
}

/* ---- a strategic merge patch whose result does not decode ------------------------------ */

/* v as Go's fmt prints a float64 with %v: the shortest digits that read back as v, in %e
 * form when the exponent is below -4 or at least 6 (strconv's 'g' with precision -1), with
 * an exponent of at least two digits. */
static void go_float(struct kite_buf *b, double v) {
    char e[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec - 1, v);
        if (strtod(e, NULL) == v) break;
    }
    char digits[24];
    size_t nd = 0;
    const char *p = e + (*e == '-');
    for (; *p && *p != 'e'; p++)
        if (*p != '.') digits[nd++] = *p;
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    int exp = atoi(p + 1);
    if (*e == '-') kite_buf_putc(b, '-');
    if (exp < -4 || exp >= 6) {
        kite_buf_printf(b, "%c%s%.*se%c%02d", digits[0], nd > 1 ? "." : "", (int)nd - 1, digits + 1, exp < 0 ? '-' : '+',
                        exp < 0 ? -exp : exp);
    } else if (exp < 0) {
        kite_buf_puts(b, "0.");
        for (int i = -1; i > exp; i--) kite_buf_putc(b, '0');
        kite_buf_append(b, digits, nd);
    } else {
        for (int i = 0; i <= exp || i < (int)nd; i++) {
            if (i == exp + 1) kite_buf_putc(b, '.');
            kite_buf_putc(b, i < (int)nd ? digits[i] : '0');
        }
    }
}

/* o as Go's fmt prints the map[string]interface{} json decoding gives (%+v): maps with their
 * keys sorted, map[k:v k2:v2], slices [a b], strings bare, <nil> for null. */
static void go_value(struct kite_buf *b, json_object *o) {
    switch (json_object_get_type(o)) {
    case json_type_null: kite_buf_puts(b, "<nil>"); return;
    case json_type_boolean: kite_buf_puts(b, json_object_get_boolean(o) ? "true" : "false"); return;
    case json_type_int: kite_buf_printf(b, "%lld", (long long)json_object_get_int64(o)); return;
    case json_type_double: go_float(b, json_object_get_double(o)); return;
    case json_type_string: kite_buf_puts(b, json_object_get_string(o)); return;
    case json_type_array:
        kite_buf_putc(b, '[');
        for (size_t i = 0, n = json_object_array_length(o); i < n; i++) {
            if (i) kite_buf_putc(b, ' ');
            go_value(b, json_object_array_get_idx(o, i));
        }
        kite_buf_putc(b, ']');
        return;
    case json_type_object: {
        size_t n, i;
        const char **keys = kite_obj_sorted_keys(o, NULL, &n);
        kite_buf_puts(b, "map[");
        for (i = 0; i < n; i++) {
            kite_buf_printf(b, "%s%s:", i ? " " : "", keys[i]);
            go_value(b, kite_obj_get(o, keys[i]));
        }
        kite_buf_putc(b, ']');
        free(keys);
        return;
    }
    }
}

char *kite_status_patch_invalid(json_object *patch, const char *err) {
    struct kite_buf v = {0}, q = {0};
    go_value(&v, patch);
    kite_api_go_quote(&q, v.p ? v.p : "");
    struct kite_causes c = {0};
    kite_causes_add(&c, "FieldValueInvalid", "patch", "Invalid value: %s: %s", q.p, err);
    char *r = kite_status_invalid(NULL, NULL, NULL, &c);
    kite_causes_release(&c);
    kite_buf_release(&v);
    kite_buf_release(&q);
    return r;
}
