/* Deletes: one object (immediate, or graceful while finalizers hold it) and a collection.
 *
 * A DELETE of an object whose finalizers are pending (metadata.finalizers, or the kind's own:
 * a namespace's spec.finalizers) does not remove it: it gets deletionTimestamp (and whatever
 * its kind marks on a terminating object), and goes away when an update removes the last
 * finalizer (write.c). A deletecollection never blocks an HTTP thread on the store: its
 * deletes are submitted in batches, each batch's completion submits the next from the write
 * engine's thread, and the answer is built on an HTTP thread once all are done.
 *
 * Kinds with a grace period (a row's delete_grace: pods) are deleted gracefully, as
 * kube-apiserver's BeforeDelete: a DELETE gives the object deletionTimestamp = now + grace and
 * deletionGracePeriodSeconds = grace and leaves it (answered 200 with it); a later DELETE with
 * a shorter grace moves both earlier, and one with grace 0 removes it. A grace of 0 (an
 * unbound pod, or gracePeriodSeconds=0) deletes at once. Finalizers hold an object either way. */
#include "apiserver/write.h"
#include "api/status.h"

#include <stdio.h>

/* Deletes of one collection in flight at once: the store's queue (KITE_STORE_QUEUE_MAX) stays
 * open to other writers, and a batch fills about one group commit. */
#define KITE_DELETECOLLECTION_INFLIGHT 512

static bool array_nonempty(json_object *a) {
    return a && json_object_is_type(a, json_type_array) && json_object_array_length(a) > 0;
}

bool kite_apiserver_finalizers_pending(const struct kite_resource *r, json_object *obj) {
    return array_nonempty(kite_obj_get(kite_obj_meta(obj), "finalizers")) || (r->finalizing && r->finalizing(obj));
}

void kite_apiserver_reply_deleted(struct write_op *op, struct kite_record *rec) {
    struct req *rq = op->rq;
    if (rq->res->delete_returns_object) {
        struct kite_buf out = {0};
        kite_apiserver_render_record(rq, rec, &out);
        kite_apiserver_reply_json_buf(rq, 200, &out);
        return;
    }
    char *body = kite_status_success(0, rq->name, *rq->res->group ? rq->res->group : NULL, rq->res->plural, op->uid);
    kite_apiserver_reply(rq, 200, "application/json", body, strlen(body));
}

static bool check_preconditions(struct write_op *op, struct kite_record *cur, const char *uid) {
    const char *puid = kite_obj_str(op->preconditions, "uid");
    const char *prv = kite_obj_str(op->preconditions, "resourceVersion");
    char msg[512];
    if (puid && uid && strcmp(puid, uid) != 0) {
        snprintf(msg, sizeof msg, "Precondition failed: UID in precondition: %s, UID in object meta: %s", puid, uid);
        kite_apiserver_op_fail(op, 409, "Conflict", msg);
        return false;
    }
    if (prv) {
        int64_t v;
        if (kite_parse_int64(prv, &v) < 0 || v != cur->mod_rev) {
            snprintf(msg, sizeof msg,
                     "Precondition failed: ResourceVersion in precondition: %s, ResourceVersion in object meta: %lld", prv,
                     (long long)cur->mod_rev);
            kite_apiserver_op_fail(op, 409, "Conflict", msg);
            return false;
        }
        op->client_rv = true;
    }
    return true;
}

/* Garbage collection of dependents, as DeleteOptions ask for it (kube-apiserver's
 * deletionFinalizersForGarbageCollection): Foreground and Orphan put their finalizer on the
 * object ("foregroundDeletion", "orphan"), which then stays, being deleted, until the garbage
 * collector has deleted its blocking dependents or taken its ownerReferences off the others
 * and removed the finalizer; Background (and no policy) leaves dependents to the collector
 * once the object is gone. The legacy orphanDependents is Orphan (true) or Background. Only
 * kinds whose dependents the collector watches (a row's gc_owner) are held: another kind's
 * finalizer would wait for a collector that never looks at it. */
