/* Writes: create, update (PUT), patch, delete, deletecollection.
 *
 * Every write is an optimistic-concurrency transaction against the store: read the current
 * record from the watch cache, compute the new object, submit a compare-and-swap on the
 * record's mod_rev. The reply comes from the store's writer thread once the write is durable.
 * If someone else wrote in between (-ESTALE) and the client gave no resourceVersion
 * precondition, the op is recomputed against the new current record (kube-apiserver's
 * GuaranteedUpdate loop); with a precondition the client gets 409 Conflict.
 *
 * Writes of one object from this server do not race each other: an update, patch or delete
 * holds its key (keyq.h) from reading the current record until its write completed, and a
 * second write of the key waits meanwhile (no thread) and starts, on the retry thread, from
 * the record the first one left. Creates (a POST names no existing object) and dry runs (they
 * write nothing) do not queue. -ESTALE remains for writes from elsewhere (a namespace
 * deletion's, deletecollection's, another API server's on a shared store).
 *
 * Nothing here names a kind: what differs per kind is read from its registry row (strategy
 * hooks in src/api/kinds/). Deletes are in delete.c, body decoding in decode.c. */
#include "apiserver/write.h"
#include "api/status.h"
#include "base/clock.h"
#include "json/parse.h"

#include <stdio.h>

static void retry_push(struct kite_apiserver *s, struct write_op *op);
static void release_key(struct write_op *op);

void kite_apiserver_op_free(struct write_op *op) {
    release_key(op);
    kite_apiserver_pools_op_end(op->pools);
    kite_record_unref(op->done_rec);
    json_object_put(op->input);
    json_object_put(op->preconditions);
    json_object_put(op->managed);
    json_object_put(op->client_mf);
    free(op->manager);
    free(op->guard_name);
    free(op->key);
    free(op);
}

void kite_apiserver_op_fail(struct write_op *op, int code, const char *reason, const char *msg) {
    kite_apiserver_reply_error(op->rq, code, reason, "%s", msg);
    kite_apiserver_op_free(op);
}

/* A write the store could not make durable (disk full, I/O error): 500 to the client, counted,
 * and logged at most once a second with the number held back, so an operator sees the cause. */
static void op_storage_failed(struct write_op *op, int err) {
    struct kite_apiserver *s = op->rq->srv;
    uint64_t held;
    kite_apiserver_metrics_store_error(s->metrics);
    if (kite_log_ratelimit_allow(&s->storage_log, kite_now_mono(op->srv->clock), &held))
        log_error("apiserver", "storage error writing %s: %s (%llu more since the last report)", op->key,
                  strerror(-err), (unsigned long long)held);
    kite_apiserver_op_fail(op, 500, "InternalError", "storage error");
}

static void op_conflict(struct write_op *op) {
    char msg[512], gr[128];
    kite_resource_gr(op->rq->res, gr);
    snprintf(msg, sizeof msg,
             "Operation cannot be fulfilled on %s \"%s\": the object has been modified; please apply your changes to the latest version and try again",
             gr, op->rq->name);
    kite_apiserver_op_fail(op, 409, "Conflict", msg);
}

/* ---- object preparation ---------------------------------------------------------------- */

static const char GENERATE_ALPHABET[] = "bcdfghjklmnpqrstvwxz2456789";

void kite_apiserver_now_time(struct kite_apiserver *s, json_object *meta, const char *field) {
    char ts[21];
    kite_time_format(kite_now_wall(s->clock), ts);
    kite_obj_set(meta, field, json_object_new_string(ts));
}

/* kind/apiVersion of the request body must match the URL's resource. */
static bool check_type(struct req *rq, json_object *obj) {
    const char *kind = kite_obj_str(obj, "kind"), *av = kite_obj_str(obj, "apiVersion");
    const char *want_av = kite_resource_api_version(rq->res);
    if (kind && *kind && strcmp(kind, rq->res->kind) != 0) {
        kite_apiserver_reply_error(rq, 400, "BadRequest", "the kind in the body (%s) does not match the expected kind (%s)", kind, rq->res->kind);
        return false;
    }
    if (av && *av && strcmp(av, want_av) != 0) {
        kite_apiserver_reply_error(rq, 400, "BadRequest", "the API version in the data (%s) does not match the expected API version (%s)", av, want_av);
        return false;
    }
    kite_obj_set(obj, "kind", json_object_new_string(rq->res->kind));
    kite_obj_set(obj, "apiVersion", json_object_new_string(want_av));
    return true;
}

/* Takes the object's managedFields off, kept for the field manager when the client wrote them
 * on a main write (managed.c decides whether they count). */
static void strip_server_fields(struct write_op *op, json_object *meta) {
    json_object_put(TAKE_PTR(op->client_mf));
    json_object *mf = kite_obj_get(meta, "managedFields");
    if (mf && !op->sub) op->client_mf = json_object_get(mf);
    json_object_object_del(meta, "managedFields");
    json_object_object_del(meta, "selfLink");
    json_object_object_del(meta, "resourceVersion");
}

/* The object must decode into the kind's Go type (schema.h; also puts times in canonical
 * form): a request or patch result that fails is refused 400, as kube-apiserver's decoder. */
static bool check_schema(struct write_op *op, json_object *obj) {
    struct req *rq = op->rq;
    char *err = NULL;
    if (kite_schema_check(rq->res->schema, obj, &err) == 0) return kite_apiserver_check_field_validation(rq, obj);
    /* a strategic merge patch's result is decoded by the unstructured converter: 422 with
     * its words and the patch (a check that passes there leaves the decoder's 400) */
    char *cerr = NULL;
    if (op->kind == OP_PATCH && op->ptype == PATCH_STRATEGIC &&
        kite_schema_check_unstructured(rq->res->schema, obj, &cerr) < 0) {
        char *body = kite_status_patch_invalid(op->input, cerr);
        kite_apiserver_reply(rq, 422, "application/json", body, strlen(body));
    } else {
        kite_apiserver_reply_error(rq, 400, "BadRequest", "%s in version \"%s\" cannot be handled as a %s: %s", rq->res->kind,
                    rq->res->version, rq->res->kind, err);
    }
    free(cerr);
    free(err);
    return false;
}

/* Validation shared by create and update, after the kind's allocation (kube-apiserver
 * allocates in the storage's BeginCreate/BeginUpdate, before validating); replies 422 itself. */
