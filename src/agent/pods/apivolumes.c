/* configMap, secret, downwardAPI and projected volumes: their files as the kubelet's volume
 * plugins make them (MakePayload of pkg/volume/configmap and secret, CollectData of
 * downwardapi and projected), written by the atomic writer (atomicwriter.c) into the pod's
 * volume directory (volumes.c).
 *
 * Their ConfigMaps and Secrets are read as the kubelet's watch-based manager reads them: one
 * informer per referenced object (a list + watch with fieldSelector metadata.name=NAME, what
 * the Node authorizer allows a node for objects its pods refer to), kept while a pod on the
 * node refers to it. A change marks the referring pods for a sync, whose volume setup rewrites
 * the files: a running pod sees an update within about a second. Until an informer has its
 * first list, past KITE_PODS_VOLUME_WATCHES_MAX objects, or without threads (unit tests), the
 * object is read with a GET, and the pod is synced again every KITE_PODS_VOLUME_POLL_NS (the
 * kubelet's sync period) to see changes.
 *
 * A projected volume's sources are rows of one table: a new kind of source is one function. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent/pods/pods-int.h"
#include "base/base64.h"
#include "base/buf.h"
#include "base/log.h"
#include "client/informer.h"

#define DEFAULT_MODE 0644

/* ---- the objects' informers ---- */

struct vobj {
    struct kite_pods *p;
    char *key;                 /* "c/<ns>/<name>" or "s/<ns>/<name>" */
    struct kite_informer *inf;
    json_object *obj;          /* under vobjs->lock: the latest (a private copy), NULL = absent */
    bool synced;               /* under lock: the first list arrived */
    char **uids;               /* pods referring to it */
    size_t n_uids;
};

struct pods_vobjs {
    pthread_mutex_t lock;
    struct vobj **v;
    size_t n;
    char **changed; /* pod uids to sync */
    size_t n_changed;
    bool stopped;
};

void kite_pods_vobjs_init(struct kite_pods *p) {
    p->vobjs = kite_calloc(1, sizeof(*p->vobjs));
    pthread_mutex_init(&p->vobjs->lock, NULL);
}

static void vobj_free(struct vobj *v) {
    kite_informer_stop(v->inf);
    json_object_put(v->obj);
    kite_strv_free(v->uids, v->n_uids);
    free(v->key);
    free(v);
}

void kite_pods_vobjs_stop(struct kite_pods *p) {
    struct pods_vobjs *s = p->vobjs;
    if (!s) return;
    pthread_mutex_lock(&s->lock);
    struct vobj **v = s->v;
    size_t n = s->n;
    s->v = NULL;
    s->n = 0;
    s->stopped = true;
    pthread_mutex_unlock(&s->lock);
    for (size_t i = 0; i < n; i++) vobj_free(v[i]);
    free(v);
}

void kite_pods_vobjs_free(struct kite_pods *p) {
    if (!p->vobjs) return;
    kite_pods_vobjs_stop(p);
    kite_strv_free(p->vobjs->changed, p->vobjs->n_changed);
    pthread_mutex_destroy(&p->vobjs->lock);
    free(p->vobjs);
    p->vobjs = NULL;
}

/* Under lock: the referring pods are to be synced. */
static void changed_locked(struct pods_vobjs *s, struct vobj *v) {
    for (size_t i = 0; i < v->n_uids; i++) {
        bool have = false;
        for (size_t j = 0; j < s->n_changed && !have; j++) have = strcmp(s->changed[j], v->uids[i]) == 0;
        if (have) continue;
        s->changed = kite_realloc(s->changed, (s->n_changed + 1) * sizeof(char *));
        s->changed[s->n_changed++] = kite_strdup(v->uids[i]);
    }
}

static void wake_pods(struct kite_pods *p) {
    uint64_t one = 1;
    if (write(p->wake_fd, &one, sizeof(one)) < 0) { /* full counter: already woken */
    }
}