static const struct {
    const char *policy, *finalizer;
} PROPAGATION[] = {
    {"Foreground", "foregroundDeletion"},
    {"Background", NULL},
    {"Orphan", "orphan"},
};

static bool propagation_policy(struct write_op *op, json_object *opts) {
    json_object *pp = kite_obj_get(opts, "propagationPolicy"), *od = kite_obj_get(opts, "orphanDependents");
    if (pp && json_object_is_type(pp, json_type_null)) pp = NULL;
    if (od && json_object_is_type(od, json_type_null)) od = NULL;
    if (pp && od) {
        kite_apiserver_reply_error(op->rq, 422, "Invalid",
                    "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Invalid value: \"%s\": orphanDependents and "
                    "deletionPropagation cannot be both set",
                    json_object_get_string(pp));
        return false;
    }
    if (od) {
        op->propagation = json_object_get_boolean(od) ? "orphan" : NULL;
        return true;
    }
    if (!pp) return true;
    const char *v = json_object_get_string(pp);
    for (size_t i = 0; i < KITE_ARRAY_SIZE(PROPAGATION); i++)
        if (strcmp(v, PROPAGATION[i].policy) == 0) {
            op->propagation = PROPAGATION[i].finalizer;
            return true;
        }
    kite_apiserver_reply_error(op->rq, 422, "Invalid",
                "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: \"%s\": supported values: "
                "\"Foreground\", \"Background\", \"Orphan\", \"nil\"",
                v);
    return false;
}

static void mark_deleting(struct write_op *op, struct kite_record *cur, json_object *obj, int64_t at_ns, int64_t grace);

static bool has_finalizer(json_object *meta, const char *f) {
    json_object *fs = kite_obj_get(meta, "finalizers");
    for (size_t i = 0; fs && json_object_is_type(fs, json_type_array) && i < json_object_array_length(fs); i++)
        if (strcmp(json_object_get_string(json_object_array_get_idx(fs, i)) ? json_object_get_string(json_object_array_get_idx(fs, i)) : "", f) == 0)
            return true;
    return false;
}

/* Puts the propagation's finalizer on the object (and takes the other one off: they exclude
 * each other) and submits it, marked deleting if it was not yet. False when it already has it. */
/* meta's finalizers with the propagation's and without the other one's (they exclude each other). */
static void set_propagation_finalizer(json_object *meta, const char *propagation) {
    json_object *fs = kite_obj_get(meta, "finalizers"), *nfs = json_object_new_array();
    const char *other = strcmp(propagation, "orphan") == 0 ? "foregroundDeletion" : "orphan";
    for (size_t i = 0; fs && json_object_is_type(fs, json_type_array) && i < json_object_array_length(fs); i++) {
        const char *f = json_object_get_string(json_object_array_get_idx(fs, i));
        if (f && strcmp(f, other) != 0) json_object_array_add(nfs, json_object_new_string(f));
    }
    json_object_array_add(nfs, json_object_new_string(propagation));
    kite_obj_set(meta, "finalizers", nfs);
}

static bool add_propagation_finalizer(struct write_op *op, struct kite_record *cur, json_object *cobj) {
    if (!op->propagation || !op->rq->res->gc_owner || has_finalizer(kite_obj_meta(cobj), op->propagation)) return false;
    json_object *obj = kite_apiserver_deep_copy(cobj), *meta = kite_obj_meta(obj);
    set_propagation_finalizer(meta, op->propagation);
    if (kite_obj_get(meta, "deletionTimestamp")) {
        op->code = 200;
        op->kind = OP_UPDATE;
        op->client_rv = true;
        kite_apiserver_submit(op, KITE_WRITE_UPDATE, obj, cur->mod_rev, NULL);
    } else {
        mark_deleting(op, cur, obj, kite_now_wall(op->srv->clock), 0);
    }
    return true;
}

/* DeleteOptions.dryRun: a list of strings; any entry makes a dry run. A DELETE's must be "All"
 * each (ValidateDeleteOptions, 422); an eviction's deleteOptions are not validated upstream,
 * where any entry counts (dryrun.IsDryRun). */