static bool validate(struct write_op *op, json_object *obj, json_object *old) {
    struct req *rq = op->rq;
    struct kite_causes c = {0};
    if (rq->res->allocate && !op->sub) {
        if (!op->pools) op->pools = kite_apiserver_pools_op_new(op->srv, op->dry_run);
        if (op->pools) rq->res->allocate(obj, old, kite_apiserver_pools_op_iface(op->pools), &c);
    }
    kite_validate_object_meta(kite_obj_meta(obj), rq->res->namespaced, rq->res->name_rule, &c);
    if (rq->res->validate) rq->res->validate(obj, old, &c);
    if (!c.n) return true;
    kite_apiserver_reply_invalid(rq, kite_meta_str(obj, "name"), &c);
    kite_causes_release(&c);
    return false;
}

bool kite_apiserver_admit(struct write_op *op, enum kite_admission_op aop, json_object *obj, json_object *old) {
    struct req *rq = op->rq;
    struct kite_admission_attrs a = {.srv = op->srv, .user = &rq->user, .op = aop, .res = rq->res, .sub = rq->sub,
                                     .ns = rq->ns, .name = rq->name, .obj = obj, .old = old, .dry_run = op->dry_run};
    struct kite_admission_denial d = {0};
    struct kite_admission_notes notes = {0};
    a.notes = &notes;
    if (aop != KITE_ADMIT_DELETE && kite_admission_mutate(&a, &d) < 0) goto refused;
    /* an action (a binding) is its own check: the kind's validation of user writes is not it */
    if (aop != KITE_ADMIT_DELETE && !kite_subresource_is_action(op->sub) && !validate(op, obj, old)) {
        kite_admission_notes_release(&notes);
        return false;
    }
    if (kite_admission_validate(&a, &d) < 0) goto refused;
    kite_admission_notes_apply(rq, &notes);
    return true;
refused:
    kite_admission_notes_apply(rq, &notes);
    kite_admission_reply(rq, &d);
    return false;
}

/* Admission of a write whose objects are not parsed (a Lease renewal spliced, renewal.c): the
 * plugins see the request's attributes, obj and old NULL (each plugin that reads objects
 * passes over a write without them); the kind's validation is not run, the write changing
 * nothing it checks. */
static bool admit_unparsed(struct write_op *op, enum kite_admission_op aop) {
    struct req *rq = op->rq;
    struct kite_admission_notes notes = {0};
    struct kite_admission_attrs a = {.srv = op->srv, .user = &rq->user, .op = aop, .res = rq->res, .sub = rq->sub,
                                     .ns = rq->ns, .name = rq->name, .dry_run = op->dry_run, .notes = &notes};
    struct kite_admission_denial d = {0};
    bool ok = kite_admission_mutate(&a, &d) == 0 && kite_admission_validate(&a, &d) == 0;
    kite_admission_notes_apply(rq, &notes);
    if (!ok) kite_admission_reply(rq, &d);
    return ok;
}

static bool prepare_create(struct write_op *op, json_object *obj) {
    struct req *rq = op->rq;
    if (!check_schema(op, obj) || !check_type(rq, obj)) return false;
    json_object *meta = kite_obj_ensure(obj, "metadata");
    const char *name = kite_obj_str(meta, "name");
    const char *gen = kite_obj_str(meta, "generateName");
    if ((!name || !*name) && gen && *gen) {
        char suffix[6];
        unsigned char rnd[5];
        kite_random_bytes(rnd, sizeof rnd);
        for (size_t i = 0; i < 5; i++) suffix[i] = GENERATE_ALPHABET[rnd[i] % (sizeof GENERATE_ALPHABET - 1)];
        suffix[5] = 0;
        char *full = kite_asprintf("%.*s%s", 58, gen, suffix);
        kite_obj_set(meta, "name", json_object_new_string(full));
        free(full);
    }
    if (rq->name && kite_obj_str(meta, "name") && strcmp(rq->name, kite_obj_str(meta, "name")) != 0) {
        kite_apiserver_reply_error(rq, 400, "BadRequest", "the name of the object (%s) does not match the name on the URL (%s)",
                    kite_obj_str(meta, "name"), rq->name);
        return false;
    }
    if (rq->res->namespaced) {
        const char *ns = kite_obj_str(meta, "namespace");
        if (ns && *ns && rq->ns && strcmp(ns, rq->ns) != 0) {
            kite_apiserver_reply_error(rq, 400, "BadRequest", "the namespace of the provided object does not match the namespace sent on the request");
            return false;
        }
        if (!rq->ns) {
            kite_apiserver_reply_error(rq, 404, "NotFound", "the server could not find the requested resource");
            return false;
        }
        kite_obj_set(meta, "namespace", json_object_new_string(rq->ns));
    } else {
        json_object_object_del(meta, "namespace");
    }
    char uid[37];
    kite_uuid4(uid);
    kite_obj_set(meta, "uid", json_object_new_string(uid));
    kite_apiserver_now_time(op->srv, meta, "creationTimestamp");
    json_object_object_del(meta, "deletionTimestamp");
    json_object_object_del(meta, "deletionGracePeriodSeconds");
    json_object_object_del(meta, "generation");
    if (rq->res->spec_generation) kite_obj_set(meta, "generation", json_object_new_int64(1));
    strip_server_fields(op, meta);
    if (rq->res->has_status && !rq->res->status_on_create) json_object_object_del(obj, "status");
    if (rq->res->defaults) rq->res->defaults(obj);
    if (!kite_apiserver_admit(op, KITE_ADMIT_CREATE, obj, NULL)) return false;
    if (rq->res->to_storage) rq->res->to_storage(obj);
    return true;
}

json_object *kite_apiserver_deep_copy(json_object *o) {
    json_object *c = NULL;
    json_object_deep_copy(o, &c, NULL);
    return c;
}

/* A copy of an object without its metadata.managedFields, for the writes that compute them
 * again from the current object (managed.c): the entries are a third of a node's bytes, and
 * copying them for nothing cost as much as maintaining them. */
static json_object *deep_copy_unmanaged(json_object *o) {
    if (!json_object_is_type(o, json_type_object)) return kite_apiserver_deep_copy(o);
    json_object *c = json_object_new_object();
    json_object_object_foreach(o, k, v) {
        if (strcmp(k, "metadata") != 0 || !json_object_is_type(v, json_type_object)) {
            json_object_object_add(c, k, kite_apiserver_deep_copy(v));
            continue;
        }
        json_object *m = json_object_new_object();
        json_object_object_foreach(v, mk, mv) {
            if (strcmp(mk, "managedFields") != 0) json_object_object_add(m, mk, kite_apiserver_deep_copy(mv));
        }
        json_object_object_add(c, k, m);
    }
    return c;
}

