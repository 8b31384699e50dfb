/* Shared parts of the workload kinds (workload.h): k8s.io/kubernetes pkg/apis/apps/validation
 * for the selector and template, pkg/registry/apps/{deployment,replicaset}/storage's scale conversion, and the
 * wide columns of pkg/printers/internalversion. */
#include "api/kinds/workload.h"

STRUCT(label_requirement, "LabelSelectorRequirement", FR(1, "key", S), FR(2, "operator", S), F(3, "values", SLIST));
LIST(label_requirements, NULL, label_requirement);
ROOT(kite_schema_label_selector, "LabelSelector", F(1, "matchLabels", SMAP), F(2, "matchExpressions", label_requirements));

static bool in_values(json_object *values, const char *v) {
    for (size_t i = 0; v && i < arr_len(values); i++)
        if (strcmp(str_of(json_object_array_get_idx(values, i)), v) == 0) return true;
    return false;
}

static const char *label(json_object *labels, const char *k) {
    json_object *v = OBJ(labels, k);
    return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

bool kite_workload_selector_matches(json_object *sel, json_object *labels) {
    if (!sel || !json_object_is_type(sel, json_type_object)) return false;
    json_object *ml = OBJ(sel, "matchLabels");
    if (ml && json_object_is_type(ml, json_type_object)) {
        json_object_object_foreach(ml, k, v) {
            const char *have = label(labels, k);
            if (!have || strcmp(have, str_of(v)) != 0) return false;
        }
    }
    json_object *exprs = OBJ(sel, "matchExpressions");
    for (size_t i = 0; i < arr_len(exprs); i++) {
        json_object *e = json_object_array_get_idx(exprs, i);
        const char *op = STR(e, "operator"), *have = label(labels, STR(e, "key"));
        bool ok = false;
        if (strcmp(op, "In") == 0) ok = in_values(OBJ(e, "values"), have);
        else if (strcmp(op, "NotIn") == 0) ok = !in_values(OBJ(e, "values"), have);
        else if (strcmp(op, "Exists") == 0) ok = have != NULL;
        else if (strcmp(op, "DoesNotExist") == 0) ok = have == NULL;
        if (!ok) return false; /* an unknown operator matches nothing, as a selector that fails to parse */
    }
    return true;
}

static bool selector_empty(json_object *sel) {
    json_object *ml = OBJ(sel, "matchLabels");
    return (!ml || !json_object_is_type(ml, json_type_object) || json_object_object_length(ml) == 0) &&
           !arr_len(OBJ(sel, "matchExpressions"));
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Requirements sorted by key, as labels.Selector keeps them; values sorted too. */
void kite_workload_selector_string(json_object *sel, struct kite_buf *out) {
    json_object *ml = OBJ(sel, "matchLabels"), *exprs = OBJ(sel, "matchExpressions");
    size_t n = (ml && json_object_is_type(ml, json_type_object) ? (size_t)json_object_object_length(ml) : 0) + arr_len(exprs);
    char **reqs = n ? kite_calloc(n, sizeof *reqs) : NULL;
    size_t m = 0;
    if (ml && json_object_is_type(ml, json_type_object)) {
        json_object_object_foreach(ml, k, v) reqs[m++] = kite_asprintf("%s=%s", k, str_of(v));
    }
    for (size_t i = 0; i < arr_len(exprs); i++) {
        json_object *e = json_object_array_get_idx(exprs, i), *vals = OBJ(e, "values");
        const char *op = STR(e, "operator"), *key = STR(e, "key");
        if (strcmp(op, "Exists") == 0) { reqs[m++] = kite_strdup(key); continue; }
        if (strcmp(op, "DoesNotExist") == 0) { reqs[m++] = kite_asprintf("!%s", key); continue; }
        size_t nv = arr_len(vals);
        const char **vs = nv ? kite_calloc(nv, sizeof *vs) : NULL;
        for (size_t j = 0; j < nv; j++) vs[j] = str_of(json_object_array_get_idx(vals, j));
        if (nv) qsort(vs, nv, sizeof *vs, cmp_str);
        struct kite_buf b = {0};
        kite_buf_printf(&b, "%s %s (", key, strcmp(op, "NotIn") == 0 ? "notin" : "in");
        for (size_t j = 0; j < nv; j++) kite_buf_printf(&b, "%s%s", j ? "," : "", vs[j]);
        kite_buf_putc(&b, ')');
        free(vs);
        reqs[m++] = kite_buf_detach(&b, NULL);
    }
    if (m) qsort(reqs, m, sizeof *reqs, cmp_str);
    for (size_t i = 0; i < m; i++) {
        kite_buf_printf(out, "%s%s", i ? "," : "", reqs[i]);
        free(reqs[i]);
    }
    free(reqs);
    if (!out->p) kite_buf_puts(out, "");
}

/* Go's %#v of a map[string]string, as field.Invalid prints a template's labels. */
static void go_map(json_object *m, struct kite_buf *out) {
    kite_buf_puts(out, "map[string]string{");
    size_t i = 0;
    if (m && json_object_is_type(m, json_type_object)) {
        json_object_object_foreach(m, k, v) kite_buf_printf(out, "%s\"%s\":\"%s\"", i++ ? ", " : "", k, str_of(v));
    }
    kite_buf_putc(out, '}');
}

static void nonnegative(json_object *obj, const char *field, const char *path, struct kite_causes *c) {
    json_object *v = OBJ(obj, "spec", field);
    if (v && int_of(v) < 0)
        kite_causes_add(c, "FieldValueInvalid", path, "Invalid value: %lld: must be greater than or equal to 0",
                        (long long)int_of(v));
}

void kite_workload_validate(json_object *obj, json_object *old, const char *empty_msg, struct kite_causes *c) {
    nonnegative(obj, "replicas", "spec.replicas", c);
    nonnegative(obj, "minReadySeconds", "spec.minReadySeconds", c);
    json_object *sel = OBJ(obj, "spec", "selector"), *tmpl = OBJ(obj, "spec", "template");
    if (!sel || json_object_is_type(sel, json_type_null)) {
        kite_causes_add(c, "FieldValueRequired", "spec.selector", "Required value");
    } else if (selector_empty(sel)) {
        kite_causes_add(c, "FieldValueInvalid", "spec.selector", "Invalid value: \"\": %s", empty_msg);
    } else if (!kite_workload_selector_matches(sel, OBJ(tmpl, "metadata", "labels"))) {
        struct kite_buf m = {0};
        go_map(OBJ(tmpl, "metadata", "labels"), &m);
        kite_causes_add(c, "FieldValueInvalid", "spec.template.metadata.labels",
                        "Invalid value: %s: `selector` does not match template `labels`", m.p);
        kite_buf_release(&m);
    }
    kite_pod_template_validate(tmpl, "spec.template", c);
    const char *rp = STR(tmpl, "spec", "restartPolicy");
    if (*rp && strcmp(rp, "Always") != 0)
        kite_causes_add(c, "FieldValueNotSupported", "spec.template.spec.restartPolicy",
                        "Unsupported value: \"%s\": supported values: \"Always\"", rp);
    if (OBJ(tmpl, "spec", "activeDeadlineSeconds"))
        kite_causes_add(c, "FieldValueForbidden", "spec.template.spec.activeDeadlineSeconds",
                        "Forbidden: activeDeadlineSeconds in ReplicaSet is not Supported");
    if (old && !kite_json_equal(sel, OBJ(old, "spec", "selector"))) {
        struct kite_buf s = {0};
        kite_workload_selector_string(OBJ(old, "spec", "selector"), &s);
        kite_causes_add(c, "FieldValueInvalid", "spec.selector", "Invalid value: \"%s\": field is immutable", s.p ? s.p : "");
        kite_buf_release(&s);
    }
}

/* ---- /scale: autoscaling/v1 Scale (scaleFromDeployment, scaleFromReplicaSet) ---- */

/* obj may be a record's cached parse, shared between threads: only read, never referenced. */
static json_object *copy_str(json_object *o, const char *k) {
    json_object *v = OBJ(o, k);
    return v && json_object_is_type(v, json_type_string) ? json_object_new_string(json_object_get_string(v)) : NULL;
}

json_object *kite_workload_scale_view(json_object *obj) {
    json_object *v = json_object_new_object(), *meta = json_object_new_object(), *om = OBJ(obj, "metadata");
    kite_obj_set(v, "kind", json_object_new_string("Scale"));
    kite_obj_set(v, "apiVersion", json_object_new_string("autoscaling/v1"));
    static const char *const keep[] = {"name", "namespace", "uid", "resourceVersion", "creationTimestamp"};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(keep); i++) {
        json_object *s = copy_str(om, keep[i]);
        if (s) kite_obj_set(meta, keep[i], s);
    }
    kite_obj_set(v, "metadata", meta);
    json_object *spec = json_object_new_object(), *status = json_object_new_object();
    kite_obj_set(spec, "replicas", json_object_new_int64(int_of(OBJ(obj, "spec", "replicas"))));
    kite_obj_set(v, "spec", spec);
    kite_obj_set(status, "replicas", json_object_new_int64(int_of(OBJ(obj, "status", "replicas"))));
    struct kite_buf sel = {0};
    kite_workload_selector_string(OBJ(obj, "spec", "selector"), &sel);
    kite_obj_set(status, "selector", json_object_new_string(sel.p ? sel.p : ""));
    kite_buf_release(&sel);
    kite_obj_set(v, "status", status);
    return v;
}

/* Scale.spec.replicas is an int32 without omitempty: absent reads 0. A value of the wrong
 * type is kept as given, for the kind's decoder check to refuse. */
void kite_workload_scale_apply(json_object *obj, json_object *view) {
    json_object *r = OBJ(view, "spec", "replicas");
    kite_obj_set(kite_obj_ensure(obj, "spec"), "replicas", r ? json_object_get(r) : json_object_new_int(0));
}


/* ---- wide columns ---- */

static json_object *containers_join(const struct kite_table_row *r, const char *k) {
    json_object *cs = OBJ(r->obj, "spec", "template", "spec", "containers");
    struct kite_buf b = {0};
    for (size_t i = 0; i < arr_len(cs); i++) kite_buf_printf(&b, "%s%s", i ? "," : "", STR(json_object_array_get_idx(cs, i), k));
    json_object *cell = cell_str(b.p ? b.p : "");
    kite_buf_release(&b);
    return cell;
}
json_object *kite_workload_cell_containers(const struct kite_table_row *r) { return containers_join(r, "name"); }
json_object *kite_workload_cell_images(const struct kite_table_row *r) { return containers_join(r, "image"); }
json_object *kite_workload_cell_selector(const struct kite_table_row *r) {
    struct kite_buf b = {0};
    kite_workload_selector_string(OBJ(r->obj, "spec", "selector"), &b);
    json_object *cell = cell_or(b.p ? b.p : "", "<none>");
    kite_buf_release(&b);
    return cell;
}