static bool delete_dry_run(struct write_op *op, json_object *opts) {
    json_object *dr = kite_obj_get(opts, "dryRun");
    bool eviction = op->sub && op->sub->deletes;
    if (!dr || json_object_is_type(dr, json_type_null)) return true;
    bool list = json_object_is_type(dr, json_type_array);
    size_t n = list ? json_object_array_length(dr) : 0;
    json_object *bad = list ? NULL : dr; /* Go's UnmarshalTypeError names the value's JSON kind */
    for (size_t i = 0; i < n && !bad; i++)
        if (!json_object_is_type(json_object_array_get_idx(dr, i), json_type_string)) bad = json_object_array_get_idx(dr, i);
    if (bad) {
        static const char *const kinds[] = {[json_type_null] = "null", [json_type_boolean] = "bool",
                                            [json_type_double] = "number", [json_type_int] = "number",
                                            [json_type_object] = "object", [json_type_array] = "array",
                                            [json_type_string] = "string"};
        kite_apiserver_reply_error(op->rq, 400, "BadRequest", "json: cannot unmarshal %s into Go struct field %s.dryRun of type %s",
                    kinds[json_object_get_type(bad)], eviction ? "Eviction.deleteOptions" : "DeleteOptions",
                    list ? "string" : "[]string");
        return false;
    }
    for (size_t i = 0; i < n && !eviction; i++) {
        const char *v = json_object_get_string(json_object_array_get_idx(dr, i));
        if (strcmp(v, "All") == 0) continue;
        struct kite_buf q = {0};
        for (size_t j = 0; j < n; j++) {
            if (j) kite_buf_puts(&q, ", ");
            kite_buf_json_str(&q, json_object_get_string(json_object_array_get_idx(dr, j)));
        }
        kite_apiserver_reply_error(op->rq, 422, "Invalid", "DeleteOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: "
                    "[]string{%s}: supported values: \"All\"", q.p);
        kite_buf_release(&q);
        return false;
    }
    if (n) op->dry_run = true;
    return true;
}

bool kite_apiserver_delete_options(struct write_op *op, json_object *opts) {
    if (!delete_dry_run(op, opts)) return false;
    json_object *pre = kite_obj_get(opts, "preconditions");
    if (pre) op->preconditions = json_object_get(pre);
    json_object *g = kite_obj_get(opts, "gracePeriodSeconds");
    if (g && !json_object_is_type(g, json_type_null)) {
        if (!json_object_is_type(g, json_type_int)) {
            kite_apiserver_reply_error(op->rq, 400, "BadRequest", "gracePeriodSeconds: must be an integer");
            return false;
        }
        op->has_grace = true;
        op->grace = json_object_get_int64(g);
    }
    if (op->has_grace && op->grace < 0) op->grace = 1; /* as kube-apiserver: a negative grace is 1s */
    return propagation_policy(op, opts);
}

/* Marks obj (a copy, taken) as being deleted with grace seconds left from now_ns and submits it. */
static void mark_deleting(struct write_op *op, struct kite_record *cur, json_object *obj, int64_t at_ns, int64_t grace) {
    json_object *m = kite_obj_meta(obj);
    char ts[21];
    kite_time_format(at_ns, ts);
    kite_obj_set(m, "deletionTimestamp", json_object_new_string(ts));
    kite_obj_set(m, "deletionGracePeriodSeconds", json_object_new_int64(grace));
    if (op->rq->res->terminating) op->rq->res->terminating(obj);
    if (op->sub && op->sub->mark) op->sub->mark(obj, kite_now_wall(op->srv->clock));
    op->code = 200;
    op->kind = OP_UPDATE;
    op->client_rv = true; /* a concurrent change re-evaluates nothing: report the conflict */
    kite_apiserver_submit(op, KITE_WRITE_UPDATE, obj, cur->mod_rev, NULL);
}

