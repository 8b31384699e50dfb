/* A container's environment as the kubelet makes it (makeEnvironmentVariables): the Service
 * link variables (the master's `kubernetes` Service always, the pod namespace's Services when
 * enableServiceLinks), envFrom (ConfigMaps and Secrets, with prefix; invalid names skipped with
 * an event), then env in order (value with $(VAR) expansion, or valueFrom: configMapKeyRef,
 * secretKeyRef, fieldRef, resourceFieldRef), and HOSTNAME as the container runtime sets it.
 * command and args are expanded against the result.
 *
 * ConfigMaps, Secrets and Services are read with one GET each per container start (the
 * kubelet's `Get` change-detection strategy): a change shows in the next container started. */
#include <stdio.h>
#include <string.h>

#include "agent/pods/pods-int.h"
#include "api/quantity.h"
#include "base/base64.h"
#include "base/buf.h"
#include "client/client.h"

/* ---- expansion (third_party/forked/golang/expansion) ---- */

char *kite_pods_env_expand(const char *in, const char *(*lookup)(void *ud, const char *name, size_t len), void *ud) {
    struct kite_buf b = {0};
    size_t n = strlen(in), checkpoint = 0;
    for (size_t cur = 0; cur < n; cur++) {
        if (in[cur] != '$' || cur + 1 >= n) continue;
        kite_buf_append(&b, in + checkpoint, cur - checkpoint);
        const char *s = in + cur + 1;
        size_t advance = 1;
        if (s[0] == '$') {
            kite_buf_putc(&b, '$'); /* $$: an escaped operator */
        } else if (s[0] == '(') {
            const char *close = strchr(s + 1, ')');
            if (close) {
                size_t len = (size_t)(close - s - 1);
                const char *v = lookup(ud, s + 1, len);
                if (v) kite_buf_puts(&b, v);
                else kite_buf_append(&b, in + cur, len + 3); /* unknown: kept as written */
                advance = len + 2;
            } else {
                kite_buf_puts(&b, "$("); /* incomplete reference */
            }
        } else {
            kite_buf_putc(&b, '$');
            kite_buf_putc(&b, s[0]);
        }
        cur += advance;
        checkpoint = cur + 1;
    }
    if (checkpoint < n) kite_buf_append(&b, in + checkpoint, n - checkpoint);
    if (!b.p) kite_buf_puts(&b, "");
    return b.p;
}

/* ---- an ordered map of variables ---- */

void kite_pods_env_set(struct pods_env *e, const char *k, const char *v) {
    for (size_t i = 0; i < e->n; i++)
        if (strcmp(e->k[i], k) == 0) {
            free(e->v[i]);
            e->v[i] = kite_strdup(v);
            return;
        }
    e->k = kite_realloc(e->k, (e->n + 1) * sizeof(char *));
    e->v = kite_realloc(e->v, (e->n + 1) * sizeof(char *));
    e->k[e->n] = kite_strdup(k);
    e->v[e->n++] = kite_strdup(v);
}

const char *kite_pods_env_get(const struct pods_env *e, const char *k, size_t len) {
    for (size_t i = 0; e && i < e->n; i++)
        if (strlen(e->k[i]) == len && memcmp(e->k[i], k, len) == 0) return e->v[i];
    return NULL;
}

void kite_pods_env_del(struct pods_env *e, const char *k) {
    for (size_t i = 0; i < e->n; i++)
        if (strcmp(e->k[i], k) == 0) {
            free(e->k[i]);
            free(e->v[i]);
            memmove(e->k + i, e->k + i + 1, (e->n - i - 1) * sizeof(char *));
            memmove(e->v + i, e->v + i + 1, (e->n - i - 1) * sizeof(char *));
            e->n--;
            return;
        }
}

void kite_pods_env_release(struct pods_env *e) {
    kite_strv_free(e->k, e->n);
    kite_strv_free(e->v, e->n);
    memset(e, 0, sizeof(*e));
}

/* MappingFuncFor(tmpEnv, serviceEnv) */
struct two_envs {
    const struct pods_env *a, *b;
};
static const char *lookup_two(void *ud, const char *name, size_t len) {
    struct two_envs *t = ud;
    const char *v = kite_pods_env_get(t->a, name, len);
    return v ? v : kite_pods_env_get(t->b, name, len);
}

