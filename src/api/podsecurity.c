/* The Pod Security Standards' checks (podsecurity.h). Each check is upstream's
 * policy/check_<id>.go over the pod's JSON: the same containers visited in the same order
 * (init, regular, ephemeral), the same sets (sorted, as sets.String's List()) and lists
 * (in the pod's order), the same words. The table below is in the order upstream's registry
 * runs them: baseline ids sorted, then restricted ids sorted; a restricted check that
 * overrides a baseline one replaces it at the restricted level. */
#include "api/podsecurity.h"
#include "api/internal.h"
#include "api/registry.h"
#include "base/base.h"
#include "base/buf.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- levels, versions, labels ---------------------------------------------------------- */

static const char *const LEVELS[] = {"privileged", "baseline", "restricted"};

const char *kite_psa_level_name(enum kite_psa_level l) { return LEVELS[l]; }

int kite_psa_parse_level(const char *s, enum kite_psa_level *ret) {
    for (size_t i = 0; i < KITE_ARRAY_SIZE(LEVELS); i++)
        if (s && strcmp(s, LEVELS[i]) == 0) {
            *ret = (enum kite_psa_level)i;
            return 0;
        }
    return -EINVAL;
}

/* ^v1\.([0-9]|[1-9][0-9]*)$ and a minor that fits an int, as api.ParseVersion's Atoi */
int kite_psa_parse_version(const char *s, struct kite_psa_lv *ret) {
    if (s && strcmp(s, "latest") == 0) {
        ret->latest = true;
        ret->minor = 0;
        return 0;
    }
    if (!s || strncmp(s, "v1.", 3) != 0) return -EINVAL;
    const char *d = s + 3;
    size_t n = strspn(d, "0123456789");
    if (n == 0 || d[n] || (n > 1 && d[0] == '0') || n > 9) return -EINVAL;
    ret->latest = false;
    ret->minor = atoi(d);
    return 0;
}

int kite_psa_parse_lv(const char *s, struct kite_psa_lv *ret) {
    struct kite_psa_lv lv = {.latest = true};
    const char *colon = s ? strchr(s, ':') : NULL;
    char level[16];
    size_t n = colon ? (size_t)(colon - s) : (s ? strlen(s) : 0);
    if (!s || n >= sizeof level) return -EINVAL;
    memcpy(level, s, n);
    level[n] = 0;
    if (kite_psa_parse_level(level, &lv.level) < 0) return -EINVAL;
    if (colon && kite_psa_parse_version(colon + 1, &lv) < 0) return -EINVAL;
    *ret = lv;
    return 0;
}

void kite_psa_lv_format(const struct kite_psa_lv *lv, char out[KITE_PSA_LV_MAX]) {
    if (lv->latest) snprintf(out, KITE_PSA_LV_MAX, "%s:latest", LEVELS[lv->level]);
    else snprintf(out, KITE_PSA_LV_MAX, "%s:v1.%d", LEVELS[lv->level], lv->minor);
}

bool kite_psa_lv_equivalent(const struct kite_psa_lv *a, const struct kite_psa_lv *b) {
    if (a->level == KITE_PSA_PRIVILEGED && b->level == KITE_PSA_PRIVILEGED) return true;
    return a->level == b->level && a->latest == b->latest && (a->latest || a->minor == b->minor);
}

static const char *label(json_object *labels, const char *key) {
    json_object *v;
    if (!labels || !json_object_object_get_ex(labels, key, &v)) return NULL;
    return json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
}

static void invalid(struct kite_causes *errs, const char *key, const char *value, const char *msg) {
    if (!errs) return;
    char field[128];
    snprintf(field, sizeof field, "metadata.labels[%s]", key);
    kite_causes_add_invalid(errs, field, value, &msg, 1);
}

#define LEVEL_MSG "must be one of privileged, baseline, restricted"
#define VERSION_MSG "must be \"latest\" or \"v1.x\""

/* One mode's level and version labels over its default. Returns whether a valid level label was there. */
static bool mode(json_object *labels, const char *mode_name, enum kite_psa_level on_error, struct kite_psa_lv *lv,
                 bool *ret_version_set, struct kite_causes *errs) {
    char key[64];
    bool level_ok = false;
    snprintf(key, sizeof key, KITE_PSA_LABEL_PREFIX "%s", mode_name);
    const char *v = label(labels, key);
    if (v) {
        if (kite_psa_parse_level(v, &lv->level) == 0) {
            level_ok = true;
        } else {
            lv->level = on_error;
            invalid(errs, key, v, LEVEL_MSG);
        }
    }
    snprintf(key, sizeof key, KITE_PSA_LABEL_PREFIX "%s-version", mode_name);
    v = label(labels, key);
    if (ret_version_set) *ret_version_set = v != NULL;
    if (v && kite_psa_parse_version(v, lv) < 0) {
        lv->latest = true;
        lv->minor = 0;
        invalid(errs, key, v, VERSION_MSG);
    }
    return level_ok;
}