/* Graceful deletion (the row's delete_grace). Returns true when it answered or submitted; false
 * when the object is to go now (or wait for finalizers) as a kind without grace would. */
static bool run_graceful(struct write_op *op, struct kite_record *cur, json_object *cobj) {
    const struct kite_resource *r = op->rq->res;
    json_object *meta = kite_obj_meta(cobj);
    int64_t now = kite_now_wall(op->srv->clock);
    const char *dts = kite_obj_str(meta, "deletionTimestamp");
    if (!dts) {
        int64_t grace = r->delete_grace(cobj, op->has_grace ? op->grace : -1);
        if (grace <= 0) return false;
        mark_deleting(op, cur, kite_apiserver_deep_copy(cobj), kite_time_add(now, kite_sec_to_ns(grace)), grace);
        return true;
    }
    json_object *dg = kite_obj_get(meta, "deletionGracePeriodSeconds");
    int64_t left = dg ? json_object_get_int64(dg) : 0, at;
    /* no grace left (finalizers hold it, or an interrupted delete): as a kind without grace */
    if (left <= 0) return false;
    if (!op->has_grace || op->grace >= left) { /* already going, no sooner: answered as it is */
        struct kite_buf out = {0};
        kite_apiserver_render_record(op->rq, cur, &out);
        kite_apiserver_reply_json_buf(op->rq, 200, &out);
        kite_apiserver_op_free(op);
        return true;
    }
    if (op->grace == 0 && !kite_apiserver_finalizers_pending(r, cobj)) return false; /* its end confirmed: gone now */
    /* only a shorter grace: the deadline moves earlier by the difference */
    if (kite_time_parse(dts, &at) < 0) at = kite_time_add(now, kite_sec_to_ns(left));
    mark_deleting(op, cur, kite_apiserver_deep_copy(cobj), kite_time_add(at, -kite_sec_to_ns(left - op->grace)), op->grace);
    return true;
}

/* ---- guarded deletes (evictions) ---------------------------------------------------------
 * The subresource's guard reads the object and the guard resource's objects of its namespace
 * from the watch cache. A guard written back (a budget's disruptionsAllowed taken down by one)
 * is a compare-and-swap of its own; once it is durable the delete is run again from the
 * current object, skipping the guard; a guard that changed meanwhile makes the whole eviction
 * start over, as upstream's retry loop, at most KITE_GUARD_RETRIES times. The object's key is
 * held all along, so no other write of it from this server slips in between. */
#define KITE_GUARD_RETRIES 20

static const struct kite_resource *guard_resource(const struct kite_subresource *sr) {
    for (const struct kite_resource *const *r = kite_resources; *r; r++)
        if (strcmp((*r)->group, sr->guard_group) == 0 && strcmp((*r)->plural, sr->guard_plural) == 0) return *r;
    return NULL;
}

static void guard_failed(void *ud) {
    struct write_op *op = ud;
    if (op->guard_err == -ESTALE || op->guard_err == -ENOENT) {
        char msg[512];
        snprintf(msg, sizeof msg, "couldn't update PodDisruptionBudget \"%s\" due to conflicts", op->guard_name ? op->guard_name : "");
        kite_apiserver_op_fail(op, 504, "Timeout", msg);
    } else if (op->guard_err == -EAGAIN) {
        kite_apiserver_op_fail(op, 429, "TooManyRequests", "the server has too many pending writes, please try again later");
    } else {
        kite_apiserver_op_fail(op, 500, "InternalError", "storage error");
    }
}

/* On the store's writer thread. */
static void guard_done(void *ud, int err, int64_t rev, struct kite_record *rec) {
    struct write_op *op = ud;
    if (err == 0) op->guarded = true;
    if (err == 0 || ((err == -ESTALE || err == -ENOENT) && ++op->attempts < KITE_GUARD_RETRIES)) {
        kite_apiserver_op_retry(op);
        return;
    }
    op->guard_err = err;
    kite_http_defer(op->rq->http, guard_failed, op);
}

/* Returns true when the eviction was answered or waits for its guard's write; false to go on
 * with the delete. */