/* IsEnvVarName: [-._a-zA-Z][-._a-zA-Z0-9]* */
bool kite_pods_env_name_valid(const char *s) {
    if (!s || !*s) return false;
    for (const char *q = s; *q; q++) {
        char c = *q;
        bool ok = c == '-' || c == '.' || c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                  (q != s && c >= '0' && c <= '9');
        if (!ok) return false;
    }
    return true;
}

/* ---- Service links (pkg/kubelet/envvars) ---- */

static char *env_name(const char *s) {
    char *r = kite_strdup(s);
    for (char *q = r; *q; q++) *q = *q == '-' ? '_' : (char)(*q >= 'a' && *q <= 'z' ? *q - 32 : *q);
    return r;
}

static void lower(char *s) {
    for (; *s; s++)
        if (*s >= 'A' && *s <= 'Z') *s = (char)(*s + 32);
}

void kite_pods_env_service(struct pods_env *e, json_object *svc) {
    const char *ip = kite_agent_pjs(svc, "spec.clusterIP");
    json_object *ports = kite_agent_pj(svc, "spec.ports");
    size_t np = ports && json_object_is_type(ports, json_type_array) ? json_object_array_length(ports) : 0;
    const char *name = kite_agent_pjs(svc, "metadata.name");
    if (!ip || !*ip || strcmp(ip, "None") == 0 || !name || np == 0) return;
    _cleanup_free_ char *pre = env_name(name);
    _cleanup_free_ char *k = kite_asprintf("%s_SERVICE_HOST", pre);
    kite_pods_env_set(e, k, ip);
    bool v6 = strchr(ip, ':') != NULL;
    _cleanup_free_ char *hp_ip = v6 ? kite_asprintf("[%s]", ip) : kite_strdup(ip);
    for (size_t i = 0; i < np; i++) {
        json_object *sp = json_object_array_get_idx(ports, i);
        int port = (int)json_object_get_int(kite_agent_pj(sp, "port"));
        _cleanup_free_ char *ps = kite_asprintf("%d", port);
        if (i == 0) {
            _cleanup_free_ char *kk = kite_asprintf("%s_SERVICE_PORT", pre);
            kite_pods_env_set(e, kk, ps);
        }
        if (kite_agent_pjs(sp, "name") && *kite_agent_pjs(sp, "name")) {
            _cleanup_free_ char *pn = env_name(kite_agent_pjs(sp, "name"));
            _cleanup_free_ char *kk = kite_asprintf("%s_SERVICE_PORT_%s", pre, pn);
            kite_pods_env_set(e, kk, ps);
        }
    }
    for (size_t i = 0; i < np; i++) {
        json_object *sp = json_object_array_get_idx(ports, i);
        int port = (int)json_object_get_int(kite_agent_pj(sp, "port"));
        const char *proto = kite_agent_pjs(sp, "protocol") && *kite_agent_pjs(sp, "protocol") ? kite_agent_pjs(sp, "protocol") : "TCP";
        _cleanup_free_ char *up = env_name(proto), *lo = kite_strdup(proto);
        lower(lo);
        _cleanup_free_ char *url = kite_asprintf("%s://%s:%d", lo, hp_ip, port);
        if (i == 0) {
            _cleanup_free_ char *kk = kite_asprintf("%s_PORT", pre);
            kite_pods_env_set(e, kk, url);
        }
        _cleanup_free_ char *pp = kite_asprintf("%s_PORT_%d_%s", pre, port, up);
        kite_pods_env_set(e, pp, url);
        _cleanup_free_ char *k1 = kite_asprintf("%s_PROTO", pp), *k2 = kite_asprintf("%s_PORT", pp),
                            *k3 = kite_asprintf("%s_ADDR", pp), *ps = kite_asprintf("%d", port);
        kite_pods_env_set(e, k1, lo);
        kite_pods_env_set(e, k2, ps);
        kite_pods_env_set(e, k3, ip);
    }
}

/* ---- sources read from the API ---- */

struct objs {
    char **keys; /* "c/<name>" or "s/<name>" */
    json_object **o; /* NULL = not found */
    size_t n;
};

static void objs_release(struct objs *c) {
    kite_strv_free(c->keys, c->n);
    for (size_t i = 0; i < c->n; i++) json_object_put(c->o[i]);
    free(c->o);
}