void kite_psa_policy_from_labels(json_object *labels, const struct kite_psa_policy *defaults,
                                 struct kite_psa_policy *ret, struct kite_causes *errs) {
    struct kite_psa_policy p = *defaults;
    bool has_enforce = mode(labels, "enforce", KITE_PSA_RESTRICTED, &p.enforce, NULL, errs);
    mode(labels, "audit", KITE_PSA_PRIVILEGED, &p.audit, NULL, errs);
    bool has_warn_version;
    bool has_warn = label(labels, KITE_PSA_LABEL_PREFIX "warn") != NULL;
    mode(labels, "warn", KITE_PSA_PRIVILEGED, &p.warn, &has_warn_version, errs);
    if (!has_warn && has_enforce && p.enforce.level > p.warn.level) {
        p.warn.level = p.enforce.level;
        if (!has_warn_version) {
            p.warn.latest = p.enforce.latest;
            p.warn.minor = p.enforce.minor;
        }
    }
    *ret = p;
}

/* ---- small sets and lists of strings ----------------------------------------------------- */

struct strs {
    char **v;
    size_t n, cap;
};

static void strs_add(struct strs *s, const char *x) {
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 4;
        s->v = kite_realloc(s->v, s->cap * sizeof *s->v);
    }
    s->v[s->n++] = kite_strdup(x ? x : "");
}

/* sets.String's Insert: appended; strs_sort makes the list a set (a pod may hold many
 * containers: no quadratic scan per insert) */
static void set_add(struct strs *s, const char *x) { strs_add(s, x); }

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* sets.String's List(): sorted, each value once */
static void strs_sort(struct strs *s) {
    if (s->n < 2) return;
    qsort(s->v, s->n, sizeof *s->v, cmp_str);
    size_t k = 1;
    for (size_t i = 1; i < s->n; i++) {
        if (strcmp(s->v[i], s->v[k - 1]) == 0) free(s->v[i]);
        else s->v[k++] = s->v[i];
    }
    s->n = k;
}

static void strs_release(struct strs *s) {
    for (size_t i = 0; i < s->n; i++) free(s->v[i]);
    free(s->v);
    *s = (struct strs){0};
}

static void join(struct kite_buf *b, const struct strs *s, const char *sep) {
    for (size_t i = 0; i < s->n; i++) {
        if (i) kite_buf_puts(b, sep);
        kite_buf_puts(b, s->v[i]);
    }
}

/* joinQuote: `"a", "b"` (no escaping, as upstream) */
static void join_quote(struct kite_buf *b, const struct strs *s) {
    if (!s->n) return;
    kite_buf_putc(b, '"');
    join(b, s, "\", \"");
    kite_buf_putc(b, '"');
}

static const char *plural(size_t n, const char *one, const char *many) { return n == 1 ? one : many; }

/* "container \"a\"" / "containers \"a\", \"b\"" appended to setters */
static void add_containers(struct strs *setters, const struct strs *names) {
    if (!names->n) return;
    struct kite_buf b = {0};
    kite_buf_printf(&b, "%s ", plural(names->n, "container", "containers"));
    join_quote(&b, names);
    strs_add(setters, b.p);
    kite_buf_release(&b);
}

/* ---- the pod as the checks see it ------------------------------------------------------ */

struct ctx {
    json_object *meta, *spec, *psc; /* psc: spec.securityContext */
    json_object **containers;       /* init, regular, ephemeral: every one (no limit: none escapes) */
    size_t n, cap;
    int minor;                      /* the version evaluated (latest: KITE_PSA_LATEST_MINOR) */
    const char *reason;             /* a failed check's ForbiddenReason */
    struct kite_buf detail;         /* and its ForbiddenDetail */
};

static json_object *sc(json_object *c) { return kite_obj_get(c, "securityContext"); }
static const char *cname(json_object *c) { return kite_obj_str(c, "name") ? kite_obj_str(c, "name") : ""; }

static bool is_true(json_object *o, const char *k) {
    json_object *v = kite_obj_get(o, k);
    return v && json_object_is_type(v, json_type_boolean) && json_object_get_boolean(v);
}

/* a *bool that is set (not null) */
static bool is_set(json_object *o, const char *k) { return kite_obj_get(o, k) != NULL; }

static bool is_windows(struct ctx *c) {
    const char *os = kite_obj_str(kite_obj_get(c->spec, "os"), "name");
    return os && strcmp(os, "windows") == 0;
}

static bool fail(struct ctx *c, const char *reason) {
    c->reason = reason;
    return false;
}

static bool in(const char *s, const char *const *set) {
    for (; *set; set++)
        if (strcmp(s, *set) == 0) return true;
    return false;
}