/* informer thread: the object is now obj (NULL = deleted) */
static void set_obj(struct vobj *v, json_object *obj) {
    json_object *c = NULL;
    if (obj) json_object_deep_copy(obj, &c, NULL);
    struct pods_vobjs *s = v->p->vobjs;
    pthread_mutex_lock(&s->lock);
    json_object *old = v->obj;
    v->obj = c;
    changed_locked(s, v);
    pthread_mutex_unlock(&s->lock);
    json_object_put(old);
    wake_pods(v->p);
}

static void on_add(void *ud, json_object *obj) { set_obj(ud, obj); }
static void on_update(void *ud, json_object *old, json_object *obj) {
    (void)old;
    set_obj(ud, obj);
}
static void on_del(void *ud, json_object *obj) {
    (void)obj;
    set_obj(ud, NULL);
}
static void on_synced(void *ud) {
    struct vobj *v = ud;
    struct pods_vobjs *s = v->p->vobjs;
    pthread_mutex_lock(&s->lock);
    bool first = !v->synced;
    v->synced = true;
    if (first) changed_locked(s, v); /* a pod waiting for a missing object looks again */
    pthread_mutex_unlock(&s->lock);
    if (first) wake_pods(v->p);
}

/* The object for pod uid (registering the reference, starting its informer): true with *ret
 * (a private copy, NULL = absent) once the informer has listed; false = not known yet. */
static bool vobj_get(struct kite_pods *p, const char *uid, bool secret, const char *ns, const char *name,
                     json_object **ret) {
    struct pods_vobjs *s = p->vobjs;
    if (!s || !p->threads) return false;
    _cleanup_free_ char *key = kite_asprintf("%c/%s/%s", secret ? 's' : 'c', ns, name);
    pthread_mutex_lock(&s->lock);
    if (s->stopped) {
        pthread_mutex_unlock(&s->lock);
        return false;
    }
    struct vobj *v = NULL;
    for (size_t i = 0; i < s->n && !v; i++)
        if (strcmp(s->v[i]->key, key) == 0) v = s->v[i];
    if (!v && s->n >= KITE_PODS_VOLUME_WATCHES_MAX) {
        pthread_mutex_unlock(&s->lock);
        return false;
    }
    if (!v) {
        v = kite_calloc(1, sizeof(*v));
        v->p = p;
        v->key = kite_strdup(key);
        _cleanup_free_ char *path = kite_asprintf("/api/v1/namespaces/%s/%s", ns, secret ? "secrets" : "configmaps");
        _cleanup_free_ char *sel = kite_asprintf("fieldSelector=metadata.name%%3D%s", name);
        struct kite_informer_options io = {.client = p->client, .path = path, .selector = sel,
                                           .name = secret ? "vol-secret" : "vol-configmap", .n_handlers = 1};
        io.handlers[0] = (struct kite_informer_handlers){.add = on_add, .update = on_update, .del = on_del,
                                                         .synced = on_synced, .ud = v};
        s->v = kite_realloc(s->v, (s->n + 1) * sizeof(*s->v));
        s->v[s->n++] = v;
        /* its handlers take the lock: they wait until this call is done */
        if (kite_informer_start(&io, &v->inf) < 0) log_warn(PODS_LOG, "cannot watch %s: no thread", key);
    }
    bool have = false;
    for (size_t i = 0; i < v->n_uids && !have; i++) have = strcmp(v->uids[i], uid) == 0;
    if (!have) {
        v->uids = kite_realloc(v->uids, (v->n_uids + 1) * sizeof(char *));
        v->uids[v->n_uids++] = kite_strdup(uid);
    }
    bool synced = v->synced;
    *ret = NULL;
    if (synced && v->obj) json_object_deep_copy(v->obj, ret, NULL);
    pthread_mutex_unlock(&s->lock);
    return synced;
}