/* dst[k] = a copy of src[k] (or no k). Deep: src may be an object cached on a store record,
 * shared read-only between threads, whose reference counts must not be touched. */
static void copy_field(json_object *dst, json_object *src, const char *k) {
    json_object *v = kite_obj_get(src, k);
    if (v) kite_obj_set(dst, k, kite_apiserver_deep_copy(v));
    else json_object_object_del(dst, k);
}

/* copy_field of a dotted path ("spec.ephemeralContainers": the one field of spec a
 * subresource writes); the objects on the way are made in dst where src has them. */
static void copy_path(json_object *dst, json_object *src, const char *path) {
    const char *dot = strchr(path, '.');
    if (!dot) {
        copy_field(dst, src, path);
        return;
    }
    char seg[64];
    snprintf(seg, sizeof seg, "%.*s", (int)KITE_MIN((size_t)(dot - path), sizeof seg - 1), path);
    json_object *s = kite_obj_get(src, seg), *d = kite_obj_get(dst, seg);
    if (!json_object_is_type(s, json_type_object)) s = NULL;
    if (!s && !json_object_is_type(d, json_type_object)) return; /* neither has it */
    copy_path(kite_obj_ensure(dst, seg), s, dot + 1);
}

/* Builds the object to store from the client's new object and the current one. Takes
 * ownership of obj; returns the result (new ref) or NULL after replying. */
static json_object *prepare_update(struct write_op *op, json_object *obj, json_object *cur) {
    struct req *rq = op->rq;
    if (!check_schema(op, obj) || !check_type(rq, obj)) goto fail;
    json_object *meta = kite_obj_ensure(obj, "metadata");
    const char *name = kite_obj_str(meta, "name");
    if (name && *name && strcmp(name, rq->name) != 0) {
        kite_apiserver_reply_error(rq, 400, "BadRequest", "the name of the object (%s) does not match the name on the URL (%s)", name, rq->name);
        goto fail;
    }
    const char *ns = kite_obj_str(meta, "namespace");
    if (rq->res->namespaced && ns && *ns && strcmp(ns, rq->ns) != 0) {
        kite_apiserver_reply_error(rq, 400, "BadRequest", "the namespace of the provided object does not match the namespace sent on the request");
        goto fail;
    }
    json_object *cmeta = kite_obj_meta(cur);
    const char *uid = kite_obj_str(meta, "uid"), *cuid = kite_obj_str(cmeta, "uid");
    if (uid && *uid && cuid && strcmp(uid, cuid) != 0) {
        char msg[256];
        snprintf(msg, sizeof msg, "Precondition failed: UID in precondition: %s, UID in object meta: %s", uid, cuid);
        kite_apiserver_reply_error(rq, 409, "Conflict", "%s", msg);
        goto fail;
    }
    json_object *res;
    if (op->sub) {
        /* a subresource write changes its field and metadata, nothing else (nodes/status
         * never changes spec; namespaces/finalize only spec) */
        res = deep_copy_unmanaged(cur);
        copy_path(res, obj, op->sub->field);
        kite_obj_set(res, "metadata", json_object_get(meta));
        json_object_put(obj);
        if (kite_streq(op->sub->name, "status"))
            for (size_t i = 0; i < KITE_ARRAY_SIZE(rq->res->status_keeps_meta) && rq->res->status_keeps_meta[i]; i++)
                copy_field(meta, cmeta, rq->res->status_keeps_meta[i]);
    } else {
        res = obj;
        if (rq->res->has_status) copy_field(res, cur, "status");
        for (const struct kite_subresource *sr = rq->res->subresources; sr && sr->name; sr++)
            if (sr->field && !sr->view) copy_path(res, cur, sr->field); /* e.g. a namespace's spec.finalizers: finalize only */
    }
    meta = kite_obj_meta(res);
    static const char *const immutable[] = {"name", "namespace", "uid", "creationTimestamp", "deletionTimestamp",
                                            "deletionGracePeriodSeconds", "generation"};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(immutable); i++) copy_field(meta, cmeta, immutable[i]);
    strip_server_fields(op, meta);
    if (rq->res->spec_generation && (!op->sub || op->sub->view) &&
        !kite_json_equal(kite_obj_get(res, "spec"), kite_obj_get(cur, "spec"))) {
        json_object *g = kite_obj_get(cmeta, "generation");
        kite_obj_set(meta, "generation", json_object_new_int64((g ? json_object_get_int64(g) : 0) + 1));
    }
    if (rq->res->defaults) rq->res->defaults(res);
    if (!kite_apiserver_admit(op, KITE_ADMIT_UPDATE, res, cur)) {
        json_object_put(res);
        return NULL;
    }
    if (rq->res->to_storage) rq->res->to_storage(res);
    return res;
fail:
    json_object_put(obj);
    return NULL;
}

/* ---- submission ------------------------------------------------------------------------ */


/* Retries run on their own thread: the store's writer thread, which reports the conflict, is
 * the one serial step of every write and must not do a retry's JSON work. */
void kite_apiserver_work_push(struct kite_apiserver *s, struct apiserver_work *w) {
    pthread_mutex_lock(&s->retry_mu);
    w->next = NULL;
    *s->retry_tail = w;
    s->retry_tail = &w->next;
    pthread_cond_signal(&s->retry_cond);
    pthread_mutex_unlock(&s->retry_mu);
}

/* Holds op's key for the rest of the op, or queues op behind the write of the key in progress
 * (false: op waits and is run again once it holds the key, or was answered 429). Ops with a
 * resourceVersion precondition queue too: behind a write that commits they would fail the
 * store's compare-and-swap (409) anyway, and now fail the check in run_op instead, without a
 * doomed write; behind one that fails they go on as before. Whether an op has a precondition
 * is known only once its object was computed. */
static bool take_key(struct write_op *op) {
    if (op->holds_key || op->kind == OP_CREATE || op->dry_run || !op->key) return true;
    struct kite_apiserver *s = op->srv;
    int r = kite_apiserver_keyq_hold(s->writing, op->key, &op->qlink);
    if (r == KEYQ_HELD) {
        op->holds_key = true;
        return true;
    }
    if (r == KEYQ_QUEUED) {
        kite_apiserver_metrics_write_queued(s->metrics); /* op may already run elsewhere: not touched again */
        return false;
    }
    kite_apiserver_op_fail(op, 429, "TooManyRequests", "too many concurrent writes of this object, please try again later");
    return false;
}