static bool starts_with(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

static void go_quoted(struct kite_buf *b, const char *k, const char *v) {
    kite_buf_printf(b, "%s=", k);
    kite_api_go_quote(b, v);
}

/* ---- baseline checks ----------------------------------------------------------------- */

static bool apparmor_type_ok(const char *t) {
    return t && (strcmp(t, "RuntimeDefault") == 0 || strcmp(t, "Localhost") == 0);
}

static bool check_apparmor(struct ctx *c) {
    struct strs setters = {0}, values = {0}, bad = {0}, annotations = {0};
    json_object *p = kite_obj_get(c->psc, "appArmorProfile");
    if (p && !apparmor_type_ok(kite_obj_str(p, "type"))) {
        strs_add(&setters, "pod");
        set_add(&values, kite_obj_str(p, "type"));
    }
    for (size_t i = 0; i < c->n; i++) {
        json_object *cp = kite_obj_get(sc(c->containers[i]), "appArmorProfile");
        if (cp && !apparmor_type_ok(kite_obj_str(cp, "type"))) {
            strs_add(&bad, cname(c->containers[i]));
            set_add(&values, kite_obj_str(cp, "type"));
        }
    }
    add_containers(&setters, &bad);
    json_object *ann = kite_obj_get(c->meta, "annotations");
    if (ann && json_object_is_type(ann, json_type_object)) {
        json_object_object_foreach(ann, k, v) {
            const char *s = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
            if (!starts_with(k, "container.apparmor.security.beta.kubernetes.io/")) continue;
            if (!*s || strcmp(s, "runtime/default") == 0 || starts_with(s, "localhost/")) continue;
            struct kite_buf q = {0};
            go_quoted(&q, k, s);
            strs_add(&annotations, q.p);
            kite_buf_release(&q);
        }
    }
    strs_sort(&values);
    if (annotations.n) {
        strs_sort(&annotations);
        for (size_t i = 0; i < annotations.n; i++) strs_add(&values, annotations.v[i]);
        strs_add(&setters, plural(annotations.n, "annotation", "annotations"));
    }
    bool ok = setters.n == 0;
    if (!ok) {
        c->reason = plural(values.n, "forbidden AppArmor profile", "forbidden AppArmor profiles");
        join(&c->detail, &setters, " and ");
        kite_buf_puts(&c->detail, " must not set AppArmor profile type to ");
        join_quote(&c->detail, &values);
    }
    strs_release(&setters), strs_release(&values), strs_release(&bad), strs_release(&annotations);
    return ok;
}

static const char *const CAPS_BASELINE[] = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL",
                                            "MKNOD", "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID",
                                            "SYS_CHROOT", NULL};

static bool check_capabilities_baseline(struct ctx *c) {
    struct strs bad = {0}, caps = {0};
    for (size_t i = 0; i < c->n; i++) {
        json_object *add = kite_obj_get(kite_obj_get(sc(c->containers[i]), "capabilities"), "add");
        bool valid = true;
        for (size_t j = 0; add && json_object_is_type(add, json_type_array) && j < json_object_array_length(add); j++) {
            const char *cap = json_object_get_string(json_object_array_get_idx(add, j));
            if (!in(cap ? cap : "", CAPS_BASELINE)) {
                valid = false;
                set_add(&caps, cap);
            }
        }
        if (!valid) strs_add(&bad, cname(c->containers[i]));
    }
    bool ok = bad.n == 0;
    if (!ok) {
        strs_sort(&caps);
        c->reason = "non-default capabilities";
        kite_buf_printf(&c->detail, "%s ", plural(bad.n, "container", "containers"));
        join_quote(&c->detail, &bad);
        kite_buf_puts(&c->detail, " must not include ");
        join_quote(&c->detail, &caps);
        kite_buf_puts(&c->detail, " in securityContext.capabilities.add");
    }
    strs_release(&bad), strs_release(&caps);
    return ok;
}

static bool check_host_namespaces(struct ctx *c) {
    struct strs ns = {0};
    if (is_true(c->spec, "hostNetwork")) strs_add(&ns, "hostNetwork=true");
    if (is_true(c->spec, "hostPID")) strs_add(&ns, "hostPID=true");
    if (is_true(c->spec, "hostIPC")) strs_add(&ns, "hostIPC=true");
    bool ok = ns.n == 0;
    if (!ok) {
        c->reason = "host namespaces";
        join(&c->detail, &ns, ", ");
    }
    strs_release(&ns);
    return ok;
}

static json_object *volume(struct ctx *c, size_t i) { return json_object_array_get_idx(kite_obj_get(c->spec, "volumes"), i); }
static size_t n_volumes(struct ctx *c) {
    json_object *v = kite_obj_get(c->spec, "volumes");
    return v && json_object_is_type(v, json_type_array) ? json_object_array_length(v) : 0;
}