void kite_pods_vobjs_forget(struct kite_pods *p, const char *uid) {
    struct pods_vobjs *s = p->vobjs;
    if (!s) return;
    struct vobj **gone = NULL;
    size_t n_gone = 0;
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < s->n;) {
        struct vobj *v = s->v[i];
        for (size_t j = 0; j < v->n_uids; j++)
            if (strcmp(v->uids[j], uid) == 0) {
                free(v->uids[j]);
                v->uids[j] = v->uids[--v->n_uids];
                break;
            }
        if (v->n_uids) {
            i++;
            continue;
        }
        gone = kite_realloc(gone, (n_gone + 1) * sizeof(*gone));
        gone[n_gone++] = v;
        s->v[i] = s->v[--s->n];
    }
    pthread_mutex_unlock(&s->lock);
    /* outside the lock: a handler running now takes it before its informer can end */
    for (size_t i = 0; i < n_gone; i++) vobj_free(gone[i]);
    free(gone);
}

void kite_pods_vobjs_mark_changed(struct kite_pods *p) {
    struct pods_vobjs *s = p->vobjs;
    if (!s) return;
    pthread_mutex_lock(&s->lock);
    char **uids = s->changed;
    size_t n = s->n_changed;
    s->changed = NULL;
    s->n_changed = 0;
    pthread_mutex_unlock(&s->lock);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < p->n_pods; j++)
            if (strcmp(p->pods[j]->uid, uids[i]) == 0) p->pods[j]->dirty = true;
    kite_strv_free(uids, n);
}

/* The ConfigMap or Secret of the pod's namespace: 0 with *ret (a new reference, NULL when
 * absent), or < 0 with *ret_err. */
static int get_object(struct kite_pods *p, struct pod *pod, bool secret, const char *name, json_object **ret,
                      char **ret_err) {
    if (vobj_get(p, pod->uid, secret, pod->ns, name, ret)) return 0;
    pod->volumes_polled = true;
    return kite_pods_get_object(p, pod->ns, secret, name, ret, ret_err);
}

/* ---- payloads ---- */

struct vctx {
    struct kite_pods *p;
    struct pod *pod;
    struct pods_payload *pl;
    mode_t default_mode;
    struct kite_buf errs; /* upstream's aggregate: "a" or "[a, b]" */
    size_t n_errs;
};

static void add_err(struct vctx *c, char *msg) {
    kite_buf_printf(&c->errs, "%s%s", c->n_errs ? ", " : "", msg);
    c->n_errs++;
    free(msg);
}

static mode_t mode_of(json_object *o, const char *field, mode_t dflt) {
    json_object *m = kite_agent_pj(o, field);
    return m && json_object_is_type(m, json_type_int) ? (mode_t)(json_object_get_int64(m) & 0777) : dflt;
}

static bool optional(json_object *src) {
    json_object *o = kite_agent_pj(src, "optional");
    return o && json_object_get_boolean(o);
}

/* A key's bytes: data (a string; base64 for a Secret), or binaryData of a ConfigMap (base64). */
static bool value_of(json_object *obj, bool secret, const char *key, char **ret, size_t *ret_len) {
    json_object *v = NULL;
    if (json_object_object_get_ex(kite_agent_pj(obj, "data"), key, &v) && json_object_is_type(v, json_type_string)) {
        if (secret) return kite_base64_decode(json_object_get_string(v), ret, ret_len) == 0;
        *ret_len = (size_t)json_object_get_string_len(v);
        *ret = kite_strndup(json_object_get_string(v), *ret_len);
        return true;
    }
    if (!secret && json_object_object_get_ex(kite_agent_pj(obj, "binaryData"), key, &v) && json_object_is_type(v, json_type_string))
        return kite_base64_decode(json_object_get_string(v), ret, ret_len) == 0;
    return false;
}

static void add_path(struct vctx *c, const char *path, const char *data, size_t len, mode_t mode) {
    char *err = NULL;
    char *clean = kite_pods_payload_path_clean(path, &err);
    if (!clean) {
        add_err(c, err);
        return;
    }
    kite_pods_payload_add(c->pl, clean, data, len, mode);
    free(clean);
}

