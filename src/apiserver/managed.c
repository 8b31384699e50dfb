/* managedFields: who set which field of an object, kept on every write as kube-apiserver's
 * field manager does (k8s.io/apimachinery/pkg/util/managedfields), and server-side apply.
 *
 * Each entry of metadata.managedFields is one manager's set for one operation: Update
 * entries (create, update, patch) per manager, apiVersion and subresource; Apply entries
 * per manager and subresource. A write that changes fields gives them to its manager (the
 * fieldManager parameter, else the User-Agent before its '/') and takes them from every
 * other entry; a field removed leaves every set. An entry left empty goes. A write that
 * changes nothing leaves the entries (and their times) as they were, so it stays a no-op.
 *
 * An apply merges the applied configuration into the object (fieldset.h), removes what the
 * manager applied before and no longer does unless another manager has it, and refuses with
 * 409 (FieldManagerConflict causes) to change a field another manager set, unless force. */
#include "apiserver/write.h"
#include "api/fieldset.h"
#include "api/status.h"
#include "base/clock.h"

#include <stdio.h>

#define KITE_FIELD_MANAGER_MAX 128 /* bytes of a manager's name, as upstream */
/* Update entries an object keeps, as upstream's DefaultMaxUpdateManagers; the oldest beyond it
 * are merged, per apiVersion, into one entry of this manager. */
#define KITE_MAX_UPDATE_MANAGERS 10
#define KITE_OLD_UPDATES_MANAGER "ancient-changes"

struct entry {
    char *manager, *operation, *api_version, *subresource, *time;
    json_object *set;      /* internal form (fieldset.h) */
    json_object *orig_v1;  /* borrowed from the current object: rendered again when !dirty */
    bool dirty;
};

struct entries {
    struct entry *v;
    size_t n;
};

static void entries_release(struct entries *es) {
    for (size_t i = 0; i < es->n; i++) {
        struct entry *e = &es->v[i];
        free(e->manager), free(e->operation), free(e->api_version), free(e->subresource), free(e->time);
        json_object_put(e->set);
    }
    free(es->v);
    es->v = NULL;
    es->n = 0;
}

static char *dup_or_null(const char *s) { return s && *s ? kite_strdup(s) : NULL; }

static struct entry *entry_add(struct entries *es, const char *manager, const char *operation, const char *av,
                               const char *sub) {
    es->v = kite_realloc(es->v, (es->n + 1) * sizeof *es->v);
    struct entry *e = &es->v[es->n++];
    *e = (struct entry){.manager = kite_strdup(manager ? manager : ""), .operation = kite_strdup(operation),
                        .api_version = dup_or_null(av), .subresource = dup_or_null(sub), .set = kite_fieldset_new(),
                        .dirty = true};
    return e;
}

/* The entries of a managedFields array (borrowed; may be shared read-only): those that are not
 * FieldsV1 are dropped, as upstream drops what it cannot decode. */
static void entries_parse_array(json_object *mf, struct entries *es) {
    size_t n = json_object_is_type(mf, json_type_array) ? json_object_array_length(mf) : 0;
    for (size_t i = 0; i < n; i++) {
        json_object *m = json_object_array_get_idx(mf, i);
        const char *op = kite_obj_str(m, "operation"), *ft = kite_obj_str(m, "fieldsType");
        json_object *set = kite_fieldset_from_v1(kite_obj_get(m, "fieldsV1"));
        if (!set || !op || (ft && strcmp(ft, "FieldsV1") != 0)) {
            json_object_put(set);
            continue;
        }
        struct entry *e = entry_add(es, kite_obj_str(m, "manager"), op, kite_obj_str(m, "apiVersion"),
                                    kite_obj_str(m, "subresource"));
        json_object_put(e->set);
        e->set = set;
        e->time = dup_or_null(kite_obj_str(m, "time"));
        e->orig_v1 = kite_obj_get(m, "fieldsV1");
        e->dirty = false;
    }
}