static bool run_guard(struct write_op *op, struct kite_record *cur, json_object *cobj) {
    struct req *rq = op->rq;
    const struct kite_subresource *sr = op->sub;
    const struct kite_resource *gr = guard_resource(sr);
    if (!gr) return false;
    _cleanup_free_ char *prefix = kite_object_prefix(gr, rq->ns);
    struct kite_record **recs = NULL;
    size_t n = 0;
    int64_t rev;
    bool more;
    kite_wcache_list(kite_apiserver_storage_cache(op->srv, gr), prefix, NULL, 0, NULL, NULL, &recs, &n, &rev, &more);
    json_object **objs = kite_calloc(n ? n : 1, sizeof *objs);
    for (size_t i = 0; i < n; i++) objs[i] = kite_apiserver_record_object(recs[i]);
    struct kite_guard_verdict v;
    sr->guard(cobj, objs, n, kite_now_wall(op->srv->clock), op->dry_run, &v);
    bool answered = true;
    if (v.code) {
        if (!op->dry_run) kite_apiserver_nodestate_eviction_refused(op->srv, cobj, v.code, v.message); /* a drain held */
        struct kite_causes causes = {0};
        if (v.cause) kite_causes_add(&causes, v.cause_reason, NULL, "%s", v.cause);
        char *body = kite_status_failure(v.code, NULL, v.message, NULL, NULL, NULL, &causes);
        kite_causes_release(&causes);
        kite_apiserver_reply(rq, v.code, "application/json", body, strlen(body));
        kite_apiserver_op_free(op);
    } else if (v.update != SIZE_MAX && v.update < n) {
        /* pin the object too: after the guard's write it must still be the one judged */
        if (v.pin) op->client_rv = true;
        json_object *g = kite_apiserver_deep_copy(objs[v.update]);
        kite_obj_set(g, "status", TAKE_PTR(v.status));
        size_t len;
        _cleanup_free_ char *bytes = kite_object_encode(g, &len);
        free(op->guard_name);
        op->guard_name = kite_strdup(kite_meta_str(g, "name") ? kite_meta_str(g, "name") : "");
        json_object_put(g);
        struct kite_write w = {.type = KITE_WRITE_UPDATE, .key = recs[v.update]->key, .value = bytes, .len = len,
                               .expect_mod_rev = recs[v.update]->mod_rev};
        int r = kite_store_submit(op->srv->store, &w, guard_done, op);
        if (r == -EAGAIN) kite_apiserver_op_fail(op, 429, "TooManyRequests", "the server has too many pending writes, please try again later");
        else if (r < 0) kite_apiserver_op_fail(op, 500, "InternalError", "storage error");
    } else {
        if (v.pin) op->client_rv = true; /* a pod that became ready meanwhile is judged again by its client */
        answered = false;
    }
    kite_guard_verdict_release(&v);
    free(objs);
    for (size_t i = 0; i < n; i++) kite_record_unref(recs[i]);
    free(recs);
    (void)cur;
    return answered;
}

void kite_apiserver_run_delete(struct write_op *op, struct kite_record *cur, json_object *cobj) {
    struct req *rq = op->rq;
    json_object *meta = kite_obj_meta(cobj);
    const char *uid = kite_obj_str(meta, "uid");
    snprintf(op->uid, sizeof op->uid, "%s", uid ? uid : "");
    if (!check_preconditions(op, cur, uid)) return;
    if (!kite_apiserver_admit(op, KITE_ADMIT_DELETE, NULL, cobj)) {
        kite_apiserver_op_free(op);
        return;
    }
    if (op->sub && op->sub->guard && !op->guarded && run_guard(op, cur, cobj)) return;
    if (rq->res->delete_grace && run_graceful(op, cur, cobj)) return;
    if (add_propagation_finalizer(op, cur, cobj)) return;
    if (kite_apiserver_finalizers_pending(rq->res, cobj)) {
        if (kite_obj_get(meta, "deletionTimestamp")) { /* already terminating */
            struct kite_buf out = {0};
            kite_apiserver_render_record(rq, cur, &out);
            kite_apiserver_reply_json_buf(rq, 202, &out);
            kite_apiserver_op_free(op);
            return;
        }
        mark_deleting(op, cur, kite_apiserver_deep_copy(cobj), kite_now_wall(op->srv->clock), 0);
        return;
    }
    op->code = 200;
    kite_apiserver_submit(op, KITE_WRITE_DELETE, NULL, cur->mod_rev, cur);
}