/* Ends op's hold of its key: returns the write that waited for it next, which holds the key
 * now and must be started (on the retry thread), or NULL. Once per hold: NULL for an op that
 * holds nothing, so the write completion and op_free can both call it. */
static struct write_op *pass_key(struct write_op *op) {
    if (!op->holds_key) return NULL;
    op->holds_key = false;
    struct keyq_link *w = kite_apiserver_keyq_release(op->srv->writing, op->key);
    if (!w) return NULL;
    struct write_op *next = (struct write_op *)((char *)w - offsetof(struct write_op, qlink));
    next->holds_key = true;
    return next;
}

static void release_key(struct write_op *op) {
    struct write_op *next = pass_key(op);
    if (next) retry_push(op->srv, next);
}

static void run_op_work(struct apiserver_work *w) { kite_apiserver_run_op((struct write_op *)((char *)w - offsetof(struct write_op, work))); }

static void retry_push(struct kite_apiserver *s, struct write_op *op) {
    op->work.run = run_op_work;
    kite_apiserver_work_push(s, &op->work);
}

void kite_apiserver_op_retry(struct write_op *op) { retry_push(op->srv, op); }

static void *retry_main(void *ud) {
    struct kite_apiserver *s = ud;
    pthread_mutex_lock(&s->retry_mu);
    for (;;) {
        while (!s->retry_head && !s->retry_stop) pthread_cond_wait(&s->retry_cond, &s->retry_mu);
        if (!s->retry_head) break; /* stopping, and drained */
        struct apiserver_work *w = s->retry_head;
        s->retry_head = w->next;
        if (!s->retry_head) s->retry_tail = &s->retry_head;
        pthread_mutex_unlock(&s->retry_mu);
        w->run(w);
        pthread_mutex_lock(&s->retry_mu);
    }
    pthread_mutex_unlock(&s->retry_mu);
    return NULL;
}

int kite_apiserver_retry_start(struct kite_apiserver *s) {
    s->writing = kite_apiserver_keyq_new(KITE_WRITE_WAITERS_MAX);
    pthread_mutex_init(&s->retry_mu, NULL);
    pthread_cond_init(&s->retry_cond, NULL);
    s->retry_head = NULL;
    s->retry_tail = &s->retry_head;
    if (pthread_create(&s->retry_thread, NULL, retry_main, s) != 0) return -EAGAIN;
    pthread_setname_np(s->retry_thread, "write-retry");
    s->retry_started = true;
    return 0;
}

/* The HTTP server stopped first: it waited for every request to be answered, and waiting
 * writes are answered in turn as the writes before them complete (the store and this thread
 * still run meanwhile), so no op is left holding or waiting for a key. */
void kite_apiserver_retry_stop(struct kite_apiserver *s) {
    if (s->retry_started) {
        pthread_mutex_lock(&s->retry_mu);
        s->retry_stop = true;
        pthread_cond_signal(&s->retry_cond);
        pthread_mutex_unlock(&s->retry_mu);
        pthread_join(s->retry_thread, NULL);
        s->retry_started = false;
    }
    kite_apiserver_keyq_free(TAKE_PTR(s->writing));
}

static void write_finish(void *ud);
static void write_failed(struct write_op *op, int err);

/* The store's completion, on its writer thread: everything but the retry decision and handing
 * the key to the next write of it is left to an HTTP thread (write_finish), so the writer's
 * per-write cost stays small. */
static void write_done(void *ud, int err, int64_t rev, struct kite_record *rec) {
    struct write_op *op = ud;
    struct req *rq = op->rq;
    kite_apiserver_metrics_store_commit(rq->srv->metrics, kite_now_mono(op->srv->clock) - op->submitted_ns);
    if ((err == -ESTALE || err == -ENOENT) && !op->client_rv && op->kind != OP_CREATE &&
        ++op->attempts < KITE_UPDATE_RETRIES) {
        kite_apiserver_metrics_write_retry(rq->srv->metrics);
        retry_push(rq->srv, op); /* recompute against the record that won, off the writer thread; keeps its key */
        return;
    }
    op->done_err = err;
    op->done_rec = kite_record_ref(rec);
    /* The watch cache already has this write (completions fire after subscribers), so the
     * next write of the key can start now rather than after write_finish's hop. */
    struct write_op *next = pass_key(op);
    if (next) retry_push(rq->srv, next);
    kite_http_defer(rq->http, write_finish, op);
}

void kite_apiserver_reply_done(struct write_op *op, struct kite_record *rec) {
    struct req *rq = op->rq;
    if (op->status_reply) {
        char *body = kite_status_success(op->status_reply, NULL, NULL, NULL, NULL);
        kite_apiserver_reply(rq, op->status_reply, "application/json", body, strlen(body));
    } else if (op->kind == OP_DELETE) {
        kite_apiserver_reply_deleted(op, rec);
    } else {
        struct kite_buf out = {0};
        kite_apiserver_render_record(rq, rec, &out);
        kite_apiserver_reply_json_buf(rq, op->code, &out);
    }
}

static void write_finish(void *ud) {
    struct write_op *op = ud;
    int err = op->done_err;
    struct kite_record *rec = op->done_rec;
    if (err == 0) {
        kite_apiserver_pools_op_commit(op->pools, rec);
        kite_apiserver_reply_done(op, rec);
        kite_apiserver_op_free(op);
        return;
    }
    write_failed(op, err);
}

/* Answers a write that failed with err (-errno of the store) and frees op. */
static void write_failed(struct write_op *op, int err) {
    struct req *rq = op->rq;
    if (err == -ESTALE) {
        op_conflict(op);
    } else if (err == -EEXIST) {
        char gr[128];
        kite_resource_gr(rq->res, gr);
        kite_apiserver_reply_error(rq, 409, "AlreadyExists", "%s \"%s\" already exists", gr, rq->name ? rq->name : "");
        kite_apiserver_op_free(op);
    } else if (err == -ENOENT) {
        char gr[128];
        kite_resource_gr(rq->res, gr);
        kite_apiserver_reply_error(rq, 404, "NotFound", "%s \"%s\" not found", gr, rq->name);
        kite_apiserver_op_free(op);
    } else if (err == -EAGAIN) {
        kite_apiserver_op_fail(op, 429, "TooManyRequests", "the server has too many pending writes, please try again later");
    } else {
        op_storage_failed(op, err);
    }
}