static void entries_parse(json_object *obj, struct entries *es) {
    entries_parse_array(kite_obj_get(kite_obj_meta(obj), "managedFields"), es);
}

static int strcmp0(const char *a, const char *b) { return strcmp(a ? a : "", b ? b : ""); }

/* ---- managedFields a client wrote ---------------------------------------------------------
 * As upstream's decodeLiveOrNew: a main write (create, update, patch) whose object carries
 * managedFields that decode replaces the stored ones with them before its own change is
 * recorded (kubectl's migration from client-side to server-side apply rewrites them with a
 * JSON patch); [{}] resets them to none; entries that do not decode (an operation other than
 * Apply or Update, no apiVersion, a fieldsType other than FieldsV1, a fieldsV1 that is no field
 * set) leave the stored ones, as does an empty list (clients unaware of the field drop it). A
 * manager name a fieldManager could not be (over 128 bytes, not printable), which upstream's
 * validation refuses afterwards, is taken as not decoding here. */
static bool entry_empty(json_object *m) {
    if (!json_object_is_type(m, json_type_object)) return false;
    json_object_object_foreach(m, k, v) {
        (void)k;
        if (v && !(json_object_is_type(v, json_type_string) && !json_object_get_string_len(v))) return false;
    }
    return true;
}

static bool client_reset(json_object *mf) {
    return json_object_is_type(mf, json_type_array) && json_object_array_length(mf) == 1 &&
           entry_empty(json_object_array_get_idx(mf, 0));
}

static bool client_decodes(json_object *mf) {
    size_t n = json_object_is_type(mf, json_type_array) ? json_object_array_length(mf) : 0;
    for (size_t i = 0; i < n; i++) {
        json_object *m = json_object_array_get_idx(mf, i), *v1 = kite_obj_get(m, "fieldsV1");
        const char *op = kite_obj_str(m, "operation"), *av = kite_obj_str(m, "apiVersion");
        const char *ft = kite_obj_str(m, "fieldsType"), *mgr = kite_obj_str(m, "manager");
        const char *sub = kite_obj_str(m, "subresource");
        if (!op || (strcmp(op, "Apply") != 0 && strcmp(op, "Update") != 0) || !av || !*av || !ft ||
            strcmp(ft, "FieldsV1") != 0 || (sub && strlen(sub) > 256))
            return false;
        for (const char *c = mgr ? mgr : ""; *c; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7f) return false;
        if (mgr && strlen(mgr) > KITE_FIELD_MANAGER_MAX) return false;
        json_object *set = v1 ? kite_fieldset_from_v1(v1) : kite_fieldset_new();
        if (!set) return false;
        json_object_put(set);
    }
    return n > 0;
}

/* The entry of a manager: Apply entries are one per manager and subresource whatever the
 * version, Update entries one per version too (upstream's manager identifier). */
static struct entry *entry_find(struct entries *es, const char *manager, const char *operation, const char *av,
                                const char *sub) {
    bool apply = strcmp(operation, "Apply") == 0;
    for (size_t i = 0; i < es->n; i++) {
        struct entry *e = &es->v[i];
        if (strcmp(e->manager, manager) == 0 && strcmp(e->operation, operation) == 0 && !strcmp0(e->subresource, sub) &&
            (apply || !strcmp0(e->api_version, av)))
            return e;
    }
    return NULL;
}

/* Takes the paths of drop from e's set (dirty when that changed anything). */
static void entry_drop(struct entry *e, json_object *drop) {
    json_object *both = kite_fieldset_intersection(e->set, drop);
    if (!kite_fieldset_empty(both)) {
        json_object *rest = kite_fieldset_difference(e->set, drop);
        json_object_put(e->set);
        e->set = rest;
        e->dirty = true;
    }
    json_object_put(both);
}

static void entry_touch(struct write_op *op, struct entry *e) {
    char ts[21];
    kite_time_format(kite_now_wall(op->srv->clock), ts);
    free(e->time);
    e->time = kite_strdup(ts);
    free(e->api_version);
    e->api_version = kite_strdup(kite_resource_api_version(op->rq->res));
    e->dirty = true;
}