/* MakePayload of the configMap and secret plugins: every key, or the items' key -> path. */
static void object_source(struct vctx *c, json_object *src, bool secret) {
    const char *name = kite_agent_pjs(src, secret ? "secretName" : "name");
    if (!name) name = kite_agent_pjs(src, "name"); /* a projected secret source names it "name" */
    json_object *obj = NULL;
    char *err = NULL;
    if (get_object(c->p, c->pod, secret, name ? name : "", &obj, &err) < 0) {
        add_err(c, err);
        return;
    }
    if (!obj) {
        if (!optional(src)) add_err(c, kite_asprintf("%s \"%s\" not found", secret ? "secret" : "configmap", name ? name : ""));
        return;
    }
    json_object *items = kite_agent_pj(src, "items");
    size_t n = items && json_object_is_type(items, json_type_array) ? json_object_array_length(items) : 0;
    if (!n) {
        static const char *const maps[] = {"data", "binaryData"};
        for (size_t m = 0; m < (secret ? 1u : 2u); m++) {
            json_object *d = kite_agent_pj(obj, maps[m]);
            if (!d || !json_object_is_type(d, json_type_object)) continue;
            json_object_object_foreach(d, k, val) {
                (void)val;
                char *data = NULL;
                size_t len = 0;
                if (!value_of(obj, secret, k, &data, &len)) continue;
                add_path(c, k, data, len, c->default_mode);
                free(data);
            }
        }
    }
    for (size_t i = 0; i < n; i++) {
        json_object *it = json_object_array_get_idx(items, i);
        const char *key = kite_agent_pjs(it, "key") ? kite_agent_pjs(it, "key") : "";
        char *data = NULL;
        size_t len = 0;
        if (!value_of(obj, secret, key, &data, &len)) {
            if (optional(src)) continue;
            add_err(c, secret ? kite_asprintf("references non-existent secret key: %s", key)
                              : kite_asprintf("configmap references non-existent config key: %s", key));
            break;
        }
        add_path(c, kite_agent_pjs(it, "path") ? kite_agent_pjs(it, "path") : "", data, len, mode_of(it, "mode", c->default_mode));
        free(data);
    }
    json_object_put(obj);
}

static int configmap_source(struct vctx *c, json_object *src) {
    object_source(c, src, false);
    return 0;
}

static int secret_source(struct vctx *c, json_object *src) {
    object_source(c, src, true);
    return 0;
}

/* fieldpath.FormatMap: sorted key="value" lines, the value quoted as Go's %q */
static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void go_quote(struct kite_buf *b, const char *s) {
    kite_buf_putc(b, '"');
    for (const unsigned char *q = (const unsigned char *)s; *q; q++) {
        static const char esc[] = {['\a'] = 'a', ['\b'] = 'b', ['\f'] = 'f', ['\n'] = 'n',
                                   ['\r'] = 'r', ['\t'] = 't', ['\v'] = 'v'};
        if (*q == '"' || *q == '\\') kite_buf_printf(b, "\\%c", *q);
        else if (*q < sizeof(esc) && esc[*q]) kite_buf_printf(b, "\\%c", esc[*q]);
        else if (*q < 0x20 || *q == 0x7f) kite_buf_printf(b, "\\x%02x", *q);
        else kite_buf_putc(b, (char)*q);
    }
    kite_buf_putc(b, '"');
}

char *kite_pods_format_map(json_object *m) {
    size_t n = m && json_object_is_type(m, json_type_object) ? (size_t)json_object_object_length(m) : 0;
    const char **keys = kite_calloc(n + 1, sizeof(char *));
    size_t k = 0;
    if (n) {
        json_object_object_foreach(m, key, val) {
            (void)val;
            keys[k++] = key;
        }
    }
    qsort(keys, k, sizeof(char *), cmp_str);
    struct kite_buf b = {0};
    for (size_t i = 0; i < k; i++) {
        json_object *v = NULL;
        json_object_object_get_ex(m, keys[i], &v);
        kite_buf_printf(&b, "%s%s=", i ? "\n" : "", keys[i]);
        go_quote(&b, v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "");
    }
    free(keys);
    return kite_buf_detach(&b, NULL);
}