static void submit_bytes(struct write_op *op, enum kite_write_type type, const char *bytes, size_t len, int64_t expect,
                         struct kite_record *cur);

void kite_apiserver_submit(struct write_op *op, enum kite_write_type type, json_object *obj, int64_t expect,
            struct kite_record *cur) {
    struct req *rq = op->rq;
    if (cur && !op->dry_run && rq->res->held && op->srv->pools) {
        if (!op->pools) op->pools = kite_apiserver_pools_op_new(op->srv, false);
        kite_apiserver_pools_op_replaced(op->pools, kite_apiserver_record_object(cur), type == KITE_WRITE_DELETE ? NULL : obj);
    }
    size_t len = 0;
    _cleanup_free_ char *bytes = obj ? kite_object_encode(obj, &len) : NULL;
    /* Freed here, on the thread that built it, rather than kept on the new record for the next
     * write of the object: freed later by the store's writer thread (when the record leaves the
     * watch cache's history), its ~40 blocks cost more in the allocator's cross-thread free path
     * than parsing the stored bytes again costs the next write (BENCHMARKS.md). */
    json_object_put(obj);
    submit_bytes(op, type, bytes, len, expect, cur);
}

/* kite_apiserver_submit's part after the encoding: the new stored text bytes[0..len) (NULL for
 * a delete), not taken. */
static void submit_bytes(struct write_op *op, enum kite_write_type type, const char *bytes, size_t len, int64_t expect,
                         struct kite_record *cur) {
    struct req *rq = op->rq;
    if (type == KITE_WRITE_UPDATE && cur &&
        ((cur->len == len && memcmp(cur->value, bytes, len) == 0) ||
         kite_apiserver_codec_same_stored(op->srv->codec, op->key, cur->value, cur->len, bytes, len))) {
        /* nothing changed: no write, no new revision (as kube-apiserver) */
        op->code = 200;
        kite_apiserver_reply_done(op, cur);
        kite_apiserver_op_free(op);
        return;
    }
    if (type != KITE_WRITE_DELETE && len > KITE_STORE_VALUE_MAX) {
        /* kube-apiserver passes etcd's "request is too large" on as a 500 (kubernetes#112152);
         * it is the client's object that is too big. */
        kite_apiserver_reply_error(rq, 413, "RequestEntityTooLarge", "the object is too large to store: %zu bytes, at most %d",
                    len, KITE_STORE_VALUE_MAX);
        kite_apiserver_op_free(op);
        return;
    }
    if (op->dry_run && op->status_reply) {
        kite_apiserver_reply_done(op, cur);
        kite_apiserver_op_free(op);
        return;
    }
    if (op->dry_run) {
        /* the answer the write would get, as kube-apiserver's dry run (it checks the key too) */
        struct kite_record *exists = type == KITE_WRITE_CREATE ? kite_wcache_get(kite_apiserver_storage_cache(rq->srv, rq->res), op->key) : NULL;
        if (exists) {
            kite_record_unref(exists);
            write_failed(op, -EEXIST);
            return;
        }
        if (type == KITE_WRITE_DELETE) {
            kite_apiserver_reply_deleted(op, cur);
        } else {
            struct kite_buf out = {0};
            kite_object_render(bytes, len, cur ? cur->mod_rev : 0, &out);
            kite_apiserver_reply_json_buf(rq, op->code, &out);
        }
        kite_apiserver_op_free(op);
        return;
    }
    struct kite_write w = {.type = type, .key = op->key, .value = bytes, .len = len, .expect_mod_rev = expect};
    op->submitted_ns = kite_now_mono(op->srv->clock);
    int r = kite_store_submit(rq->srv->store, &w, write_done, op);
    if (r == -EAGAIN) kite_apiserver_op_fail(op, 429, "TooManyRequests", "the server has too many pending writes, please try again later");
    else if (r < 0) op_storage_failed(op, r);
}

static bool check_rv_precondition(struct write_op *op, json_object *obj, struct kite_record *cur) {
    const char *rv = kite_meta_str(obj, "resourceVersion");
    int64_t v;
    /* "0" is no version at all, as the store's versioner parses it (kubectl replace of a
     * manifest that carries it is unconditional where the kind allows that) */
    if (!rv || !*rv || strcmp(rv, "0") == 0) {
        if (op->kind == OP_UPDATE && !op->rq->res->unconditional_update) {
            kite_apiserver_op_fail(op, 422, "Invalid", "metadata.resourceVersion: Invalid value: 0x0: must be specified for an update");
            return false;
        }
        return true;
    }
    if (kite_parse_int64(rv, &v) < 0 || v <= 0) {
        kite_apiserver_op_fail(op, 400, "BadRequest", "metadata.resourceVersion: Invalid value: invalid resource version");
        return false;
    }
    if (v != cur->mod_rev) {
        op_conflict(op);
        return false;
    }
    /* A patched object carries the current object's resourceVersion unless the patch set one:
     * a patch that loses a race is applied again to the new object, where a resourceVersion
     * of its own fails the check above (409), as kube-apiserver's GuaranteedUpdate does. */
    if (op->kind == OP_UPDATE) op->client_rv = true;
    return true;
}

static json_object *apply_patch(struct write_op *op, json_object *doc, json_object *cobj) {
    json_object *out = NULL;
    char *err = NULL;
    int r;
    switch (op->ptype) {
    case PATCH_MERGE: r = kite_merge_patch(doc, op->input, &out, &err); break;
    case PATCH_JSON: r = kite_json_patch(doc, op->input, &out, &err); break;
    case PATCH_APPLY: return kite_apiserver_managed_apply(op, doc, cobj) ?: (kite_apiserver_op_free(op), NULL);
    default: r = kite_smp_apply(doc, op->input, op->rq->res->smp, &out, &err); break;
    }
    if (r == 0 && !json_object_is_type(out, json_type_object)) {
        json_object_put(out);
        out = NULL;
        r = -EINVAL;
    }
    if (r < 0) {
        kite_apiserver_reply_error(op->rq, r == -EBADMSG ? 400 : 422, r == -EBADMSG ? "BadRequest" : "Invalid", "%s",
                    err ? err : "the patch could not be applied");
        free(err);
        kite_apiserver_op_free(op);
        return NULL;
    }
    free(err);
    return out;
}