/* upstream's order: operation (Apply first), time, manager, apiVersion, subresource */
static int entry_cmp(const void *x, const void *y) {
    const struct entry *a = x, *b = y;
    int c;
    if ((c = strcmp(a->operation, b->operation))) return c;
    if ((c = strcmp(a->time ? a->time : "", b->time ? b->time : ""))) return c;
    if ((c = strcmp(a->manager, b->manager))) return c;
    if ((c = strcmp0(a->api_version, b->api_version))) return c;
    return strcmp0(a->subresource, b->subresource);
}

static json_object *str(const char *s) { return json_object_new_string(s); }

/* The managedFields array of es (empty entries left out); NULL when none is left. */
static json_object *entries_render(struct entries *es) {
    if (es->n) qsort(es->v, es->n, sizeof *es->v, entry_cmp); /* v is NULL when there are none */
    json_object *arr = NULL;
    for (size_t i = 0; i < es->n; i++) {
        struct entry *e = &es->v[i];
        if (kite_fieldset_empty(e->set)) continue;
        json_object *m = json_object_new_object();
        json_object_object_add(m, "manager", str(e->manager));
        json_object_object_add(m, "operation", str(e->operation));
        if (e->api_version) json_object_object_add(m, "apiVersion", str(e->api_version));
        if (e->time) json_object_object_add(m, "time", str(e->time));
        json_object_object_add(m, "fieldsType", str("FieldsV1"));
        json_object_object_add(m, "fieldsV1", e->dirty || !e->orig_v1 ? kite_fieldset_to_v1(e->set) : kite_apiserver_deep_copy(e->orig_v1));
        if (e->subresource) json_object_object_add(m, "subresource", str(e->subresource));
        if (!arr) arr = json_object_new_array();
        json_object_array_add(arr, m);
    }
    return arr;
}

static void set_managed(json_object *obj, json_object *arr) {
    json_object *meta = kite_obj_ensure(obj, "metadata");
    if (arr) kite_obj_set(meta, "managedFields", arr);
    else json_object_object_del(meta, "managedFields");
}

/* What of the object a write of op may change: a subresource write its field (and
 * metadata), a main write all but status (upstream's reset fields). */
static void scope_of(const struct write_op *op, struct kite_fs_scope *sc) {
    const struct kite_resource *r = op->rq->res;
    *sc = (struct kite_fs_scope){.schema = r->schema, .smp = r->smp};
    if (op->sub && op->sub->field) {
        /* a dotted field (pods/ephemeralcontainers' spec.ephemeralContainers): its top-level
         * field, where the field sets start (held until this thread's next call) */
        static __thread char top[64];
        const char *f = op->sub->field;
        snprintf(top, sizeof top, "%.*s", (int)strcspn(f, "."), f);
        sc->only = top;
    } else if (r->has_status) sc->skip = "status";
}

/* ---- the request's manager ----------------------------------------------------------- */

bool kite_apiserver_managed_manager(struct write_op *op) {
    struct req *rq = op->rq;
    const char *fm = kite_http_query(rq->http, "fieldManager");
    if (fm && *fm) {
        size_t n = strlen(fm), bad = n;
        for (size_t i = 0; i < n && bad == n; i++)
            if ((unsigned char)fm[i] < 0x20 || fm[i] == 0x7f) bad = i;
        const char *opts = kite_streq(rq->verb, "create") ? "CreateOptions" : kite_streq(rq->verb, "update") ? "UpdateOptions" : "PatchOptions";
        if (n > KITE_FIELD_MANAGER_MAX) {
            kite_apiserver_reply_error(rq, 422, "Invalid", "%s.meta.k8s.io \"\" is invalid: fieldManager: Too long: may not be more than %d bytes",
                        opts, KITE_FIELD_MANAGER_MAX);
            return false;
        }
        if (bad < n) { /* ValidateFieldManager: one error per character unicode.IsPrint refuses */
            struct kite_causes c = {0};
            for (size_t i = bad; i < n; i++) {
                if ((unsigned char)fm[i] >= 0x20 && fm[i] != 0x7f) continue;
                char msg[64];
                const char *m = msg;
                snprintf(msg, sizeof msg, "invalid character U+%04X (at position %zu)", (unsigned char)fm[i], i);
                kite_causes_add_invalid(&c, "fieldManager", fm, &m, 1);
            }
            char *body = kite_status_invalid("meta.k8s.io", opts, NULL, &c);
            kite_causes_release(&c);
            kite_apiserver_reply(rq, 422, "application/json", body, strlen(body));
            return false;
        }
        op->manager = kite_strdup(fm);
        return true;
    }
    /* upstream: the User-Agent up to its first '/', at most 128 bytes */
    const char *ua = kite_http_header(rq->http, "User-Agent");
    size_t n = ua ? strcspn(ua, "/") : 0;
    op->manager = kite_strndup(ua ? ua : "", n > KITE_FIELD_MANAGER_MAX ? KITE_FIELD_MANAGER_MAX : n);
    return true;
}

