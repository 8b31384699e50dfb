/* The write engine's internals, shared by write.c (create, update, patch: the engine) and
 * delete.c (delete, deletecollection). */
#pragma once
#include "apiserver/internal.h"
#include "apiserver/keyq.h"

enum op_kind { OP_CREATE, OP_UPDATE, OP_PATCH, OP_DELETE, OP_ACTION /* POST to an action subresource */ };
enum patch_type { PATCH_MERGE, PATCH_JSON, PATCH_STRATEGIC, PATCH_APPLY /* server-side apply */ };

struct write_op {
    struct req *rq;           /* freed by the reply, which may come before op_free */
    struct kite_apiserver *srv;
    enum op_kind kind;
    enum patch_type ptype;
    json_object *input;       /* body object (create/update) or the patch document */
    const struct kite_subresource *sub; /* the subresource written (status, finalize), or NULL */
    bool client_rv;           /* the client made resourceVersion a precondition */
    bool dry_run;
    int attempts;
    int code;                 /* reply code on success */
    int64_t submitted_ns;
    char *key;
    char uid[64];             /* DELETE: uid of the deleted object, for the Status details */
    json_object *preconditions; /* DELETE: DeleteOptions.preconditions */
    bool has_grace;           /* DELETE: DeleteOptions.gracePeriodSeconds given (grace, >= 0) */
    int64_t grace;
    const char *propagation;  /* DELETE: the finalizer DeleteOptions.propagationPolicy asks for
                                 ("foregroundDeletion", "orphan"), or NULL (Background) */
    int status_reply;         /* answer a success with a Status Success of this code (actions) */
    bool guarded;             /* a guarded delete (an eviction) whose guard was written back */
    int guard_err;            /* the guard's failed write, answered on an HTTP thread */
    char *guard_name;         /* the guard object written (for the conflict message) */
    struct kite_pools_op *pools; /* values this write reserved (a Service's cluster IP), released at its end */
    struct apiserver_work work; /* on the retry thread's queue: runs run_op again */
    struct keyq_link qlink;   /* waiting for the key's holder (keyq) */
    bool holds_key;           /* holds key in the server's keyq: released when the op ends */
    char *manager;            /* the field manager (managed.c) */
    bool force;               /* apply: take the fields other managers have */
    json_object *managed;     /* apply: the managedFields it computed (NULL: none left) */
    json_object *client_mf;   /* the managedFields the request's object carried (a main write), or NULL */
    bool has_managed;
    bool renewal;             /* an update that may be a Lease renewal spliced (renewal.c): its body not parsed yet */
    /* the store's completion, answered on an HTTP thread (write_finish) */
    int done_err;
    struct kite_record *done_rec;
};

/* The one end of every op (replied or not): a key it still holds is released here. */
void kite_apiserver_op_free(struct write_op *op);
/* Replies code/reason/msg and frees op. */
void kite_apiserver_op_fail(struct write_op *op, int code, const char *reason, const char *msg);
struct write_op *kite_apiserver_op_new(struct req *rq, enum op_kind kind, json_object *input);
/* Runs op again on the retry thread (it keeps the key it holds). Any thread. */
void kite_apiserver_op_retry(struct write_op *op);
/* (Re)computes op against the current record and submits it (write.c). */
void kite_apiserver_run_op(struct write_op *op);
/* Submits (or, for dryRun, pretends to). Takes ownership of obj. The reply may come from the
 * writer thread before this returns: callers must not touch op afterwards. */
void kite_apiserver_submit(struct write_op *op, enum kite_write_type type, json_object *obj, int64_t expect, struct kite_record *cur);
/* Sets meta[field] to the server's now (RFC 3339, seconds). */
void kite_apiserver_now_time(struct kite_apiserver *s, json_object *meta, const char *field);
json_object *kite_apiserver_deep_copy(json_object *o);
/* Runs the admission chain for op; replies and returns false when a plugin refuses. */
bool kite_apiserver_admit(struct write_op *op, enum kite_admission_op aop, json_object *obj, json_object *old);

/* Answers a completed write: the record, or the Status Success an action answers. */
void kite_apiserver_reply_done(struct write_op *op, struct kite_record *rec);

/* managed.c */
/* Sets op->manager from fieldManager or the User-Agent; false after replying 422 to an
 * invalid fieldManager. */
bool kite_apiserver_managed_manager(struct write_op *op);
/* Server-side apply of op->input to live (the current object as the request's version sees
 * it; NULL: apply-create) whose stored form is cur (for its managedFields; NULL on create):
 * the merged object (new), with op->managed set; NULL after replying 409 on conflicts. */
json_object *kite_apiserver_managed_apply(struct write_op *op, json_object *live, json_object *cur);
/* Sets res's metadata.managedFields for the write of op from cur (NULL: a create): what an
 * apply computed, or the Update of op's manager. cur_private: cur is the op's own parse, which
 * it may give its entries to (cur is not read afterwards). */
void kite_apiserver_managed_finish(struct write_op *op, json_object *cur, bool cur_private, json_object *res);

/* The dryRun query parameter as kube-apiserver validates it in opts ("CreateOptions", ...):
 * absent or "All"; anything else is answered 422 (false). */
bool kite_apiserver_dry_run_query_ok(struct req *rq, const char *opts);

/* delete.c */
/* Takes DeleteOptions' gracePeriodSeconds, preconditions, propagation and dryRun (borrowed
 * opts) into op; false after replying 400/422 to a malformed value. A body's dryRun makes op a
 * dry run whatever the query says. */
bool kite_apiserver_delete_options(struct write_op *op, json_object *opts);
/* The delete of op against the current record cur (cobj: its parse, borrowed). */
void kite_apiserver_run_delete(struct write_op *op, struct kite_record *cur, json_object *cobj);
/* The answer to a completed delete: the object, or a Status (per the kind's row). */
void kite_apiserver_reply_deleted(struct write_op *op, struct kite_record *rec);
/* True while finalizers (metadata's, or the kind's own) keep an object that is being deleted. */
bool kite_apiserver_finalizers_pending(const struct kite_resource *r, json_object *obj);