/* The body object of a create or update, consumed by the attempt; a retry parses the request
 * body again (cheaper than keeping a deep copy for the rare retry). */
static json_object *take_input(struct write_op *op) {
    if (op->input) return TAKE_PTR(op->input);
    enum json_tokener_error e;
    json_object *o = kite_json_parse(op->rq->http->body, op->rq->http->body_len, KITE_JSON_MAX_DEPTH, &e, NULL);
    return o ? o : json_object_new_object(); /* it parsed the first time */
}

static void put_owned(json_object **o) { json_object_put(*o); }

/* A PUT that may be a node agent's Lease renewal (renewal.c), tried before its body is parsed. */
static bool renewal_candidate(struct req *rq) {
    const char *ct = kite_http_header(rq->http, "Content-Type");
    return !rq->sub && rq->http->body_len > 0 && kite_streq(rq->res->plural, "leases") &&
           kite_streq(rq->res->group, "coordination.k8s.io") && !rq->res->held &&
           (!ct || kite_apiserver_media_is(ct, "application/json")) && !kite_http_query(rq->http, "dryRun");
}

/* Writes op, a renewal candidate, as the stored text of cur spliced (renewal.c): true when it
 * was (submitted, or refused and answered), false when it takes the full update. */
static bool splice_renewal(struct write_op *op, struct kite_record *cur) {
    struct req *rq = op->rq;
    struct kite_buf text = {0};
    if (kite_apiserver_renewal_splice(cur->value, cur->len, rq->http->body, rq->http->body_len, cur->mod_rev, op->manager,
                                      kite_resource_api_version(rq->res), kite_now_wall(op->srv->clock), &text) < 0)
        return false;
    if (!admit_unparsed(op, KITE_ADMIT_UPDATE)) {
        kite_buf_release(&text);
        kite_apiserver_op_free(op);
        return true;
    }
    op->client_rv = true; /* the body's resourceVersion was the precondition: a lost race is a conflict */
    op->code = 200;
    kite_apiserver_metrics_renewal_spliced(op->srv->metrics);
    submit_bytes(op, KITE_WRITE_UPDATE, text.p, text.len, cur->mod_rev, cur);
    kite_buf_release(&text);
    return true;
}

/* An action subresource's change (a pod's binding) of the current object cobj, written as an
 * update of it; a race with another write runs the action again on the object that won. */
static void run_action(struct write_op *op, struct kite_record *cur, json_object *cobj) {
    struct req *rq = op->rq;
    json_object *obj = kite_apiserver_deep_copy(cobj);
    if (rq->res->from_storage) rq->res->from_storage(obj);
    char *msg = NULL;
    int code = op->sub->act(obj, op->input, kite_now_wall(op->srv->clock), &msg);
    if (code) {
        json_object_put(obj);
        if (code == 409) {
            char gr[160];
            snprintf(gr, sizeof gr, "%s/%s%s%s", rq->res->plural, op->sub->name, *rq->res->group ? "." : "", rq->res->group);
            struct status_details d = {.name = rq->name, .group = *rq->res->group ? rq->res->group : NULL, .kind = gr};
            kite_apiserver_reply_error_about(rq, 409, "Conflict", &d, "Operation cannot be fulfilled on %s \"%s\": %s", gr, rq->name,
                              msg ? msg : "");
        } else {
            kite_apiserver_reply_error(rq, code, NULL, "%s", msg ? msg : "");
        }
        free(msg);
        kite_apiserver_op_free(op);
        return;
    }
    if (!kite_apiserver_admit(op, KITE_ADMIT_UPDATE, obj, cobj)) {
        json_object_put(obj);
        kite_apiserver_op_free(op);
        return;
    }
    if (rq->res->to_storage) rq->res->to_storage(obj);
    op->code = 201;
    kite_apiserver_submit(op, KITE_WRITE_UPDATE, obj, cur->mod_rev, cur);
}

/* A write of a view subresource (a workload's scale): the patch applies to the view, or the
 * body is one; what it changes is written into a copy of the object, which is then updated as
 * any object. The view's resourceVersion, if any, is the object's precondition. New object, or
 * NULL after replying. */
static json_object *view_write(struct write_op *op, json_object *cobj) {
    const struct kite_subresource *sr = op->sub;
    json_object *obj = kite_apiserver_deep_copy(cobj), *view;
    if (op->rq->res->from_storage) op->rq->res->from_storage(obj);
    if (op->kind == OP_PATCH && op->ptype == PATCH_APPLY) {
        /* an apply of a view would need the view's own field sets */
        kite_apiserver_reply_error(op->rq, 415, "UnsupportedMediaType",
                    "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json");
        json_object_put(obj);
        kite_apiserver_op_free(op);
        return NULL;
    }
    if (op->kind == OP_PATCH) {
        json_object *doc = sr->view(obj);
        view = apply_patch(op, doc, NULL);
        json_object_put(doc);
        if (!view) {
            json_object_put(obj);
            return NULL;
        }
    } else {
        view = take_input(op);
        const char *kind = kite_obj_str(view, "kind");
        if (kind && *kind && strcmp(kind, sr->body_kind) != 0) {
            kite_apiserver_reply_error(op->rq, 400, "BadRequest", "the kind in the body (%s) does not match the expected kind (%s)", kind,
                        sr->body_kind);
            json_object_put(view);
            json_object_put(obj);
            kite_apiserver_op_free(op);
            return NULL;
        }
    }
    sr->apply(obj, view);
    json_object *meta = kite_obj_ensure(obj, "metadata");
    const char *rv = kite_meta_str(view, "resourceVersion");
    if (rv && *rv) kite_obj_set(meta, "resourceVersion", json_object_new_string(rv));
    else json_object_object_del(meta, "resourceVersion");
    json_object_put(view);
    return obj;
}