/* ---- Update -------------------------------------------------------------------------- */

static int entry_json_cmp(const void *x, const void *y) {
    json_object *a = *(json_object *const *)x, *b = *(json_object *const *)y;
    static const char *const keys[] = {"operation", "time", "manager", "apiVersion", "subresource"};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(keys); i++) {
        int c = strcmp0(kite_obj_str(a, keys[i]), kite_obj_str(b, keys[i]));
        if (c) return c;
    }
    return 0;
}

/* cur's entries for res: the same ones when cur is this write's own parse (it is not read
 * again), else a copy (cur is shared between threads, its reference counts untouched). */
static json_object *take_entries(json_object *cur_mf, bool cur_private) {
    return cur_private ? json_object_get(cur_mf) : kite_apiserver_deep_copy(cur_mf);
}

/* The common write (a lease renewal, a node's heartbeat): its manager already has every field
 * it sets and no other entry has any it sets or removes, so only its entry's time changes.
 * Answered from the stored entries as they are, without reading them into sets. true when it
 * set res's managedFields. */
static bool update_in_place(struct write_op *op, json_object *cur_mf, bool cur_private, json_object *res,
                            json_object *sets, json_object *removed) {
    size_t n = json_object_is_type(cur_mf, json_type_array) ? json_object_array_length(cur_mf) : 0;
    const char *av = kite_resource_api_version(op->rq->res), *sub = op->sub ? op->sub->name : NULL;
    ssize_t own = -1;
    if (kite_fieldset_empty(sets)) return false; /* only removals: no entry gets a new time */
    for (size_t i = 0; i < n; i++) {
        json_object *m = json_object_array_get_idx(cur_mf, i), *v1 = kite_obj_get(m, "fieldsV1");
        const char *ft = kite_obj_str(m, "fieldsType");
        if (ft && strcmp(ft, "FieldsV1") != 0) return false;
        bool mine = own < 0 && !strcmp0(kite_obj_str(m, "manager"), op->manager) &&
                    !strcmp0(kite_obj_str(m, "operation"), "Update") && !strcmp0(kite_obj_str(m, "apiVersion"), av) &&
                    !strcmp0(kite_obj_str(m, "subresource"), sub);
        if (mine) {
            if (!kite_fieldset_v1_covers(v1, sets)) return false;
            own = (ssize_t)i;
        } else if (kite_fieldset_v1_meets(v1, sets)) {
            return false;
        }
        if (kite_fieldset_v1_meets(v1, removed)) return false;
    }
    if (own < 0) return false;
    json_object *arr = take_entries(cur_mf, cur_private);
    char ts[21];
    kite_time_format(kite_now_wall(op->srv->clock), ts);
    kite_obj_set(json_object_array_get_idx(arr, (size_t)own), "time", json_object_new_string(ts));
    json_object_array_sort(arr, entry_json_cmp);
    set_managed(res, arr);
    return true;
}