/* DeleteOptions: the body's, or with no body the query's (?gracePeriodSeconds=N), as
 * kube-apiserver reads them. */
static json_object *delete_options_of(struct req *rq) {
    json_object *opts = kite_apiserver_parse_body(rq, true);
    if (!opts || rq->http->body_len) return opts;
    const char *pp = kite_http_query(rq->http, "propagationPolicy"), *od = kite_http_query(rq->http, "orphanDependents");
    if (pp) kite_obj_set(opts, "propagationPolicy", json_object_new_string(pp));
    if (od) kite_obj_set(opts, "orphanDependents", json_object_new_boolean(kite_apiserver_query_true(od)));
    const char *g = kite_http_query(rq->http, "gracePeriodSeconds");
    int64_t v;
    if (!g) return opts;
    if (kite_parse_int64(g, &v) < 0) {
        json_object_put(opts);
        kite_apiserver_reply_error(rq, 400, "BadRequest", "gracePeriodSeconds: strconv.ParseInt: parsing \"%s\": invalid syntax", g);
        return NULL;
    }
    kite_obj_set(opts, "gracePeriodSeconds", json_object_new_int64(v));
    return opts;
}

void kite_apiserver_handle_delete(struct req *rq) {
    if (!kite_apiserver_dry_run_query_ok(rq, "DeleteOptions")) return;
    json_object *opts = delete_options_of(rq);
    if (!opts) return;
    struct write_op *op = kite_apiserver_op_new(rq, OP_DELETE, NULL);
    bool ok = kite_apiserver_delete_options(op, opts);
    json_object_put(opts);
    if (!ok) {
        kite_apiserver_op_free(op);
        return;
    }
    kite_apiserver_run_op(op);
}

/* ---- deletecollection ------------------------------------------------------------------ */

struct collection_op {
    struct req *rq;
    struct apiserver_work work;  /* submits the next batch, on the write engine's thread */
    struct kite_record **recs;   /* the matching objects, in key order */
    size_t n, next;              /* next: first not yet submitted */
    pthread_mutex_t mu;
    size_t inflight;             /* submitted, not completed */
    bool *deleted;               /* per record: its delete committed */
    int err;                     /* first storage error */
    bool has_grace;              /* DeleteOptions.gracePeriodSeconds, as a DELETE's */
    int64_t grace;
    const char *propagation;     /* and its propagation's finalizer, as a DELETE's (static) */
};

static void collection_submit(struct collection_op *c);