/* GET of a ConfigMap or Secret: 0 with *ret (a new reference; NULL when not found), or < 0
 * with *ret_err. */
int kite_pods_get_object(struct kite_pods *p, const char *ns, bool secret, const char *name, json_object **ret,
                    char **ret_err) {
    _cleanup_free_ char *path =
        kite_asprintf("/api/v1/namespaces/%s/%s/%s", ns, secret ? "secrets" : "configmaps", name);
    json_object *o = NULL;
    long code = 0;
    int r = kite_client_json(p->client, "GET", path, NULL, NULL, &code, &o);
    if (r < 0 && code != 404) {
        const char *m = kite_agent_pjs(o, "message");
        *ret_err = kite_asprintf("failed to get %s %s/%s: %s", secret ? "secret" : "configmap", ns, name,
                                 m ? m : strerror(-r));
        json_object_put(o);
        return r;
    }
    if (r < 0) {
        json_object_put(o);
        o = NULL;
    }
    *ret = o;
    return 0;
}

/* The ConfigMap or Secret: 0 with *ret (NULL when not found), or < 0 with *ret_err. */
static int get_obj(struct kite_pods *p, struct pod *pod, struct objs *c, bool secret, const char *name,
                   json_object **ret, char **ret_err) {
    _cleanup_free_ char *key = kite_asprintf("%c/%s", secret ? 's' : 'c', name);
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->keys[i], key) == 0) {
            *ret = c->o[i];
            return 0;
        }
    json_object *o = NULL;
    int r = kite_pods_get_object(p, pod->ns, secret, name, &o, ret_err);
    if (r < 0) return r;
    c->keys = kite_realloc(c->keys, (c->n + 1) * sizeof(char *));
    c->o = kite_realloc(c->o, (c->n + 1) * sizeof(json_object *));
    c->keys[c->n] = kite_strdup(key);
    c->o[c->n++] = o;
    *ret = o;
    return 0;
}

/* A Secret's value decoded (the API sends base64); NULL when absent or undecodable. */
static char *secret_value(json_object *s, const char *key) {
    json_object *v = NULL;
    if (!json_object_object_get_ex(kite_agent_pj(s, "data"), key, &v) || !json_object_is_type(v, json_type_string)) return NULL;
    char *out = NULL;
    return kite_base64_decode(json_object_get_string(v), &out, NULL) == 0 ? out : NULL;
}

static const char *cm_value(json_object *cm, const char *key) {
    json_object *v = NULL;
    if (!json_object_object_get_ex(kite_agent_pj(cm, "data"), key, &v) || !json_object_is_type(v, json_type_string)) return NULL;
    return json_object_get_string(v);
}

static bool opt(json_object *ref) {
    json_object *o = kite_agent_pj(ref, "optional");
    return o && json_object_get_boolean(o);
}

/* "metadata.labels['k']" -> k */
static char *subscript(const char *path, const char *prefix) {
    size_t n = strlen(prefix);
    if (strncmp(path, prefix, n) != 0 || path[n] != '[' || (path[n + 1] != '\'' && path[n + 1] != '"')) return NULL;
    const char *s = path + n + 2;
    size_t len = strlen(s);
    if (len < 2 || s[len - 1] != ']' || s[len - 2] != path[n + 1]) return NULL;
    return kite_strndup(s, len - 2);
}

static const char *pod_ip(struct pod *pod) {
    json_object *hn = kite_agent_pj(pod->obj, "spec.hostNetwork");
    return hn && json_object_get_boolean(hn) ? pod->host_ip : pod->sandbox_ip;
}