static bool check_host_path_volumes(struct ctx *c) {
    struct strs vols = {0};
    for (size_t i = 0; i < n_volumes(c); i++)
        if (is_set(volume(c, i), "hostPath")) strs_add(&vols, kite_obj_str(volume(c, i), "name"));
    bool ok = vols.n == 0;
    if (!ok) {
        c->reason = "hostPath volumes";
        kite_buf_printf(&c->detail, "%s ", plural(vols.n, "volume", "volumes"));
        join_quote(&c->detail, &vols);
    }
    strs_release(&vols);
    return ok;
}

static bool check_host_ports(struct ctx *c) {
    struct strs bad = {0}, ports = {0};
    for (size_t i = 0; i < c->n; i++) {
        json_object *ps = kite_obj_get(c->containers[i], "ports");
        bool valid = true;
        for (size_t j = 0; ps && json_object_is_type(ps, json_type_array) && j < json_object_array_length(ps); j++) {
            int64_t hp = json_object_get_int64(kite_obj_get(json_object_array_get_idx(ps, j), "hostPort"));
            if (hp != 0) {
                char num[24];
                snprintf(num, sizeof num, "%" PRId64, (int64_t)(int32_t)hp);
                valid = false;
                set_add(&ports, num);
            }
        }
        if (!valid) strs_add(&bad, cname(c->containers[i]));
    }
    bool ok = bad.n == 0;
    if (!ok) {
        strs_sort(&ports);
        c->reason = "hostPort";
        kite_buf_printf(&c->detail, "%s ", plural(bad.n, "container", "containers"));
        join_quote(&c->detail, &bad);
        kite_buf_printf(&c->detail, " %s %s ", plural(bad.n, "uses", "use"), plural(ports.n, "hostPort", "hostPorts"));
        join(&c->detail, &ports, ", ");
    }
    strs_release(&bad), strs_release(&ports);
    return ok;
}

static bool check_privileged(struct ctx *c) {
    struct strs bad = {0};
    for (size_t i = 0; i < c->n; i++)
        if (is_true(sc(c->containers[i]), "privileged")) strs_add(&bad, cname(c->containers[i]));
    bool ok = bad.n == 0;
    if (!ok) {
        c->reason = "privileged";
        kite_buf_printf(&c->detail, "%s ", plural(bad.n, "container", "containers"));
        join_quote(&c->detail, &bad);
        kite_buf_puts(&c->detail, " must not set securityContext.privileged=true");
    }
    strs_release(&bad);
    return ok;
}

static bool check_proc_mount(struct ctx *c) {
    struct strs bad = {0}, types = {0};
    for (size_t i = 0; i < c->n; i++) {
        json_object *pm = kite_obj_get(sc(c->containers[i]), "procMount");
        if (!pm) continue;
        const char *t = json_object_get_string(pm);
        if (strcmp(t ? t : "", "Default") != 0) {
            strs_add(&bad, cname(c->containers[i]));
            set_add(&types, t);
        }
    }
    bool ok = bad.n == 0;
    if (!ok) {
        strs_sort(&types);
        c->reason = "procMount";
        kite_buf_printf(&c->detail, "%s ", plural(bad.n, "container", "containers"));
        join_quote(&c->detail, &bad);
        kite_buf_puts(&c->detail, " must not set securityContext.procMount to ");
        join_quote(&c->detail, &types);
    }
    strs_release(&bad), strs_release(&types);
    return ok;
}

struct selinux_state {
    const char *const *allowed;
    struct strs types;
    bool user, role;
};

static bool selinux_ok(struct selinux_state *st, json_object *o) {
    bool valid = true;
    const char *t = kite_obj_str(o, "type");
    if (!in(t ? t : "", st->allowed)) {
        valid = false;
        set_add(&st->types, t);
    }
    const char *u = kite_obj_str(o, "user"), *r = kite_obj_str(o, "role");
    if (u && *u) valid = false, st->user = true;
    if (r && *r) valid = false, st->role = true;
    return valid;
}