static void collection_finish(void *ud) {
    struct collection_op *c = ud;
    struct req *rq = c->rq;
    if (c->err == -EAGAIN) {
        kite_apiserver_reply_error(rq, 429, "TooManyRequests", "the server has too many pending writes, please try again later");
    } else if (c->err) {
        kite_apiserver_reply_error(rq, 500, "InternalError", "storage error: %s", strerror(-c->err));
    } else {
        struct kite_buf out = {0};
        kite_buf_printf(&out, "{\"kind\":\"%s\",\"apiVersion\":\"%s\",\"metadata\":{},\"items\":[", rq->res->list_kind,
                        kite_resource_api_version(rq->res));
        bool first = true;
        for (size_t i = 0; i < c->n; i++) {
            if (!c->deleted[i]) continue;
            if (!first) kite_buf_putc(&out, ',');
            kite_apiserver_render_record(rq, c->recs[i], &out);
            first = false;
        }
        kite_buf_puts(&out, "]}");
        kite_apiserver_reply_json_buf(rq, 200, &out);
    }
    for (size_t i = 0; i < c->n; i++) kite_record_unref(c->recs[i]);
    free(c->recs);
    free(c->deleted);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

struct collection_item {
    struct collection_op *c;
    size_t i;
    bool marked;   /* an update marking the object terminating, not its delete */
};

/* On the store's writer thread: record the outcome; the batch's last completion hands on. */
static void collection_done(void *ud, int err, int64_t rev, struct kite_record *rec) {
    struct collection_item *it = ud;
    struct collection_op *c = it->c;
    pthread_mutex_lock(&c->mu);
    if (err == 0) c->deleted[it->i] = true;
    if (err == 0 && !it->marked) kite_apiserver_pools_release_record(c->rq->srv, c->rq->res, rec);
    if (err == 0 && it->marked && rec) { /* answered as the delete left it (deletionTimestamp), as kube-apiserver */
        kite_record_unref(c->recs[it->i]);
        c->recs[it->i] = kite_record_ref(rec);
    }
    /* gone meanwhile (someone else deleted it), or changed before it could be marked: not ours */
    else if (err != -ENOENT && err != -ESTALE && !c->err) c->err = err;
    bool last = --c->inflight == 0;
    pthread_mutex_unlock(&c->mu);
    free(it);
    if (!last) return;
    if (c->next < c->n && !c->err) kite_apiserver_work_push(c->rq->srv, &c->work);
    else kite_http_defer(c->rq->http, collection_finish, c);
}

static void collection_work(struct apiserver_work *w) {
    collection_submit((struct collection_op *)((char *)w - offsetof(struct collection_op, work)));
}

/* Submits the next batch; with nothing (left) to submit, answers. */
static void collection_submit(struct collection_op *c) {
    size_t end = KITE_MIN(c->n, c->next + KITE_DELETECOLLECTION_INFLIGHT), submitted = 0;
    pthread_mutex_lock(&c->mu);
    c->inflight = 1; /* held until every submit below is done, so no completion finishes early */
    pthread_mutex_unlock(&c->mu);
    for (; c->next < end; c->next++) {
        struct kite_record *rec = c->recs[c->next];
        /* unconditional, as kube-apiserver deletes each listed object by name */
        struct kite_write w = {.type = KITE_WRITE_DELETE, .key = rec->key};
        _cleanup_free_ char *marked = NULL;
        json_object *obj = kite_apiserver_record_object(rec);
        const struct kite_resource *res = c->rq->res;
        bool deleting = kite_obj_get(kite_obj_meta(obj), "deletionTimestamp") != NULL, pending = kite_apiserver_finalizers_pending(res, obj);
        /* Orphan or Foreground: the propagation's finalizer goes on, as a DELETE of it would put it */
        bool propagate = c->propagation && res->gc_owner && !has_finalizer(kite_obj_meta(obj), c->propagation);
        int64_t grace = 0;
        if (res->delete_grace && !deleting) grace = res->delete_grace(obj, c->has_grace ? c->grace : -1);
        /* a graceful delete under way ends early only with grace 0 (and no finalizers) */
        if (res->delete_grace && deleting && !pending && !propagate && !(c->has_grace && c->grace == 0)) continue;
        if (pending || grace > 0 || propagate) {
            /* held by finalizers or a grace period: marked terminating, as a DELETE of it would, and listed */
            if (deleting && !propagate) continue;
            json_object *copy = kite_apiserver_deep_copy(obj);
            if (propagate) set_propagation_finalizer(kite_obj_meta(copy), c->propagation);
            char ts[21];
            kite_time_format(kite_time_add(kite_now_wall(c->rq->srv->clock), kite_sec_to_ns(grace)), ts);
            if (!deleting) {
                kite_obj_set(kite_obj_meta(copy), "deletionTimestamp", json_object_new_string(ts));
                kite_obj_set(kite_obj_meta(copy), "deletionGracePeriodSeconds", json_object_new_int64(grace));
            }
            if (c->rq->res->terminating) c->rq->res->terminating(copy);
            marked = kite_object_encode(copy, &w.len);
            json_object_put(copy);
            w.type = KITE_WRITE_UPDATE;
            w.value = marked;
            w.expect_mod_rev = rec->mod_rev; /* a stale copy must not overwrite a newer object */
        }
        struct collection_item *it = kite_calloc(1, sizeof *it);
        *it = (struct collection_item){c, c->next, w.type == KITE_WRITE_UPDATE};
        pthread_mutex_lock(&c->mu);
        c->inflight++;
        pthread_mutex_unlock(&c->mu);
        int r = kite_store_submit(c->rq->srv->store, &w, collection_done, it);
        if (r == 0) {
            submitted++;
            continue;
        }
        free(it);
        pthread_mutex_lock(&c->mu);
        c->inflight--;
        /* a full store queue with nothing of ours in it: 429; else the rest waits for our batch */
        if ((r != -EAGAIN || !submitted) && !c->err) c->err = r;
        pthread_mutex_unlock(&c->mu);
        break;
    }
    pthread_mutex_lock(&c->mu);
    bool last = --c->inflight == 0; /* drop the hold taken above, as a completion would */
    pthread_mutex_unlock(&c->mu);
    if (!last) return;
    if (c->next < c->n && !c->err) kite_apiserver_work_push(c->rq->srv, &c->work);
    else kite_http_defer(c->rq->http, collection_finish, c);
}

void kite_apiserver_handle_deletecollection(struct req *rq) {
    if (rq->res->no_deletecollection) {
        kite_apiserver_reply_error(rq, 405, "MethodNotAllowed", "the server does not allow this method on the requested resource");
        return;
    }
    if (!kite_apiserver_dry_run_query_ok(rq, "DeleteOptions")) return;
    json_object *opts = delete_options_of(rq);
    if (!opts) return;
    json_object *g = kite_obj_get(opts, "gracePeriodSeconds");
    bool has_grace = g && json_object_is_type(g, json_type_int);
    int64_t grace = has_grace ? json_object_get_int64(g) : 0;
    if (grace < 0) grace = 1; /* as a DELETE's */
    /* the body's DeleteOptions judged as a DELETE's (dryRun read there too) */
    struct write_op *chk = kite_apiserver_op_new(rq, OP_DELETE, NULL);
    bool ok = kite_apiserver_delete_options(chk, opts), dry_run = chk->dry_run;
    const char *propagation = chk->propagation;
    kite_apiserver_op_free(chk);
    json_object_put(opts);
    if (!ok) return;
    struct kite_label_selector *ls;
    struct kite_field_selector *fs;
    if (!kite_apiserver_parse_selectors(rq, &ls, &fs)) return;
    _cleanup_free_ char *prefix = kite_object_prefix(rq->res, rq->ns);
    struct kite_record **recs = NULL;
    size_t n = 0, kept = 0;
    int64_t rev;
    bool more;
    kite_wcache_list(kite_apiserver_storage_cache(rq->srv, rq->res), prefix, NULL, 0, NULL, NULL, &recs, &n, &rev, &more);
    for (size_t i = 0; i < n; i++) {
        if (kite_apiserver_object_matches(rq->res, kite_apiserver_record_object(recs[i]), ls, fs)) recs[kept++] = recs[i];
        else kite_record_unref(recs[i]);
    }
    kite_label_selector_free(ls);
    kite_field_selector_free(fs);
    struct collection_op *c = kite_calloc(1, sizeof *c);
    c->rq = rq;
    c->recs = recs;
    c->n = kept;
    c->deleted = kite_calloc(kept ? kept : 1, sizeof *c->deleted);
    c->work.run = collection_work;
    c->has_grace = has_grace;
    c->grace = grace;
    c->propagation = propagation;
    pthread_mutex_init(&c->mu, NULL);
    if (dry_run) { /* the list of what would go, nothing deleted */
        for (size_t i = 0; i < kept; i++) c->deleted[i] = true;
        collection_finish(c);
        return;
    }
    collection_submit(c);
}