/* CollectData of the downwardAPI plugin */
static int downward_items(struct vctx *c, json_object *items) {
    size_t n = items && json_object_is_type(items, json_type_array) ? json_object_array_length(items) : 0;
    for (size_t i = 0; i < n; i++) {
        json_object *it = json_object_array_get_idx(items, i), *ref;
        char *v = NULL, *err = NULL;
        int r = 0;
        if ((ref = kite_agent_pj(it, "fieldRef"))) {
            const char *fp = kite_agent_pjs(ref, "fieldPath") ? kite_agent_pjs(ref, "fieldPath") : "";
            if (strcmp(fp, "metadata.labels") == 0 || strcmp(fp, "metadata.annotations") == 0)
                v = kite_pods_format_map(kite_agent_pj(c->pod->obj, fp));
            else
                r = kite_pods_field_value(c->pod, fp, &v, &err);
        } else if ((ref = kite_agent_pj(it, "resourceFieldRef"))) {
            const char *cn = kite_agent_pjs(ref, "containerName") ? kite_agent_pjs(ref, "containerName") : "";
            json_object *ctr = kite_pods_find_ctr(c->pod, cn);
            if (!ctr) {
                err = kite_asprintf("container %s not found", cn);
                r = -ENOENT;
            } else {
                r = kite_pods_env_resource_value(ctr, kite_agent_pjs(ref, "resource") ? kite_agent_pjs(ref, "resource") : "", kite_agent_pjs(ref, "divisor"),
                                            c->p->alloc_cpu_m, c->p->alloc_mem_m, &v, &err);
            }
        } else {
            continue;
        }
        if (r < 0) {
            add_err(c, err);
            continue;
        }
        add_path(c, kite_agent_pjs(it, "path") ? kite_agent_pjs(it, "path") : "", v, strlen(v), mode_of(it, "mode", c->default_mode));
        free(v);
    }
    return 0;
}

static int downward_source(struct vctx *c, json_object *src) { return downward_items(c, kite_agent_pj(src, "items")); }

/* A source this node cannot serve yet: the volume fails to mount with this message rather than
 * coming up without its files. */
static int unsupported_source(struct vctx *c, json_object *src, const char *kind) {
    (void)src;
    add_err(c, kite_asprintf("projected source %s is not supported by this node", kind));
    return -ENOTSUP;
}

/* The kubelet's projected serviceAccountToken: a TokenRequest bound to the pod (satoken.c),
 * cached until 80% of its life; the pod is synced again when the token is due, which writes the
 * new one through the atomic writer. */
static int token_source(struct vctx *c, json_object *src) {
    struct kite_satoken_req r;
    const char *path = NULL, *why = NULL;
    unsigned mode = 0;
    if (kite_satoken_source(c->pod->obj, src, c->default_mode, &r, &path, &mode, &why) < 0) {
        add_err(c, kite_strdup(why));
        return -EINVAL;
    }
    char *tok = NULL, *err = NULL;
    int64_t at = 0;
    int rc = kite_satokens_get(c->p->satokens, &r, &tok, &at, &err);
    if (rc < 0) {
        add_err(c, err);
        return rc;
    }
    add_path(c, path, tok, strlen(tok), (mode_t)mode);
    explicit_bzero(tok, strlen(tok));
    free(tok);
    if (!c->pod->token_refresh_at || at < c->pod->token_refresh_at) c->pod->token_refresh_at = at;
    return 0;
}
static int bundle_source(struct vctx *c, json_object *src) { return unsupported_source(c, src, "clusterTrustBundle"); }

/* A projected volume's sources, one row per kind. */
static const struct {
    const char *field;
    int (*fn)(struct vctx *c, json_object *src);
} projected_sources[] = {
    {"configMap", configmap_source},
    {"secret", secret_source},
    {"downwardAPI", downward_source},
    {"serviceAccountToken", token_source},
    {"clusterTrustBundle", bundle_source},
};