static bool check_selinux(struct ctx *c) {
    static const char *const ALLOWED_1_0[] = {"", "container_t", "container_init_t", "container_kvm_t", NULL};
    static const char *const ALLOWED_1_31[] = {"", "container_t", "container_init_t", "container_kvm_t",
                                               "container_engine_t", NULL};
    struct selinux_state st = {.allowed = c->minor >= 31 ? ALLOWED_1_31 : ALLOWED_1_0};
    struct strs setters = {0}, bad = {0};
    json_object *po = kite_obj_get(c->psc, "seLinuxOptions");
    if (po && !selinux_ok(&st, po)) strs_add(&setters, "pod");
    for (size_t i = 0; i < c->n; i++) {
        json_object *o = kite_obj_get(sc(c->containers[i]), "seLinuxOptions");
        if (o && !selinux_ok(&st, o)) strs_add(&bad, cname(c->containers[i]));
    }
    add_containers(&setters, &bad);
    bool ok = setters.n == 0;
    if (!ok) {
        struct strs data = {0};
        if (st.types.n) {
            strs_sort(&st.types);
            struct kite_buf b = {0};
            kite_buf_printf(&b, "%s ", plural(st.types.n, "type", "types"));
            join_quote(&b, &st.types);
            strs_add(&data, b.p);
            kite_buf_release(&b);
        }
        if (st.user) strs_add(&data, "user may not be set");
        if (st.role) strs_add(&data, "role may not be set");
        c->reason = "seLinuxOptions";
        join(&c->detail, &setters, " and ");
        kite_buf_puts(&c->detail, " set forbidden securityContext.seLinuxOptions: ");
        join(&c->detail, &data, "; ");
        strs_release(&data);
    }
    strs_release(&setters), strs_release(&bad), strs_release(&st.types);
    return ok;
}

static bool seccomp_type_ok(const char *t) { return t && (strcmp(t, "Localhost") == 0 || strcmp(t, "RuntimeDefault") == 0); }

/* before 1.19: the alpha annotations */
static bool check_seccomp_annotations(struct ctx *c) {
    static const char POD_KEY[] = "seccomp.security.alpha.kubernetes.io/pod";
    json_object *ann = kite_obj_get(c->meta, "annotations");
    struct strs bad = {0};
    for (size_t i = 0; i <= c->n; i++) {
        char key[320];
        if (i == c->n) snprintf(key, sizeof key, "%s", POD_KEY);
        else snprintf(key, sizeof key, "container.seccomp.security.alpha.kubernetes.io/%s", cname(c->containers[i]));
        const char *v = label(ann, key);
        if (!v || strcmp(v, "runtime/default") == 0 || strcmp(v, "docker/default") == 0 || starts_with(v, "localhost/"))
            continue;
        struct kite_buf q = {0};
        go_quoted(&q, key, v);
        set_add(&bad, q.p);
        kite_buf_release(&q);
    }
    bool ok = bad.n == 0;
    if (!ok) {
        strs_sort(&bad);
        c->reason = "seccompProfile";
        kite_buf_printf(&c->detail, "forbidden %s ", plural(bad.n, "annotation", "annotations"));
        join(&c->detail, &bad, ", ");
    }
    strs_release(&bad);
    return ok;
}

/* The seccomp fields; restricted: an unset profile fails too. */
static bool seccomp_fields(struct ctx *c, bool restricted) {
    struct strs setters = {0}, values = {0}, bad = {0}, implicit = {0};
    bool pod_set = false;
    json_object *pp = kite_obj_get(c->psc, "seccompProfile");
    if (pp) {
        if (!seccomp_type_ok(kite_obj_str(pp, "type"))) {
            strs_add(&setters, "pod");
            set_add(&values, kite_obj_str(pp, "type"));
        } else {
            pod_set = true;
        }
    }
    for (size_t i = 0; i < c->n; i++) {
        json_object *cp = kite_obj_get(sc(c->containers[i]), "seccompProfile");
        if (cp) {
            if (!seccomp_type_ok(kite_obj_str(cp, "type"))) {
                strs_add(&bad, cname(c->containers[i]));
                set_add(&values, kite_obj_str(cp, "type"));
            }
        } else if (!pod_set) {
            strs_add(&implicit, cname(c->containers[i]));
        }
    }
    add_containers(&setters, &bad);
    bool ok = true;
    if (setters.n) {
        strs_sort(&values);
        ok = fail(c, "seccompProfile");
        join(&c->detail, &setters, " and ");
        kite_buf_puts(&c->detail, " must not set securityContext.seccompProfile.type to ");
        join_quote(&c->detail, &values);
    } else if (restricted && implicit.n) {
        ok = fail(c, "seccompProfile");
        kite_buf_printf(&c->detail, "pod or %s ", plural(implicit.n, "container", "containers"));
        join_quote(&c->detail, &implicit);
        kite_buf_puts(&c->detail, " must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\"");
    }
    strs_release(&setters), strs_release(&values), strs_release(&bad), strs_release(&implicit);
    return ok;
}

static bool check_seccomp_baseline(struct ctx *c) {
    return c->minor < 19 ? check_seccomp_annotations(c) : seccomp_fields(c, false);
}