/* podFieldSelectorRuntimeValue */
int kite_pods_field_value(struct pod *pod, const char *path, char **ret, char **ret_err) {
    static const char *const plain[][2] = {
        {"metadata.name", "metadata.name"},   {"metadata.namespace", "metadata.namespace"},
        {"metadata.uid", "metadata.uid"},     {"spec.nodeName", "spec.nodeName"},
        {"spec.serviceAccountName", "spec.serviceAccountName"},
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(plain); i++)
        if (strcmp(path, plain[i][0]) == 0) {
            const char *v = kite_agent_pjs(pod->obj, plain[i][1]);
            *ret = kite_strdup(v ? v : "");
            return 0;
        }
    if (strcmp(path, "status.podIP") == 0 || strcmp(path, "status.podIPs") == 0) {
        const char *ip = pod_ip(pod);
        *ret = kite_strdup(ip ? ip : "");
        return 0;
    }
    if (strcmp(path, "status.hostIP") == 0 || strcmp(path, "status.hostIPs") == 0) {
        *ret = kite_strdup(pod->host_ip ? pod->host_ip : "");
        return 0;
    }
    static const char *const maps[] = {"metadata.labels", "metadata.annotations"};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(maps); i++) {
        _cleanup_free_ char *k = subscript(path, maps[i]);
        if (!k) continue;
        json_object *v = NULL;
        json_object_object_get_ex(kite_agent_pj(pod->obj, maps[i]), k, &v);
        *ret = kite_strdup(v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "");
        return 0;
    }
    *ret_err = kite_asprintf("unsupported fieldPath: %s", path);
    return -EINVAL;
}

json_object *kite_pods_find_ctr(struct pod *pod, const char *name) {
    for (size_t i = 0; i < pod->nc; i++)
        if (strcmp(pod->c[i].name, name) == 0) return pod->c[i].spec;
    return NULL;
}

