/* The node status pipeline: an ordered table of setters (Ready last, kubelet issue #16961: Ready
 * must judge the capacity the earlier setters produced) over one context, plus the condition
 * bookkeeping every condition setter shares.
 *
 * Invariant: the output always has Kubernetes' NodeStatus key order (capacity, allocatable,
 * conditions, addresses, daemonEndpoints, nodeInfo, images) so that two computations of the
 * same machine serialize byte-identically; empty omitempty fields are dropped at the end. */
#include "agent/nodestatus/internal.h"

#include <stdio.h>

#include "base/clock.h"

void kite_ns_config_defaults(struct kite_ns_config *cfg) {
    memset(cfg, 0, sizeof(*cfg));
    cfg->max_pods = 110;
    cfg->max_images = 50;
    cfg->daemon_port = 10250;
    /* evictionHard defaults (pkg/kubelet/eviction/defaults_linux.go) */
    cfg->evict_mem_bytes = 100 * 1024 * 1024;
    cfg->evict_mem_pct = -1;
    cfg->evict_nodefs_bytes = -1;
    cfg->evict_nodefs_pct = 10;
    cfg->evict_inodes_count = -1;
    cfg->evict_inodes_pct = 5;
    cfg->evict_pid_count = -1;
    cfg->evict_pid_pct = -1;
}

void kite_ns_events_release(struct kite_ns_events *e) {
    if (!e) return;
    for (size_t i = 0; i < e->n; i++) {
        free(e->v[i].reason);
        free(e->v[i].message);
    }
    free(e->v);
    e->v = NULL;
    e->n = 0;
}

int64_t kite_ns_threshold(int64_t abs, double pct, int64_t total) {
    if (abs >= 0) return abs;
    /* Kubernetes parses "10%" into a float32 fraction and multiplies in float64; doing the
     * same keeps allocatable byte-identical to a kubelet's. */
    if (pct >= 0 && total >= 0) {
        float frac = (float)pct / 100.0f;
        return (int64_t)((double)total * (double)frac);
    }
    return -1;
}

json_object *kite_ns_obj(struct ns_ctx *c, const char *key) {
    json_object *o;
    if (json_object_object_get_ex(c->status, key, &o) && json_object_is_type(o, json_type_object))
        return o;
    o = json_object_new_object();
    json_object_object_add(c->status, key, o);
    return o;
}

static void add_event(struct ns_ctx *c, const char *reason) {
    if (!c->events || !reason) return;
    struct kite_ns_events *e = c->events;
    e->v = kite_realloc(e->v, (e->n + 1) * sizeof(*e->v));
    e->v[e->n++] = (struct kite_ns_event){
        .type = "Normal",
        .reason = kite_strdup(reason),
        .message = kite_asprintf("Node %s status is now: %s",
                                 c->cfg->node_name ? c->cfg->node_name : "", reason),
    };
}

static const char *cond_str(json_object *cond, const char *key) {
    json_object *v;
    if (!cond || !json_object_object_get_ex(cond, key, &v) || !json_object_is_type(v, json_type_string))
        return NULL;
    return json_object_get_string(v);
}

/* Index of the condition of `type` in arr, or -1. */
static int find_condition(json_object *arr, const char *type) {
    if (!arr || !json_object_is_type(arr, json_type_array)) return -1;
    size_t n = json_object_array_length(arr);
    for (size_t i = 0; i < n; i++)
        if (kite_streq(cond_str(json_object_array_get_idx(arr, i), "type"), type)) return (int)i;
    return -1;
}

void kite_ns_set_condition(struct ns_ctx *c, const char *type, const char *status, const char *reason,
                      const char *message, const char *event_true, const char *event_false) {
    json_object *conds;
    json_object_object_get_ex(c->status, "conditions", &conds);
    int idx = find_condition(conds, type);
    json_object *old = idx >= 0 ? json_object_array_get_idx(conds, (size_t)idx) : NULL;
    /* A condition the previous status lacks starts as Unknown, so the first report flips it. */
    const char *old_status = cond_str(old, "status");
    const char *old_ltt = cond_str(old, "lastTransitionTime");
    bool flip = !old || !kite_streq(old_status, status) || !old_ltt;

    json_object *nc = json_object_new_object();
    json_object_object_add(nc, "type", json_object_new_string(type));
    json_object_object_add(nc, "status", json_object_new_string(status));
    json_object_object_add(nc, "lastHeartbeatTime", json_object_new_string(c->now));
    json_object_object_add(nc, "lastTransitionTime",
                           json_object_new_string(flip ? c->now : old_ltt));
    json_object_object_add(nc, "reason", json_object_new_string(reason));
    json_object_object_add(nc, "message", json_object_new_string(message));
    /* Only a change of status is an event; a new reason/message with the same status is not. */
    if (!old || !kite_streq(old_status, status))
        add_event(c, kite_streq(status, "True") ? event_true : event_false);
    if (idx >= 0)
        json_object_array_put_idx(conds, (size_t)idx, nc); /* frees old */
    else
        json_object_array_add(conds, nc);
}