static bool check_sysctls(struct ctx *c) {
    static const char *const ALLOWED[] = {
        "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range", "net.ipv4.ip_unprivileged_port_start",
        NULL, /* 1.27: */ "net.ipv4.ip_local_reserved_ports",
        NULL, /* 1.29: */ "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
        "net.ipv4.tcp_keepalive_probes",
        NULL, /* 1.32: */ "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem", NULL};
    static const int SINCE[] = {0, 27, 29, 32};
    struct strs bad = {0};
    json_object *ss = kite_obj_get(c->psc, "sysctls");
    for (size_t i = 0; ss && json_object_is_type(ss, json_type_array) && i < json_object_array_length(ss); i++) {
        const char *name = kite_obj_str(json_object_array_get_idx(ss, i), "name");
        if (!name) name = "";
        bool allowed = false;
        const char *const *group = ALLOWED;
        for (size_t g = 0; g < KITE_ARRAY_SIZE(SINCE) && !allowed; g++) {
            if (c->minor >= SINCE[g] && in(name, group)) allowed = true;
            while (*group) group++;
            group++;
        }
        if (!allowed) strs_add(&bad, name);
    }
    bool ok = bad.n == 0;
    if (!ok) {
        c->reason = "forbidden sysctls";
        join(&c->detail, &bad, ", ");
    }
    strs_release(&bad);
    return ok;
}

static bool check_host_process(struct ctx *c) {
    struct strs setters = {0}, bad = {0};
    for (size_t i = 0; i < c->n; i++)
        if (is_true(kite_obj_get(sc(c->containers[i]), "windowsOptions"), "hostProcess"))
            strs_add(&bad, cname(c->containers[i]));
    if (is_true(kite_obj_get(c->psc, "windowsOptions"), "hostProcess")) strs_add(&setters, "pod");
    add_containers(&setters, &bad);
    bool ok = setters.n == 0;
    if (!ok) {
        c->reason = "hostProcess";
        join(&c->detail, &setters, " and ");
        kite_buf_puts(&c->detail, " must not set securityContext.windowsOptions.hostProcess=true");
    }
    strs_release(&setters), strs_release(&bad);
    return ok;
}

/* ---- restricted checks --------------------------------------------------------------- */

static bool check_allow_privilege_escalation(struct ctx *c) {
    if (c->minor >= 25 && is_windows(c)) return true;
    struct strs bad = {0};
    for (size_t i = 0; i < c->n; i++) {
        json_object *s = sc(c->containers[i]);
        json_object *v = kite_obj_get(s, "allowPrivilegeEscalation");
        if (!v || is_true(s, "allowPrivilegeEscalation")) strs_add(&bad, cname(c->containers[i]));
    }
    bool ok = bad.n == 0;
    if (!ok) {
        c->reason = "allowPrivilegeEscalation != false";
        kite_buf_printf(&c->detail, "%s ", plural(bad.n, "container", "containers"));
        join_quote(&c->detail, &bad);
        kite_buf_puts(&c->detail, " must set securityContext.allowPrivilegeEscalation=false");
    }
    strs_release(&bad);
    return ok;
}

static bool array_has(json_object *a, const char *s) {
    for (size_t i = 0; a && json_object_is_type(a, json_type_array) && i < json_object_array_length(a); i++) {
        const char *v = json_object_get_string(json_object_array_get_idx(a, i));
        if (v && strcmp(v, s) == 0) return true;
    }
    return false;
}

static bool check_capabilities_restricted(struct ctx *c) {
    if (c->minor >= 25 && is_windows(c)) return true;
    struct strs no_drop = {0}, adding = {0}, caps = {0};
    for (size_t i = 0; i < c->n; i++) {
        json_object *cap = kite_obj_get(sc(c->containers[i]), "capabilities");
        if (!cap) {
            strs_add(&no_drop, cname(c->containers[i]));
            continue;
        }
        if (!array_has(kite_obj_get(cap, "drop"), "ALL")) strs_add(&no_drop, cname(c->containers[i]));
        json_object *add = kite_obj_get(cap, "add");
        bool forbidden = false;
        for (size_t j = 0; add && json_object_is_type(add, json_type_array) && j < json_object_array_length(add); j++) {
            const char *a = json_object_get_string(json_object_array_get_idx(add, j));
            if (strcmp(a ? a : "", "NET_BIND_SERVICE") != 0) {
                forbidden = true;
                set_add(&caps, a);
            }
        }
        if (forbidden) strs_add(&adding, cname(c->containers[i]));
    }
    bool ok = !no_drop.n && !adding.n;
    if (!ok) {
        c->reason = "unrestricted capabilities";
        if (no_drop.n) {
            kite_buf_printf(&c->detail, "%s ", plural(no_drop.n, "container", "containers"));
            join_quote(&c->detail, &no_drop);
            kite_buf_puts(&c->detail, " must set securityContext.capabilities.drop=[\"ALL\"]");
        }
        if (adding.n) {
            strs_sort(&caps);
            if (no_drop.n) kite_buf_puts(&c->detail, "; ");
            kite_buf_printf(&c->detail, "%s ", plural(adding.n, "container", "containers"));
            join_quote(&c->detail, &adding);
            kite_buf_puts(&c->detail, " must not include ");
            join_quote(&c->detail, &caps);
            kite_buf_puts(&c->detail, " in securityContext.capabilities.add");
        }
    }
    strs_release(&no_drop), strs_release(&adding), strs_release(&caps);
    return ok;
}