/* ExtractContainerResourceValue, unset limits being the node's allocatable. */
int kite_pods_env_resource_value(json_object *ctr, const char *resource, const char *divisor, int64_t alloc_cpu_m,
                            int64_t alloc_mem_m, char **ret, char **ret_err) {
    const char *dot = strchr(resource, '.');
    if (!dot || (strncmp(resource, "limits", (size_t)(dot - resource)) != 0 &&
                 strncmp(resource, "requests", (size_t)(dot - resource)) != 0)) {
        *ret_err = kite_asprintf("unsupported container resource : %s", resource);
        return -EINVAL;
    }
    bool limits = resource[0] == 'l';
    const char *name = dot + 1;
    bool cpu = strcmp(name, "cpu") == 0;
    if (!cpu && strcmp(name, "memory") != 0 && strcmp(name, "ephemeral-storage") != 0 &&
        strncmp(name, "hugepages-", 10) != 0) {
        *ret_err = kite_asprintf("unsupported container resource : %s", resource);
        return -EINVAL;
    }
    int64_t v = 0, d = 0;
    const char *q = kite_agent_pjs(kite_agent_pj(ctr, limits ? "resources.limits" : "resources.requests"), name);
    if (!q && !limits) q = kite_agent_pjs(kite_agent_pj(ctr, "resources.limits"), name); /* requests default to limits */
    if (q) kite_quantity_parse_milli(q, &v);
    else if (limits && cpu && alloc_cpu_m > 0) v = alloc_cpu_m;
    else if (limits && strcmp(name, "memory") == 0 && alloc_mem_m > 0) v = alloc_mem_m;
    if (!divisor || kite_quantity_parse_milli(divisor, &d) < 0 || d <= 0) d = 1000;
    if (!cpu) { /* memory and storage: Value(), whole units rounded up */
        v = (v + 999) / 1000;
        d = (d + 999) / 1000;
    }
    *ret = kite_asprintf("%lld", (long long)(v <= 0 ? 0 : (v + d - 1) / d));
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void invalid_keys_event(struct kite_pods *p, struct pod *pod, char **bad, size_t nbad, const char *what,
                               const char *name) {
    if (!nbad) return;
    qsort(bad, nbad, sizeof(char *), cmp_str);
    struct kite_buf b = {0};
    for (size_t i = 0; i < nbad; i++) kite_buf_printf(&b, "%s%s", i ? ", " : "", bad[i]);
    _cleanup_free_ char *m = kite_asprintf("Keys [%s] from the EnvFrom %s %s/%s were skipped since they are "
                                           "considered invalid environment variable names.",
                                           b.p, what, pod->ns, name);
    kite_buf_release(&b);
    kite_recorder_pod_event(&p->rec, pod->obj, NULL, "Warning", "InvalidEnvironmentVariableNames", m);
}

/* The ConfigMap or Secret ref names: 1 with *ret; 0 when it is absent but optional; -ENOENT
 * with the kubelet's message when it is absent; or get_obj's error. */
static int get_ref(struct kite_pods *p, struct pod *pod, struct objs *cache, bool secret, json_object *ref, const char *name,
                   json_object **ret, char **ret_err) {
    int r = get_obj(p, pod, cache, secret, name, ret, ret_err);
    if (r < 0) return r;
    if (*ret) return 1;
    if (opt(ref)) return 0;
    *ret_err = kite_asprintf("%s \"%s\" not found", secret ? "secret" : "configmap", name);
    return -ENOENT;
}

static int env_from(struct kite_pods *p, struct pod *pod, struct objs *cache, json_object *ef, struct pods_env *tmp,
                    char **ret_err) {
    bool secret = kite_agent_pj(ef, "secretRef") != NULL;
    json_object *ref = kite_agent_pj(ef, secret ? "secretRef" : "configMapRef");
    const char *name = kite_agent_pjs(ref, "name");
    if (!ref || !name) return 0;
    json_object *o = NULL;
    int r = get_ref(p, pod, cache, secret, ref, name, &o, ret_err);
    if (r <= 0) return r;
    const char *prefix = kite_agent_pjs(ef, "prefix") ? kite_agent_pjs(ef, "prefix") : "";
    char **bad = NULL;
    size_t nbad = 0;
    json_object *data = kite_agent_pj(o, "data");
    if (data && json_object_is_type(data, json_type_object)) {
        json_object_object_foreach(data, k, v) {
            (void)v;
            _cleanup_free_ char *key = kite_asprintf("%s%s", prefix, k);
            if (!kite_pods_env_name_valid(key)) {
                bad = kite_realloc(bad, (nbad + 1) * sizeof(char *));
                bad[nbad++] = kite_strdup(key);
                continue;
            }
            _cleanup_free_ char *sv = secret ? secret_value(o, k) : NULL;
            const char *val = secret ? sv : cm_value(o, k);
            kite_pods_env_set(tmp, key, val ? val : "");
        }
    }
    invalid_keys_event(p, pod, bad, nbad, secret ? "secret" : "configMap", name);
    kite_strv_free(bad, nbad);
    return 0;
}

/* One env entry's value; *ret NULL = skipped (an optional source that is absent). */
static int value_from(struct kite_pods *p, struct pod *pod, json_object *ctr, struct objs *cache, json_object *vf,
                      char **ret, char **ret_err) {
    json_object *ref;
    *ret = NULL;
    if ((ref = kite_agent_pj(vf, "fieldRef"))) return kite_pods_field_value(pod, kite_agent_pjs(ref, "fieldPath") ? kite_agent_pjs(ref, "fieldPath") : "", ret, ret_err);
    if ((ref = kite_agent_pj(vf, "resourceFieldRef"))) {
        const char *cn = kite_agent_pjs(ref, "containerName");
        json_object *c = cn && *cn ? kite_pods_find_ctr(pod, cn) : ctr;
        if (!c) {
            *ret_err = kite_asprintf("container %s not found", cn);
            return -ENOENT;
        }
        return kite_pods_env_resource_value(c, kite_agent_pjs(ref, "resource") ? kite_agent_pjs(ref, "resource") : "", kite_agent_pjs(ref, "divisor"),
                                       p->alloc_cpu_m, p->alloc_mem_m, ret, ret_err);
    }
    bool secret = kite_agent_pj(vf, "secretKeyRef") != NULL;
    ref = kite_agent_pj(vf, secret ? "secretKeyRef" : "configMapKeyRef");
    if (!ref) return 0;
    const char *name = kite_agent_pjs(ref, "name") ? kite_agent_pjs(ref, "name") : "", *key = kite_agent_pjs(ref, "key") ? kite_agent_pjs(ref, "key") : "";
    json_object *o = NULL;
    int r = get_ref(p, pod, cache, secret, ref, name, &o, ret_err);
    if (r <= 0) return r;
    char *v = secret ? secret_value(o, key) : (cm_value(o, key) ? kite_strdup(cm_value(o, key)) : NULL);
    if (!v) {
        if (opt(ref)) return 0;
        *ret_err = kite_asprintf("couldn't find key %s in %s %s/%s", key, secret ? "Secret" : "ConfigMap", pod->ns, name);
        return -ENOENT;
    }
    *ret = v;
    return 0;
}

static void service_env(struct kite_pods *p, struct pod *pod, struct pods_env *svc) {
    json_object *links = kite_agent_pj(pod->obj, "spec.enableServiceLinks");
    bool all = !links || json_object_get_boolean(links);
    json_object *o = NULL;
    if (all) {
        _cleanup_free_ char *path = kite_asprintf("/api/v1/namespaces/%s/services", pod->ns);
        if (kite_client_json(p->client, "GET", path, NULL, NULL, NULL, &o) == 0) {
            json_object *items = kite_agent_pj(o, "items");
            size_t n = items && json_object_is_type(items, json_type_array) ? json_object_array_length(items) : 0;
            for (size_t i = 0; i < n; i++) {
                json_object *s = json_object_array_get_idx(items, i);
                /* the master's service comes from its own namespace below */
                if (strcmp(pod->ns, "default") == 0 && kite_streq(kite_agent_pjs(s, "metadata.name"), "kubernetes")) continue;
                kite_pods_env_service(svc, s);
            }
        }
        json_object_put(o);
        o = NULL;
    }
    if (kite_client_json(p->client, "GET", "/api/v1/namespaces/default/services/kubernetes", NULL, NULL, NULL, &o) == 0)
        kite_pods_env_service(svc, o);
    json_object_put(o);
}

int kite_pods_env_build(struct kite_pods *p, struct pod *pod, json_object *ctr, const char *hostname, struct pods_env *ret,
                   char **ret_err) {
    struct pods_env tmp = {0}, svc = {0};
    struct objs cache = {0};
    int r = 0;
    service_env(p, pod, &svc);
    json_object *froms = kite_agent_pj(ctr, "envFrom");
    size_t nf = froms && json_object_is_type(froms, json_type_array) ? json_object_array_length(froms) : 0;
    for (size_t i = 0; i < nf && r == 0; i++) r = env_from(p, pod, &cache, json_object_array_get_idx(froms, i), &tmp, ret_err);
    json_object *envs = kite_agent_pj(ctr, "env");
    size_t ne = envs && json_object_is_type(envs, json_type_array) ? json_object_array_length(envs) : 0;
    for (size_t i = 0; i < ne && r == 0; i++) {
        json_object *e = json_object_array_get_idx(envs, i);
        const char *name = kite_agent_pjs(e, "name");
        if (!name) continue;
        char *v = NULL;
        const char *value = kite_agent_pjs(e, "value");
        if (value && *value) {
            struct two_envs t = {&tmp, &svc};
            v = kite_pods_env_expand(value, lookup_two, &t);
        } else if (kite_agent_pj(e, "valueFrom")) {
            r = value_from(p, pod, ctr, &cache, kite_agent_pj(e, "valueFrom"), &v, ret_err);
            if (r < 0 || !v) continue;
        }
        kite_pods_env_del(&svc, name);
        kite_pods_env_set(&tmp, name, v ? v : "");
        free(v);
    }
    objs_release(&cache);
    if (r < 0) {
        kite_pods_env_release(&tmp);
        kite_pods_env_release(&svc);
        return r;
    }
    /* the runtime's HOSTNAME first: the pod's own variables win */
    kite_pods_env_set(ret, "HOSTNAME", hostname);
    for (size_t i = 0; i < tmp.n; i++) kite_pods_env_set(ret, tmp.k[i], tmp.v[i]);
    for (size_t i = 0; i < svc.n; i++)
        if (!kite_pods_env_get(&tmp, svc.k[i], strlen(svc.k[i]))) kite_pods_env_set(ret, svc.k[i], svc.v[i]);
    kite_pods_env_release(&tmp);
    kite_pods_env_release(&svc);
    return 0;
}

static const char *lookup_one(void *ud, const char *name, size_t len) { return kite_pods_env_get(ud, name, len); }

char **kite_pods_env_expand_argv(json_object *arr, const struct pods_env *env, size_t *ret_n) {
    size_t n = arr && json_object_is_type(arr, json_type_array) ? json_object_array_length(arr) : 0;
    char **v = kite_calloc(n + 1, sizeof(char *));
    for (size_t i = 0; i < n; i++) {
        const char *s = json_object_get_string(json_object_array_get_idx(arr, i));
        v[i] = kite_pods_env_expand(s ? s : "", lookup_one, (void *)env);
    }
    *ret_n = n;
    return v;
}