/* Caps the Update entries as upstream's capManagersManager: oldest first (by time), the first
 * entry of each apiVersion is renamed into that version's bucket when a second one comes, and
 * later ones of the version are merged into it (the bucket takes the newer time), until at
 * most KITE_MAX_UPDATE_MANAGERS remain. A merged entry is left empty (not rendered). */
static int by_time(const void *x, const void *y, void *ud) {
    const struct entries *es = ud;
    size_t a = *(const size_t *)x, b = *(const size_t *)y;
    int c = strcmp0(es->v[a].time, es->v[b].time);
    return c ? c : (a > b) - (a < b);
}

static void cap_updates(struct entries *es) {
    size_t n = 0, *idx = kite_calloc(es->n + 1, sizeof *idx);
    for (size_t i = 0; i < es->n; i++)
        if (strcmp(es->v[i].operation, "Update") == 0 && !kite_fieldset_empty(es->v[i].set)) idx[n++] = i;
    if (n <= KITE_MAX_UPDATE_MANAGERS) {
        free(idx);
        return;
    }
    qsort_r(idx, n, sizeof *idx, by_time, es);
    struct { const char *version; size_t first; } *seen = kite_calloc(n, sizeof *seen);
    size_t n_seen = 0, length = n;
    for (size_t i = 0; i < n && length > KITE_MAX_UPDATE_MANAGERS; i++) {
        struct entry *e = &es->v[idx[i]];
        size_t k = 0;
        while (k < n_seen && strcmp0(seen[k].version, e->api_version)) k++;
        if (k == n_seen) {
            seen[n_seen++] = (typeof(*seen)){e->api_version, idx[i]};
            continue;
        }
        struct entry *bucket = entry_find(es, KITE_OLD_UPDATES_MANAGER, "Update", e->api_version, NULL);
        if (bucket == e) { /* the bucket is newer than the version's first entry: it takes that */
            struct entry *first = &es->v[seen[k].first];
            kite_fieldset_union_into(e->set, first->set);
            e->dirty = true;
            json_object_put(first->set);
            first->set = kite_fieldset_new();
            seen[k].first = idx[i];
            length--;
            continue;
        }
        if (!bucket || kite_fieldset_empty(bucket->set)) {
            bucket = &es->v[seen[k].first];
            free(bucket->manager), free(bucket->subresource);
            bucket->manager = kite_strdup(KITE_OLD_UPDATES_MANAGER);
            bucket->subresource = NULL;
            bucket->dirty = true;
        }
        kite_fieldset_union_into(bucket->set, e->set);
        free(bucket->time);
        bucket->time = e->time ? kite_strdup(e->time) : NULL;
        bucket->dirty = true;
        json_object_put(e->set);
        e->set = kite_fieldset_new();
        length--;
    }
    free(seen);
    free(idx);
}

/* The general case: the entries (of the managedFields array mf) read into sets, the write's
 * fields taken from all but its manager's, which gets them. */
static void update_entries(struct write_op *op, json_object *mf, json_object *res, json_object *modified,
                           json_object *removed) {
    struct entries es = {0};
    if (mf) entries_parse_array(mf, &es);
    for (size_t i = 0; i < es.n; i++) {
        entry_drop(&es.v[i], modified);
        entry_drop(&es.v[i], removed);
    }
    if (!kite_fieldset_empty(modified)) {
        const char *av = kite_resource_api_version(op->rq->res), *sub = op->sub ? op->sub->name : NULL;
        struct entry *e = entry_find(&es, op->manager ? op->manager : "", "Update", av, sub);
        if (!e) e = entry_add(&es, op->manager, "Update", av, sub);
        kite_fieldset_union_into(e->set, modified);
        entry_touch(op, e);
    }
    cap_updates(&es);
    set_managed(res, entries_render(&es));
    entries_release(&es);
}