static bool check_restricted_volumes(struct ctx *c) {
    static const char *const ALLOWED[] = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
                                          "persistentVolumeClaim", "projected", "secret", NULL};
    /* upstream's switch, in its order: the first source set names the type */
    static const char *const NAMED[] = {"hostPath", "gcePersistentDisk", "awsElasticBlockStore", "gitRepo", "nfs",
                                        "iscsi", "glusterfs", "rbd", "flexVolume", "cinder", "cephfs", "flocker", "fc",
                                        "azureFile", "vsphereVolume", "quobyte", "azureDisk", "photonPersistentDisk",
                                        "portworxVolume", "scaleIO", "storageos", NULL};
    struct strs bad = {0}, types = {0};
    for (size_t i = 0; i < n_volumes(c); i++) {
        json_object *v = volume(c, i);
        bool allowed = false;
        for (const char *const *a = ALLOWED; *a && !allowed; a++) allowed = is_set(v, *a);
        if (allowed) continue;
        strs_add(&bad, kite_obj_str(v, "name"));
        const char *type = "unknown";
        for (const char *const *n = NAMED; *n; n++)
            if (is_set(v, *n)) {
                type = *n;
                break;
            }
        set_add(&types, type);
    }
    bool ok = bad.n == 0;
    if (!ok) {
        strs_sort(&types);
        c->reason = "restricted volume types";
        kite_buf_printf(&c->detail, "%s ", plural(bad.n, "volume", "volumes"));
        join_quote(&c->detail, &bad);
        kite_buf_printf(&c->detail, " %s %s ", plural(bad.n, "uses", "use"),
                        plural(types.n, "restricted volume type", "restricted volume types"));
        join_quote(&c->detail, &types);
    }
    strs_release(&bad), strs_release(&types);
    return ok;
}

static bool check_run_as_non_root(struct ctx *c) {
    struct strs setters = {0}, bad = {0}, implicit = {0};
    bool pod_non_root = false;
    if (is_set(c->psc, "runAsNonRoot")) {
        if (!is_true(c->psc, "runAsNonRoot")) strs_add(&setters, "pod");
        else pod_non_root = true;
    }
    for (size_t i = 0; i < c->n; i++) {
        json_object *s = sc(c->containers[i]);
        if (is_set(s, "runAsNonRoot")) {
            if (!is_true(s, "runAsNonRoot")) strs_add(&bad, cname(c->containers[i]));
        } else if (!pod_non_root) {
            strs_add(&implicit, cname(c->containers[i]));
        }
    }
    add_containers(&setters, &bad);
    bool ok = true;
    if (setters.n) {
        ok = fail(c, "runAsNonRoot != true");
        join(&c->detail, &setters, " and ");
        kite_buf_puts(&c->detail, " must not set securityContext.runAsNonRoot=false");
    } else if (implicit.n) {
        ok = fail(c, "runAsNonRoot != true");
        kite_buf_printf(&c->detail, "pod or %s ", plural(implicit.n, "container", "containers"));
        join_quote(&c->detail, &implicit);
        kite_buf_puts(&c->detail, " must set securityContext.runAsNonRoot=true");
    }
    strs_release(&setters), strs_release(&bad), strs_release(&implicit);
    return ok;
}

static bool is_root(json_object *s) {
    json_object *v = kite_obj_get(s, "runAsUser");
    return v && json_object_is_type(v, json_type_int) && json_object_get_int64(v) == 0;
}

static bool check_run_as_user(struct ctx *c) {
    struct strs setters = {0}, bad = {0};
    if (is_root(c->psc)) strs_add(&setters, "pod");
    for (size_t i = 0; i < c->n; i++)
        if (is_root(sc(c->containers[i]))) strs_add(&bad, cname(c->containers[i]));
    add_containers(&setters, &bad);
    bool ok = setters.n == 0;
    if (!ok) {
        c->reason = "runAsUser=0";
        join(&c->detail, &setters, " and ");
        kite_buf_puts(&c->detail, " must not set runAsUser=0");
    }
    strs_release(&setters), strs_release(&bad);
    return ok;
}

static bool check_seccomp_restricted(struct ctx *c) {
    if (c->minor >= 25 && is_windows(c)) return true;
    return seccomp_fields(c, true);
}

/* ---- the registry ---------------------------------------------------------------------- */

struct check {
    const char *id;
    enum kite_psa_level level;
    int since;             /* the first minor version it runs at */
    const char *overrides; /* restricted: the baseline check it replaces (from `since`) */
    bool (*run)(struct ctx *c);
};