void kite_apiserver_run_op(struct write_op *op) {
    if (!take_key(op)) return;
    struct req *rq = op->rq;
    struct kite_record *cur = NULL;
    if (op->kind != OP_CREATE) cur = kite_wcache_get(kite_apiserver_storage_cache(rq->srv, rq->res), op->key);
    if (op->renewal) {
        op->renewal = false; /* a retry, or the full update, parses the body */
        if (cur && splice_renewal(op, cur)) {
            kite_record_unref(cur);
            return;
        }
        if (!(op->input = kite_apiserver_parse_body(rq, false))) {
            kite_apiserver_op_free(op);
            kite_record_unref(cur);
            return;
        }
    }

    bool apply_create = !cur && op->kind == OP_PATCH && op->ptype == PATCH_APPLY && !op->sub;
    if (op->kind == OP_CREATE || (!cur && op->kind == OP_UPDATE && rq->res->create_on_update && !op->sub) || apply_create) {
        json_object *obj = apply_create ? kite_apiserver_managed_apply(op, NULL, NULL) : take_input(op);
        op->code = 201;
        op->kind = OP_CREATE;
        if (!prepare_create(op, obj)) {
            json_object_put(obj);
            kite_apiserver_op_free(op);
            return;
        }
        kite_apiserver_managed_finish(op, NULL, false, obj);
        char *key = kite_object_key(rq->res, kite_meta_str(obj, "namespace"), kite_meta_str(obj, "name"));
        if (op->key && strcmp(key, op->key) != 0) release_key(op); /* held the URL's key, writes another */
        free(op->key);
        op->key = key;
        if (!rq->name) rq->name = kite_strdup(kite_meta_str(obj, "name") ? kite_meta_str(obj, "name") : "");
        kite_apiserver_submit(op, KITE_WRITE_CREATE, obj, 0, NULL);
        return;
    }
    if (!cur) {
        char gr[128];
        kite_resource_gr(rq->res, gr);
        kite_apiserver_reply_error(rq, 404, "NotFound", "%s \"%s\" not found", gr, rq->name);
        kite_apiserver_op_free(op);
        return;
    }
    /* The current object: the record's cached parse when a reader made one, else a private
     * parse, freed on this thread (see submit). */
    json_object *cobj = kite_record_cache(cur);
    __attribute__((cleanup(put_owned))) json_object *owned = cobj ? NULL : kite_apiserver_record_parse(cur);
    if (!cobj) cobj = owned;
    if (op->kind == OP_DELETE) {
        kite_apiserver_run_delete(op, cur, cobj);
        kite_record_unref(cur);
        return;
    }
    if (op->kind == OP_ACTION) {
        run_action(op, cur, cobj);
        kite_record_unref(cur);
        return;
    }
    json_object *obj;
    if (op->sub && op->sub->view) {
        obj = view_write(op, cobj);
        if (!obj) {
            kite_record_unref(cur);
            return;
        }
    } else if (op->kind == OP_PATCH) {
        /* a JSON patch addresses managedFields by path, a merge patch may set them: those see
         * them (kubectl's client-side to server-side apply migration replaces them) */
        bool mf = op->ptype == PATCH_JSON ||
                  (op->ptype != PATCH_APPLY && kite_obj_get(kite_obj_meta(op->input), "managedFields"));
        json_object *doc = mf ? kite_apiserver_deep_copy(cobj) : deep_copy_unmanaged(cobj);
        if (rq->res->from_storage) rq->res->from_storage(doc);
        obj = apply_patch(op, doc, cobj);
        json_object_put(doc);
        if (!obj) {
            kite_record_unref(cur);
            return;
        }
    } else {
        obj = take_input(op);
    }
    if (!check_rv_precondition(op, obj, cur)) {
        json_object_put(obj);
        kite_record_unref(cur);
        return;
    }
    json_object *res = prepare_update(op, obj, cobj);
    if (!res) {
        kite_apiserver_op_free(op);
        kite_record_unref(cur);
        return;
    }
    op->code = 200;
    kite_apiserver_managed_finish(op, cobj, owned != NULL, res);
    json_object *meta = kite_obj_meta(res);
    json_object *dgs = kite_obj_get(meta, "deletionGracePeriodSeconds");
    if (kite_obj_get(meta, "deletionTimestamp") && !kite_apiserver_finalizers_pending(rq->res, res) &&
        kite_apiserver_finalizers_pending(rq->res, cobj) && (!dgs || json_object_get_int64(dgs) == 0)) {
        /* the last finalizer is gone from an object being deleted (and its grace period, if it
         * has one, is over): delete it now, as upstream's ShouldDeleteDuringUpdate. Any other
         * update of it (a terminating pod's status) is an update. */
        snprintf(op->uid, sizeof op->uid, "%s", kite_obj_str(meta, "uid") ? kite_obj_str(meta, "uid") : "");
        op->kind = OP_DELETE;
        json_object_put(res);
        kite_apiserver_submit(op, KITE_WRITE_DELETE, NULL, cur->mod_rev, cur);
    } else {
        kite_apiserver_submit(op, KITE_WRITE_UPDATE, res, cur->mod_rev, cur);
    }
    kite_record_unref(cur);
}

struct write_op *kite_apiserver_op_new(struct req *rq, enum op_kind kind, json_object *input) {
    struct write_op *op = kite_calloc(1, sizeof *op);
    op->rq = rq;
    op->srv = rq->srv;
    op->kind = kind;
    op->input = input;
    op->sub = rq->sub ? kite_resource_subresource(rq->res, rq->sub) : NULL;
    const char *dr = kite_http_query(rq->http, "dryRun");
    op->dry_run = dr && strcmp(dr, "All") == 0;
    if (rq->name) op->key = kite_object_key(rq->res, rq->ns, rq->name);
    return op;
}

bool kite_apiserver_dry_run_query_ok(struct req *rq, const char *opts) {
    const char *dr = kite_http_query(rq->http, "dryRun");
    if (!dr || strcmp(dr, "All") == 0) return true;
    struct kite_buf q = {0};
    kite_buf_json_str(&q, dr);
    kite_apiserver_reply_error(rq, 422, "Invalid", "%s.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: []string{%s}: "
                "supported values: \"All\"", opts, q.p);
    kite_buf_release(&q);
    return false;
}

/* A POST to an action subresource: its body is an object of the subresource's kind, named
 * as the URL's object (kube-apiserver's binding and eviction REST handlers). */