static void managed_update(struct write_op *op, json_object *cur, bool cur_private, json_object *res) {
    struct kite_fs_scope sc;
    scope_of(op, &sc);
    json_object *added, *removed, *modified;
    kite_fieldset_diff(&sc, cur, res, &added, &removed, &modified);
    json_object *cur_mf = cur ? kite_obj_get(kite_obj_meta(cur), "managedFields") : NULL;
    bool client = false;
    if (op->client_mf && client_reset(op->client_mf)) {
        cur_mf = NULL;
        client = true;
    } else if (op->client_mf && client_decodes(op->client_mf)) {
        cur_mf = op->client_mf;
        client = true;
    }
    if (kite_fieldset_empty(added) && kite_fieldset_empty(removed) && kite_fieldset_empty(modified)) {
        /* nothing changed: the entries stay as they are (a client's, as upstream encodes them) */
        if (client) update_entries(op, cur_mf, res, modified, removed);
        else set_managed(res, cur_mf ? take_entries(cur_mf, cur_private) : NULL);
    } else {
        kite_fieldset_union_into(modified, added); /* now: everything this write sets */
        if (client || !update_in_place(op, cur_mf, cur_private, res, modified, removed))
            update_entries(op, cur_mf, res, modified, removed);
    }
    json_object_put(added);
    json_object_put(removed);
    json_object_put(modified);
}

/* ---- Apply --------------------------------------------------------------------------- */

struct conflict { const struct entry *e; char *path; size_t seq; };
struct conflicts {
    struct conflict *v;
    size_t n;
    const struct entry *e;
};

static void conflict_found(void *ud, const char *path) {
    struct conflicts *c = ud;
    c->v = kite_realloc(c->v, (c->n + 1) * sizeof *c->v);
    c->v[c->n] = (struct conflict){c->e, kite_strdup(path), c->n};
    c->n++;
}

/* upstream's printManager: "name" [with subresource "s"] [using v1] (Update entries) */
static void print_manager(struct kite_buf *b, const struct entry *e) {
    kite_buf_printf(b, "\"%s\"", e->manager);
    if (e->subresource) kite_buf_printf(b, " with subresource \"%s\"", e->subresource);
    if (strcmp(e->operation, "Update") == 0) kite_buf_printf(b, " using %s", e->api_version ? e->api_version : "");
}

static int conflict_cmp(const void *x, const void *y) {
    const struct conflict *a = x, *b = y;
    int c = strcmp(a->e->manager, b->e->manager);
    if (!c) c = strcmp(a->e->operation, b->e->operation);
    if (!c) c = (a->e > b->e) - (a->e < b->e);
    if (!c) c = (a->seq > b->seq) - (a->seq < b->seq);
    return c;
}

/* 409 as upstream's NewConflictError: one cause per conflicting field. */
static void reply_conflicts(struct req *rq, struct conflicts *cs) {
    qsort(cs->v, cs->n, sizeof *cs->v, conflict_cmp); /* by manager, each's paths in set order */
    struct kite_causes causes = {0};
    struct kite_buf msg = {0}, who = {0};
    if (cs->n == 1) {
        print_manager(&who, cs->v[0].e);
        kite_buf_printf(&msg, "Apply failed with 1 conflict: conflict with %s: %s", who.p, cs->v[0].path);
    } else {
        kite_buf_printf(&msg, "Apply failed with %zu conflicts: ", cs->n);
    }
    for (size_t i = 0; i < cs->n; i++) {
        kite_buf_reset(&who);
        print_manager(&who, cs->v[i].e);
        kite_causes_add(&causes, "FieldManagerConflict", cs->v[i].path, "conflict with %s", who.p);
        if (cs->n == 1) continue;
        if (i == 0 || cs->v[i - 1].e != cs->v[i].e) kite_buf_printf(&msg, "%sconflicts with %s:", i ? "\n" : "", who.p);
        kite_buf_printf(&msg, "\n- %s", cs->v[i].path);
    }
    char *body = kite_status_failure(409, "Conflict", msg.p, NULL, NULL, NULL, &causes);
    kite_causes_release(&causes);
    kite_buf_release(&msg);
    kite_buf_release(&who);
    kite_apiserver_reply(rq, 409, "application/json", body, strlen(body));
}