static const struct check CHECKS[] = {
    {"appArmorProfile", KITE_PSA_BASELINE, 0, NULL, check_apparmor},
    {"capabilities_baseline", KITE_PSA_BASELINE, 0, NULL, check_capabilities_baseline},
    {"hostNamespaces", KITE_PSA_BASELINE, 0, NULL, check_host_namespaces},
    {"hostPathVolumes", KITE_PSA_BASELINE, 0, NULL, check_host_path_volumes},
    {"hostPorts", KITE_PSA_BASELINE, 0, NULL, check_host_ports},
    {"privileged", KITE_PSA_BASELINE, 0, NULL, check_privileged},
    {"procMount", KITE_PSA_BASELINE, 0, NULL, check_proc_mount},
    {"seLinuxOptions", KITE_PSA_BASELINE, 0, NULL, check_selinux},
    {"seccompProfile_baseline", KITE_PSA_BASELINE, 0, NULL, check_seccomp_baseline},
    {"sysctls", KITE_PSA_BASELINE, 0, NULL, check_sysctls},
    {"windowsHostProcess", KITE_PSA_BASELINE, 0, NULL, check_host_process},
    {"allowPrivilegeEscalation", KITE_PSA_RESTRICTED, 8, NULL, check_allow_privilege_escalation},
    {"capabilities_restricted", KITE_PSA_RESTRICTED, 22, "capabilities_baseline", check_capabilities_restricted},
    {"restrictedVolumes", KITE_PSA_RESTRICTED, 0, "hostPathVolumes", check_restricted_volumes},
    {"runAsNonRoot", KITE_PSA_RESTRICTED, 0, NULL, check_run_as_non_root},
    {"runAsUser", KITE_PSA_RESTRICTED, 23, NULL, check_run_as_user},
    {"seccompProfile_restricted", KITE_PSA_RESTRICTED, 19, "seccompProfile_baseline", check_seccomp_restricted},
};

static bool overridden(const char *id, int minor) {
    for (size_t i = 0; i < KITE_ARRAY_SIZE(CHECKS); i++)
        if (CHECKS[i].overrides && minor >= CHECKS[i].since && strcmp(CHECKS[i].overrides, id) == 0) return true;
    return false;
}

static void add_containers_of(struct ctx *c, const char *list) {
    json_object *a = kite_obj_get(c->spec, list);
    for (size_t i = 0; a && json_object_is_type(a, json_type_array) && i < json_object_array_length(a); i++) {
        if (c->n == c->cap) {
            c->cap = c->cap ? 2 * c->cap : 8;
            c->containers = kite_realloc(c->containers, c->cap * sizeof *c->containers);
        }
        c->containers[c->n++] = json_object_array_get_idx(a, i);
    }
}

char *kite_psa_evaluate(const struct kite_psa_lv *lv, json_object *pod_meta, json_object *pod_spec,
                        char **ret_reasons) {
    if (ret_reasons) *ret_reasons = NULL;
    if (lv->level == KITE_PSA_PRIVILEGED) return NULL;
    struct ctx *c = kite_calloc(1, sizeof *c);
    c->meta = pod_meta;
    c->spec = pod_spec;
    c->psc = kite_obj_get(pod_spec, "securityContext");
    c->minor = lv->latest || lv->minor > KITE_PSA_LATEST_MINOR ? KITE_PSA_LATEST_MINOR : lv->minor;
    add_containers_of(c, "initContainers");
    add_containers_of(c, "containers");
    add_containers_of(c, "ephemeralContainers");
    struct kite_buf out = {0}, reasons = {0};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(CHECKS); i++) {
        const struct check *k = &CHECKS[i];
        if (k->level > lv->level || c->minor < k->since) continue;
        if (lv->level == KITE_PSA_RESTRICTED && k->level == KITE_PSA_BASELINE && overridden(k->id, c->minor)) continue;
        c->reason = NULL;
        kite_buf_reset(&c->detail);
        if (k->run(c)) continue;
        const char *reason = c->reason && *c->reason ? c->reason : "unknown forbidden reason";
        if (out.len) kite_buf_puts(&out, ", "), kite_buf_puts(&reasons, ", ");
        kite_buf_puts(&out, reason);
        kite_buf_puts(&reasons, reason);
        if (c->detail.len) kite_buf_printf(&out, " (%s)", c->detail.p);
    }
    kite_buf_release(&c->detail);
    free(c->containers);
    free(c);
    if (!out.len) {
        kite_buf_release(&reasons);
        return NULL;
    }
    if (ret_reasons) *ret_reasons = kite_buf_detach(&reasons, NULL);
    else kite_buf_release(&reasons);
    return kite_buf_detach(&out, NULL);
}