/* Drops a key whose value is an empty object or array (Go's omitempty). */
static void drop_if_empty(json_object *status, const char *key) {
    json_object *v;
    if (!json_object_object_get_ex(status, key, &v)) return;
    if ((json_object_is_type(v, json_type_object) && json_object_object_length(v) == 0) ||
        (json_object_is_type(v, json_type_array) && json_object_array_length(v) == 0))
        json_object_object_del(status, key);
}

static const struct {
    const char *name;
    int (*fn)(struct ns_ctx *c);
} setters[] = {
    {"addresses", kite_ns_set_addresses},
    {"machine", kite_ns_set_machine},
    {"version", kite_ns_set_version},
    {"daemonEndpoints", kite_ns_set_daemon},
    {"images", kite_ns_set_images},
    {"MemoryPressure", kite_ns_set_memory_pressure},
    {"DiskPressure", kite_ns_set_disk_pressure},
    {"PIDPressure", kite_ns_set_pid_pressure},
    {"Ready", kite_ns_set_ready}, /* last: judges what the others produced */
};

int kite_nodestatus_compute(const struct kite_ns_config *cfg, const struct kite_ns_sources *src,
                            json_object *prev_status, json_object **ret_status,
                            struct kite_ns_events *events) {
    if (!cfg || !src || !ret_status) return -EINVAL;
    struct kite_ns_inputs *in = NULL;
    int r = kite_nodestatus_read(cfg, src, &in);
    if (r < 0) return r;
    r = kite_nodestatus_build(cfg, src, in, prev_status, ret_status, events);
    kite_ns_inputs_free(in);
    return r;
}

int kite_nodestatus_build(const struct kite_ns_config *cfg, const struct kite_ns_sources *src,
                          const struct kite_ns_inputs *in, json_object *prev_status, json_object **ret_status,
                          struct kite_ns_events *events) {
    if (!cfg || !src || !in || !ret_status) return -EINVAL;
    struct kite_clock *clock = src->clock ? src->clock : kite_clock_real();
    struct ns_ctx c = {
        .cfg = cfg,
        .src = src,
        .in = in,
        .sysroot = src->sysroot ? src->sysroot : "",
        .prev = prev_status,
        .events = events,
        .now_ns = kite_now_wall(clock),
        .fs_ok = in->fs_ok,
        .fs_total = in->fs_total,
        .facts = in->facts,
    };
    kite_time_format(c.now_ns, c.now);

    c.status = json_object_new_object();
    json_object_object_add(c.status, "capacity", json_object_new_object());
    json_object_object_add(c.status, "allocatable", json_object_new_object());
    /* Conditions the agent does not own (NetworkUnavailable, ...) keep their place, as the
     * kubelet edits the Node in place; ours replace theirs at the same index. */
    json_object *prev_conds = NULL;
    if (prev_status && json_object_object_get_ex(prev_status, "conditions", &prev_conds) &&
        json_object_is_type(prev_conds, json_type_array)) {
        json_object *copy = NULL;
        if (json_object_deep_copy(prev_conds, &copy, NULL) != 0) {
            json_object_put(c.status);
            return -ENOMEM;
        }
        json_object_object_add(c.status, "conditions", copy);
    } else {
        json_object_object_add(c.status, "conditions", json_object_new_array());
    }
    json_object_object_add(c.status, "addresses", json_object_new_array());
    json_object_object_add(c.status, "daemonEndpoints", json_object_new_object());
    json_object *info = json_object_new_object();
    static const char *const info_keys[] = {
        "machineID", "systemUUID", "bootID", "kernelVersion", "osImage", "containerRuntimeVersion",
        "kubeletVersion", "kubeProxyVersion", "operatingSystem", "architecture",
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(info_keys); i++)
        json_object_object_add(info, info_keys[i], json_object_new_string(""));
    json_object_object_add(c.status, "nodeInfo", info);

    /* A setter's failure leaves its part out, as the kubelet logs and goes on; only the
     * context-wide failures above abort. */
    for (size_t i = 0; i < KITE_ARRAY_SIZE(setters); i++) (void)setters[i].fn(&c);

    static const char *const omitempty[] = {"capacity", "allocatable", "conditions", "addresses"};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(omitempty); i++) drop_if_empty(c.status, omitempty[i]);
    *ret_status = c.status;
    return 0;
}