/* ---- from client-side apply (upstream's lastAppliedManager and lastAppliedUpdater) -----
 * kubectl's client-side apply records what it applied in an annotation and its changes as
 * the Update manager kubectl-client-side-apply. The first `kubectl apply --server-side` (manager
 * "kubectl") would conflict with that manager on every field it changes; kube-apiserver lets
 * the fields the annotation holds, where the object still has the annotation's values, go to
 * the applier without a conflict, and keeps the annotation in step with what "kubectl" applies
 * (kubectl then moves the old manager's fields to its own with a JSON patch of managedFields). */
#define LAST_APPLIED "kubectl.kubernetes.io/last-applied-configuration"
#define LAST_APPLIED_MANAGER "kubectl"

/* The fields an apply by "kubectl" may take from others without a conflict: those of the
 * annotation's object that live still has with the same values. NULL: none. */
static json_object *last_applied_allowed(struct write_op *op, const struct kite_fs_scope *sc, json_object *live) {
    const char *la = kite_obj_str(kite_obj_get(kite_obj_meta(live), "annotations"), LAST_APPLIED);
    if (strcmp(op->manager ? op->manager : "", LAST_APPLIED_MANAGER) != 0 || !la || !*la) return NULL;
    json_object *obj = json_tokener_parse(la);
    if (!json_object_is_type(obj, json_type_object) ||
        strcmp0(kite_obj_str(obj, "apiVersion"), kite_resource_api_version(op->rq->res)) != 0) {
        json_object_put(obj);
        return NULL;
    }
    json_object *set = kite_fieldset_of(sc, obj), *added, *removed, *modified;
    kite_fieldset_diff(sc, obj, live, &added, &removed, &modified);
    json_object *d1 = kite_fieldset_difference(set, modified), *d2 = kite_fieldset_difference(d1, added);
    json_object *allowed = kite_fieldset_difference(d2, removed);
    json_object_put(obj), json_object_put(set), json_object_put(added), json_object_put(removed);
    json_object_put(modified), json_object_put(d1), json_object_put(d2);
    return allowed;
}