static void handle_action(struct req *rq, const struct kite_subresource *sr) {
    if (!kite_apiserver_dry_run_query_ok(rq, "CreateOptions")) return;
    json_object *body = kite_apiserver_parse_body(rq, false);
    if (!body) return;
    const char *kind = kite_obj_str(body, "kind"), *av = kite_obj_str(body, "apiVersion");
    size_t gl = strlen(sr->body_group);
    /* any version of the body's group (policy/v1beta1 Evictions too) */
    bool av_ok = !av || !*av || (gl ? strncmp(av, sr->body_group, gl) == 0 && av[gl] == '/' : !strchr(av, '/'));
    if (kind && *kind && strcmp(kind, sr->body_kind) != 0) {
        kite_apiserver_reply_error(rq, 400, "BadRequest", "the kind in the body (%s) does not match the expected kind (%s)", kind, sr->body_kind);
        json_object_put(body);
        return;
    }
    if (!av_ok) {
        kite_apiserver_reply_error(rq, 400, "BadRequest", "the API version in the data (%s) does not match the expected API version (%s%s%s)",
                    av, sr->body_group, gl ? "/" : "", sr->body_version);
        json_object_put(body);
        return;
    }
    if (sr->token) { /* a ServiceAccount's token: issued, not stored (satoken.c) */
        kite_apiserver_satoken_issue(rq, body);
        return;
    }
    const char *name = kite_meta_str(body, "name");
    if (!name || strcmp(name, rq->name) != 0) {
        kite_apiserver_reply_error(rq, 400, "BadRequest", "name in URL does not match name in %s object", sr->body_kind);
        json_object_put(body);
        return;
    }
    struct write_op *op;
    if (sr->deletes) {
        op = kite_apiserver_op_new(rq, OP_DELETE, NULL);
        bool ok = kite_apiserver_delete_options(op, kite_obj_get(body, "deleteOptions"));
        json_object_put(body);
        if (!ok) {
            kite_apiserver_op_free(op);
            return;
        }
    } else {
        op = kite_apiserver_op_new(rq, OP_ACTION, body);
    }
    op->status_reply = 201;
    kite_apiserver_run_op(op);
}

void kite_apiserver_handle_create(struct req *rq) {
    const struct kite_subresource *sr = rq->sub ? kite_resource_subresource(rq->res, rq->sub) : NULL;
    if (kite_subresource_is_action(sr)) {
        handle_action(rq, sr);
        return;
    }
    if (!kite_apiserver_dry_run_query_ok(rq, "CreateOptions")) return;
    json_object *obj = kite_apiserver_parse_body(rq, false);
    if (!obj) return;
    struct write_op *op = kite_apiserver_op_new(rq, OP_CREATE, obj);
    if (!kite_apiserver_managed_manager(op)) {
        kite_apiserver_op_free(op);
        return;
    }
    kite_apiserver_run_op(op);
}

void kite_apiserver_handle_update(struct req *rq) {
    if (!kite_apiserver_dry_run_query_ok(rq, "UpdateOptions")) return;
    bool renewal = renewal_candidate(rq);
    json_object *obj = renewal ? NULL : kite_apiserver_parse_body(rq, false);
    if (!obj && !renewal) return;
    struct write_op *op = kite_apiserver_op_new(rq, OP_UPDATE, obj);
    op->renewal = renewal;
    if (!kite_apiserver_managed_manager(op)) {
        kite_apiserver_op_free(op);
        return;
    }
    kite_apiserver_run_op(op);
}

void kite_apiserver_handle_patch(struct req *rq) {
    const char *ct = kite_http_header(rq->http, "Content-Type");
    enum patch_type t;
    if (kite_apiserver_media_is(ct, "application/merge-patch+json")) t = PATCH_MERGE;
    else if (kite_apiserver_media_is(ct, "application/json-patch+json")) t = PATCH_JSON;
    else if (kite_apiserver_media_is(ct, "application/strategic-merge-patch+json")) t = PATCH_STRATEGIC;
    else if (kite_apiserver_media_is(ct, "application/apply-patch+yaml")) t = PATCH_APPLY;
    else {
        kite_apiserver_reply_error(rq, 415, "UnsupportedMediaType",
                    "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json");
        return;
    }
    /* PatchOptions as upstream's ValidatePatchOptions */
    if (!kite_apiserver_dry_run_query_ok(rq, "PatchOptions")) return;
    const char *fm = kite_http_query(rq->http, "fieldManager"), *force = kite_http_query(rq->http, "force");
    if (t != PATCH_APPLY && force) {
        kite_apiserver_reply_error(rq, 422, "Invalid", "PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for non-apply patch");
        return;
    }
    if (t == PATCH_APPLY && (!fm || !*fm)) {
        kite_apiserver_reply_error(rq, 422, "Invalid", "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch");
        return;
    }
    json_object *patch = t == PATCH_APPLY ? kite_apiserver_parse_apply_body(rq) : kite_apiserver_parse_json_text(rq, rq->http->body, rq->http->body_len);
    if (!patch) return;
    struct write_op *op = kite_apiserver_op_new(rq, OP_PATCH, patch);
    op->ptype = t;
    op->force = kite_apiserver_query_true(force);
    if (!kite_apiserver_managed_manager(op)) {
        kite_apiserver_op_free(op);
        return;
    }
    kite_apiserver_run_op(op);
}

/* apiserver_create_sync's and apiserver_create_submit's body: cb NULL waits for the write. */
static int create_direct(struct kite_apiserver *s, const struct kite_resource *r, json_object *obj, kite_write_cb cb,
                         void *ud) {
    json_object *o = kite_apiserver_deep_copy(obj);
    json_object *meta = kite_obj_ensure(o, "metadata");
    char uid[37];
    kite_uuid4(uid);
    kite_obj_set(meta, "uid", json_object_new_string(uid));
    kite_apiserver_now_time(s, meta, "creationTimestamp");
    if (r->defaults) r->defaults(o);
    _cleanup_free_ char *key = kite_object_key(r, kite_obj_str(meta, "namespace"), kite_obj_str(meta, "name"));
    struct kite_record *cur = kite_wcache_get(kite_apiserver_storage_cache(s, r), key);
    if (cur) {
        kite_record_unref(cur);
        json_object_put(o);
        return -EEXIST;
    }
    size_t len;
    _cleanup_free_ char *bytes = kite_object_encode(o, &len);
    json_object_put(o);
    struct kite_write w = {.type = KITE_WRITE_CREATE, .key = key, .value = bytes, .len = len};
    return cb ? kite_store_submit(s->store, &w, cb, ud) : kite_store_write(s->store, &w, NULL, NULL);
}

int kite_apiserver_create_sync(struct kite_apiserver *s, const struct kite_resource *r, json_object *obj) {
    return create_direct(s, r, obj, NULL, NULL);
}

int kite_apiserver_create_submit(struct kite_apiserver *s, const struct kite_resource *r, json_object *obj, kite_write_cb cb,
                            void *ud) {
    return create_direct(s, r, obj, cb, ud);
}
