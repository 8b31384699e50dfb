/* Stale Node cleanup (nodecleanup.h). Nodes are few and the check is a comparison, so a step
 * looks at every tracked node. */
#include "controllers/node/nodecleanup.h"
#include "framework/framework.h"
#include "api/registry.h"
#include "api/table.h"
#include "base/log.h"
#include "base/map.h"
#include "framework/ctlutil.h"

#include <pthread.h>
#include <stdio.h>

#define LOG "node-cleanup"
#define COMPONENT "node-cleanup-controller"

struct cnode {
    char uid[40];
    int64_t unknown_since; /* wall; 0: Ready is not Unknown */
    int64_t not_before;    /* wall: a failed or sent delete waits until then */
};

struct kite_ncc {
    struct kite_ncc_options o;
    pthread_mutex_t lock;
    struct kite_map nodes; /* name -> struct cnode */
    bool changed;          /* a deadline changed since the last step */
};

struct kite_ncc *kite_ncc_new(const struct kite_ncc_options *o) {
    struct kite_ncc *c = kite_calloc(1, sizeof *c);
    c->o = *o;
    if (!c->o.clock) c->o.clock = kite_clock_real();
    pthread_mutex_init(&c->lock, NULL);
    return c;
}

void kite_ncc_free(struct kite_ncc *c) {
    if (!c) return;
    const char *k;
    void *v;
    for (size_t i = 0; kite_map_next(&c->nodes, &i, &k, &v);) free(v);
    kite_map_release(&c->nodes);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

void kite_ncc_node_upsert(struct kite_ncc *c, json_object *node) {
    const char *name = kite_meta_str(node, "name"), *uid = kite_meta_str(node, "uid");
    if (!name) return;
    json_object *ready = kite_ctl_condition(node, "Ready");
    int64_t since = 0;
    if (ready && kite_streq(kite_obj_str(ready, "status"), "Unknown")) {
        const char *t = kite_obj_str(ready, "lastTransitionTime");
        if (!t || kite_time_parse(t, &since) < 0) since = kite_now_wall(c->o.clock);
    }
    pthread_mutex_lock(&c->lock);
    struct cnode *n = kite_map_get(&c->nodes, name);
    if (!n) kite_map_put(&c->nodes, name, n = kite_calloc(1, sizeof *n));
    if (strcmp(n->uid, uid ? uid : "") != 0) n->not_before = 0; /* a new object: judged afresh */
    snprintf(n->uid, sizeof n->uid, "%s", uid ? uid : "");
    if (n->unknown_since != since) c->changed = true; /* its deadline moved: the runner recomputes its wait */
    n->unknown_since = since;
    pthread_mutex_unlock(&c->lock);
}

void kite_ncc_node_delete(struct kite_ncc *c, json_object *node) {
    const char *name = kite_meta_str(node, "name");
    if (!name) return;
    pthread_mutex_lock(&c->lock);
    free(kite_map_del(&c->nodes, name));
    pthread_mutex_unlock(&c->lock);
}

static bool due(const struct kite_ncc *c, const struct cnode *n, int64_t now) {
    return n->unknown_since && now >= n->unknown_since + c->o.after_ns && now >= n->not_before;
}

bool kite_ncc_pending(struct kite_ncc *c) {
    pthread_mutex_lock(&c->lock);
    int64_t now = kite_now_wall(c->o.clock);
    bool any = c->changed;
    const char *k;
    void *v;
    for (size_t i = 0; !any && kite_map_next(&c->nodes, &i, &k, &v);) any = due(c, v, now);
    pthread_mutex_unlock(&c->lock);
    return any;
}

static void deleted(void *ud, const struct kite_ctl_act *act, int e, json_object *answer) {
    if (e == 0 || e == -ENOENT || e == -EEXIST) { /* gone, or re-registered (uid precondition: 409) */
        if (e == 0) log_info(LOG, "node %s deleted: Unknown for longer than --node-cleanup-after", act->key);
        return;
    }
    log_warn(LOG, "node %s: cannot delete it: %s (will retry)", act->key, strerror(-e));
}

int64_t kite_ncc_step(struct kite_ncc *c) {
    struct kite_ctl_acts acts = {0};
    pthread_mutex_lock(&c->lock);
    int64_t now = kite_now_wall(c->o.clock), next = KITE_NCC_IDLE_NS;
    c->changed = false;
    char after[32];
    kite_human_duration(c->o.after_ns / KITE_NS_PER_SEC, after);
    const char *k;
    void *v;
    for (size_t i = 0; kite_map_next(&c->nodes, &i, &k, &v);) {
        struct cnode *n = v;
        if (!n->unknown_since) continue;
        if (due(c, n, now)) {
            _cleanup_free_ char *msg = kite_asprintf("Deleting node %s because it has been Unknown for longer than %s "
                                                     "(--node-cleanup-after)", k, after);
            kite_ctl_event(&acts, c->o.clock, COMPONENT, "Node", "default", k, n->uid, "Normal", "DeletingNode", msg);
            json_object *body = json_object_new_object(), *pre = json_object_new_object();
            kite_obj_set(pre, "uid", json_object_new_string(n->uid));
            kite_obj_set(body, "preconditions", pre);
            _cleanup_free_ char *path = kite_asprintf("/api/v1/nodes/%s", k);
            kite_ctl_acts_add(&acts, 1, k, "DELETE", path, "application/json", body);
            n->not_before = now + KITE_NCC_RETRY_NS; /* the informer's delete ends it; else try again */
        }
        int64_t at = KITE_MAX(n->unknown_since + c->o.after_ns, n->not_before);
        next = KITE_MIN(next, KITE_MAX(at - now, 0));
    }
    pthread_mutex_unlock(&c->lock);
    kite_ctl_acts_run(c->o.client, &acts, deleted, c);
    kite_ctl_acts_release(&acts);
    return next;
}

/* ---- on the framework: nodes feed it ---- */
KITE_CTL_FEED(kite_ncc_node_upsert, struct kite_ncc)
KITE_CTL_FEED(kite_ncc_node_delete, struct kite_ncc)
KITE_CTL_CORE(kite_ncc, struct kite_ncc)

int kite_ncc_run(struct kite_ctl_group *g, const struct kite_ncc_options *o) {
    struct kite_ncc_options no = *o;
    no.client = kite_ctl_group_client(g), no.clock = kite_ctl_group_clock(g);
    static const struct kite_ctl_feed feeds[] = {
        {.path = "/api/v1/nodes", .project = kite_ctl_node_members, .upsert = kite_ncc_node_upsert_feed, .del = kite_ncc_node_delete_feed},
    };
    struct kite_ctl_spec spec = {.name = "node-cleanup", .step = kite_ncc_step_core, .pending = kite_ncc_pending_core,
                                 .free = kite_ncc_free_core, .feeds = feeds, .n_feeds = KITE_ARRAY_SIZE(feeds)};
    return kite_ctl_run(g, &spec, kite_ncc_new(&no));
}