/* o as Go's encoding/json writes a map[string]interface{}: keys sorted, compact. */
static void json_sorted(struct kite_buf *b, json_object *o) {
    if (json_object_is_type(o, json_type_array)) {
        kite_buf_putc(b, '[');
        for (size_t i = 0, n = json_object_array_length(o); i < n; i++) {
            if (i) kite_buf_putc(b, ',');
            json_sorted(b, json_object_array_get_idx(o, i));
        }
        kite_buf_putc(b, ']');
        return;
    }
    if (!json_object_is_type(o, json_type_object)) {
        kite_buf_puts(b, json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
        return;
    }
    size_t n = (size_t)json_object_object_length(o), i = 0;
    const char **keys = kite_calloc(n ? n : 1, sizeof *keys);
    json_object_object_foreach(o, k, v) {
        (void)v;
        keys[i++] = k;
    }
    for (size_t a = 1; a < n; a++) /* insertion sort: objects are small */
        for (size_t c = a; c > 0 && strcmp(keys[c - 1], keys[c]) > 0; c--) {
            const char *t = keys[c];
            keys[c] = keys[c - 1];
            keys[c - 1] = t;
        }
    kite_buf_putc(b, '{');
    for (i = 0; i < n; i++) {
        if (i) kite_buf_putc(b, ',');
        kite_buf_json_str(b, keys[i]);
        kite_buf_putc(b, ':');
        json_sorted(b, kite_obj_get(o, keys[i]));
    }
    kite_buf_putc(b, '}');
    free(keys);
}

/* The annotation of an object "kubectl" applied cfg to: cfg without the annotation, as the
 * unstructured JSON encoder writes it (a newline at the end). */
static void last_applied_update(struct write_op *op, json_object *merged, json_object *cfg) {
    json_object *ann = kite_obj_get(kite_obj_meta(merged), "annotations");
    if (strcmp(op->manager ? op->manager : "", LAST_APPLIED_MANAGER) != 0 || !kite_obj_str(ann, LAST_APPLIED)) return;
    json_object *c = kite_apiserver_deep_copy(cfg), *cann = kite_obj_get(kite_obj_meta(c), "annotations");
    if (cann) json_object_object_del(cann, LAST_APPLIED);
    struct kite_buf b = {0};
    json_sorted(&b, c);
    kite_buf_putc(&b, '\n');
    kite_obj_set(ann, LAST_APPLIED, json_object_new_string_len(b.p, (int)b.len));
    kite_buf_release(&b);
    json_object_put(c);
}

json_object *kite_apiserver_managed_apply(struct write_op *op, json_object *live, json_object *cur) {
    struct req *rq = op->rq;
    json_object *cfg = op->input;
    struct kite_fs_scope sc;
    scope_of(op, &sc);
    struct entries es = {0};
    if (cur) entries_parse(cur, &es);
    const char *sub = op->sub ? op->sub->name : NULL;
    json_object *applied = kite_fieldset_of(&sc, cfg);

    json_object *merged = live ? kite_apiserver_deep_copy(live) : json_object_new_object();
    kite_fieldset_merge(&sc, merged, cfg);
    struct entry *me = entry_find(&es, op->manager, "Apply", NULL, sub);
    if (me) {
        /* what it applied before and no longer does, unless someone else has it */
        json_object *others = kite_fieldset_new();
        for (size_t i = 0; i < es.n; i++)
            if (&es.v[i] != me) kite_fieldset_union_into(others, es.v[i].set);
        json_object *gone = kite_fieldset_pruned(me->set, applied, others);
        kite_fieldset_remove_from(merged, gone);
        json_object_put(gone);
        json_object_put(others);
    }
    json_object *added, *removed, *modified;
    kite_fieldset_diff(&sc, live, merged, &added, &removed, &modified);
    kite_fieldset_union_into(modified, added);
    struct conflicts cs = {0};
    json_object *allowed = op->force || !live ? NULL : last_applied_allowed(op, &sc, live);
    for (size_t i = 0; i < es.n; i++) {
        if (&es.v[i] == me) continue;
        json_object *both = kite_fieldset_intersection(es.v[i].set, modified);
        if (allowed) {
            json_object *rest = kite_fieldset_difference(both, allowed);
            json_object_put(both);
            both = rest;
        }
        cs.e = &es.v[i];
        kite_fieldset_each(both, conflict_found, &cs);
        json_object_put(both);
    }
    bool refuse = cs.n && !op->force;
    if (refuse) {
        reply_conflicts(rq, &cs);
        json_object_put(merged);
        merged = NULL;
    } else {
        for (size_t i = 0; i < es.n; i++) {
            if (&es.v[i] == me) continue;
            entry_drop(&es.v[i], modified);
            entry_drop(&es.v[i], removed);
        }
        /* a no-op apply keeps its entry's time (upstream's managedFieldsUpdater) */
        bool changed = !live || !kite_json_equal(live, merged);
        if (!me) {
            me = entry_add(&es, op->manager, "Apply", NULL, sub);
            changed = true;
        }
        json_object_put(me->set);
        me->set = applied;
        me->dirty = true;
        applied = NULL;
        if (changed) entry_touch(op, me);
        json_object_put(op->managed);
        op->managed = entries_render(&es);
        op->has_managed = true;
        last_applied_update(op, merged, cfg);
    }
    json_object_put(allowed);
    for (size_t i = 0; i < cs.n; i++) free(cs.v[i].path);
    free(cs.v);
    json_object_put(applied);
    json_object_put(added);
    json_object_put(removed);
    json_object_put(modified);
    entries_release(&es);
    return merged;
}

void kite_apiserver_managed_finish(struct write_op *op, json_object *cur, bool cur_private, json_object *res) {
    if (op->has_managed) {
        set_managed(res, op->managed);
        op->managed = NULL;
        op->has_managed = false;
        return;
    }
    managed_update(op, cur, cur_private, res);
}