static int projected(struct vctx *c, json_object *vol) {
    json_object *srcs = kite_agent_pj(vol, "sources");
    size_t n = srcs && json_object_is_type(srcs, json_type_array) ? json_object_array_length(srcs) : 0;
    for (size_t i = 0; i < n; i++) {
        json_object *s = json_object_array_get_idx(srcs, i);
        for (size_t k = 0; k < KITE_ARRAY_SIZE(projected_sources); k++) {
            json_object *src = kite_agent_pj(s, projected_sources[k].field);
            if (src) projected_sources[k].fn(c, src);
        }
    }
    return 0;
}

/* The volume kinds, their plugin directories and whether they are kept in memory (the
 * kubelet wraps secret, downwardAPI and projected volumes in a memory-backed emptyDir). */
static const struct {
    const char *field, *plugin;
    bool tmpfs;
} kinds[] = {
    {"configMap", "kubernetes.io~configmap", false},
    {"secret", "kubernetes.io~secret", true},
    {"downwardAPI", "kubernetes.io~downward-api", true},
    {"projected", "kubernetes.io~projected", true},
};

const char *kite_pods_api_volume_plugin(json_object *vol, bool *ret_tmpfs) {
    for (size_t i = 0; i < KITE_ARRAY_SIZE(kinds); i++)
        if (kite_agent_pj(vol, kinds[i].field)) {
            if (ret_tmpfs) *ret_tmpfs = kinds[i].tmpfs;
            return kinds[i].plugin;
        }
    return NULL;
}

int kite_pods_api_volume_payload(struct kite_pods *p, struct pod *pod, json_object *vol, struct pods_payload *ret,
                            char **ret_err) {
    struct vctx c = {.p = p, .pod = pod, .pl = ret};
    json_object *src;
    if ((src = kite_agent_pj(vol, "configMap"))) {
        c.default_mode = mode_of(src, "defaultMode", DEFAULT_MODE);
        configmap_source(&c, src);
    } else if ((src = kite_agent_pj(vol, "secret"))) {
        c.default_mode = mode_of(src, "defaultMode", DEFAULT_MODE);
        secret_source(&c, src);
    } else if ((src = kite_agent_pj(vol, "downwardAPI"))) {
        c.default_mode = mode_of(src, "defaultMode", DEFAULT_MODE);
        downward_source(&c, src);
    } else if ((src = kite_agent_pj(vol, "projected"))) {
        c.default_mode = mode_of(src, "defaultMode", DEFAULT_MODE);
        projected(&c, src);
    } else {
        *ret_err = kite_strdup("not a configMap, secret, downwardAPI or projected volume");
        return -EINVAL;
    }
    if (c.n_errs) {
        *ret_err = c.n_errs == 1 ? kite_buf_detach(&c.errs, NULL) : kite_asprintf("[%s]", c.errs.p);
        kite_buf_release(&c.errs);
        kite_pods_payload_release(ret);
        return -ENOENT;
    }
    kite_buf_release(&c.errs);
    /* SetVolumeOwnership with the pod's fsGroup: its group reads every file (a read-only volume) */
    json_object *fsg = kite_agent_pj(pod->obj, "spec.securityContext.fsGroup");
    if (fsg && json_object_is_type(fsg, json_type_int) && json_object_get_int64(fsg) >= 0) {
        ret->has_gid = true;
        ret->gid = (gid_t)json_object_get_int64(fsg);
        for (size_t i = 0; i < ret->n; i++) ret->f[i].mode |= 0440;
    }
    if (ret->bytes > KITE_PODS_VOLUME_MAX_BYTES) {
        *ret_err = kite_asprintf("the volume's files are %zu bytes, more than this node's limit of %u", ret->bytes,
                                 KITE_PODS_VOLUME_MAX_BYTES);
        kite_pods_payload_release(ret);
        return -EFBIG;
    }
    return 0;
}
