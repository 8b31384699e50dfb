/* The two heartbeats (k8s-behaviour §1.2-1.4).
 *
 * Status: recompute every nodeStatusUpdateFrequency; PATCH nodes/NAME/status with the
 * two-way strategic merge diff against the last status the server acknowledged, only when
 * something besides lastHeartbeatTime changed or nodeStatusReportFrequency has passed.
 *
 * A sync whose inputs did not change is cut short. With a two-step source (agent.h,
 * kite_agent_status_source: the machine's, and kite sim's) the sync reads the inputs and
 * their digest first; building the status and comparing it with the acknowledged one (most
 * of a sync's cost: a tree with ~50 images, the acknowledged text parsed in part) is skipped
 * when no full report is due and the digest and the acknowledged status (acked_gen) are
 * those of the last sync that found nothing to report (memo_*). That is exact: the status is
 * a function of the inputs, the acknowledged status and the clock, and the clock enters it
 * only through lastHeartbeatTime, which the comparison ignores, and the lastTransitionTime of
 * a condition that flips, which no equal status has; anything else that changes (a reading
 * crossing its threshold, the images, the runtime's state, another writer's change to the
 * Node, a PATCH's answer) changes the digest or acked_gen and the next sync builds again.
 *
 * After an outage (renewals resume) the next sync diffs against the Node the server has, read
 * again, not the last status it acknowledged: the node lifecycle controller may have set the
 * conditions to Unknown meanwhile, and only then is there something to send (the kubelet reads
 * its Node at every sync). A full report from every node instead would be a Node write per node
 * at once, each parsed by every Node informer: after an apiserver restart under 50,000 nodes,
 * 42,000 writes of ~3.5 KB competing with the renewals.
 *
 * Lease: PUT the cached Lease with a new renewTime every 0.25 x leaseDuration; GET only after
 * a 409, POST when it is missing. A 404 on either write means the Node may be gone: kite then
 * registers again (the kubelet does not, kubernetes#71398). */
#include "agent/agent-int.h"
#include "base/log.h"
#include "json/obj.h"
#include "json/scan.h"
#include "base/buf.h"

#include <stdio.h>

#define LEASE_NS "kube-node-lease"

struct why { char s[64]; };
/* "HTTP 403" or the transport error, for one log line. */
static struct why why(long code, int r) {
    struct why w;
    if (code) snprintf(w.s, sizeof(w.s), "HTTP %ld", code);
    else snprintf(w.s, sizeof(w.s), "%s", strerror(-r));
    return w;
}

static json_object *copy(json_object *o) {
    json_object *c = NULL;
    if (o) json_object_deep_copy(o, &c, NULL);
    return c;
}

static int cond_cmp(const void *x, const void *y) {
    json_object *a = *(json_object *const *)x, *b = *(json_object *const *)y;
    const char *ta = json_object_get_string(json_object_object_get(a, "type"));
    const char *tb = json_object_get_string(json_object_object_get(b, "type"));
    return strcmp(ta ? ta : "", tb ? tb : "");
}

/* nodeStatusHasChanged: conditions sorted by type with lastHeartbeatTime zeroed. */
static void normalize(json_object *st) {
    json_object *conds;
    if (!json_object_object_get_ex(st, "conditions", &conds) || !json_object_is_type(conds, json_type_array)) return;
    for (size_t i = 0; i < json_object_array_length(conds); i++)
        json_object_object_del(json_object_array_get_idx(conds, i), "lastHeartbeatTime");
    json_object_array_sort(conds, cond_cmp);
}

bool kite_agent_status_equal(json_object *a, json_object *b) {
    if (!a || !b) return a == b;
    int r = kite_agent_status_cmp(a, b);
    if (r >= 0) return r == 1;
    /* not a pair of objects, or a condition without a string type: copy and normalize */
    json_object *ca = copy(a), *cb = copy(b);
    normalize(ca);
    normalize(cb);
    bool eq = kite_json_equal(ca, cb);
    json_object_put(ca);
    json_object_put(cb);
    return eq;
}

static json_object *find_cond(json_object *conds, const char *type) {
    for (size_t i = 0; i < json_object_array_length(conds); i++) {
        json_object *c = json_object_array_get_idx(conds, i);
        if (kite_streq(json_object_get_string(json_object_object_get(c, "type")), type)) return c;
    }
    return NULL;
}

/* Copies lastHeartbeatTime from old's conditions into new's where nothing else changed. */
static void keep_heartbeats(json_object *st, json_object *old) {
    json_object *conds = json_object_object_get(st, "conditions"), *old_conds = json_object_object_get(old, "conditions");
    if (!json_object_is_type(conds, json_type_array) || !json_object_is_type(old_conds, json_type_array)) return;
    for (size_t i = 0; i < json_object_array_length(conds); i++) {
        json_object *c = json_object_array_get_idx(conds, i);
        json_object *o = find_cond(old_conds, json_object_get_string(json_object_object_get(c, "type")));
        json_object *hb = o ? json_object_object_get(o, "lastHeartbeatTime") : NULL;
        if (!hb) continue;
        json_object *cc = copy(c), *oc = copy(o);
        json_object_object_del(cc, "lastHeartbeatTime");
        json_object_object_del(oc, "lastHeartbeatTime");
        if (kite_json_equal(cc, oc)) json_object_object_add(c, "lastHeartbeatTime", json_object_get(hb));
        json_object_put(cc);
        json_object_put(oc);
    }
}

void kite_agent_node_gone(struct kite_agent *a, const char *why) {
    int64_t now = kite_now_mono(a->clock);
    log_warn(AGENT_LOG, "node %s: %s; %s", a->node_name, why,
             a->cfg->register_node ? "registering it again" : "waiting for it to be created (registerNode=false)");
    a->registered = false;
    a->next_register = now;
    kite_backoff_reset(&a->reg_backoff);
    kite_agent_forget_lease(a);
}

json_object *kite_agent_acked_status(struct kite_agent *a) {
    return a->acked_status ? json_tokener_parse(a->acked_status) : NULL;
}

/* What a status source reads of the acknowledged status (agent.h, kite_agent_status_fn). */
static bool prev_member(const char *k, size_t kn) {
    return (kn == 10 && memcmp(k, "conditions", 10) == 0) || (kn == 11 && memcmp(k, "allocatable", 11) == 0) ||
           (kn == 9 && memcmp(k, "addresses", 9) == 0);
}

/* The acknowledged status cut down to conditions, allocatable and addresses in one pass over
 * its text, parsed alone (a NodeStatus's images and nodeInfo are most of it); whole when the
 * scan cannot tell. NULL = none. */
static json_object *acked_prev(struct kite_agent *a) {
    if (!a->acked_status) return NULL;
    const char *s = a->acked_status, *k, *v;
    size_t n = strlen(s), i = 0, kn, vn;
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
    if (i >= n || s[i++] != '{') return kite_agent_acked_status(a);
    struct kite_buf b = {0};
    kite_buf_putc(&b, '{');
    int r;
    while ((r = kite_json_next(s, n, &i, true, &k, &kn, &v, &vn)) == 1) {
        if (memchr(k, '\\', kn)) break; /* an escaped name could spell one of them */
        if (!prev_member(k, kn)) continue;
        if (b.len > 1) kite_buf_putc(&b, ',');
        kite_buf_append(&b, k - 1, (size_t)(v + vn - (k - 1)));
    }
    kite_buf_putc(&b, '}');
    kite_buf_putc(&b, '\0');
    json_object *p = r == 0 ? json_tokener_parse(b.p) : NULL;
    kite_buf_release(&b);
    return p ? p : kite_agent_acked_status(a);
}

void kite_agent_set_acked_status(struct kite_agent *a, json_object *st) {
    free(a->acked_status);
    a->acked_status =
        st ? kite_strdup(json_object_to_json_string_ext(st, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE))
           : NULL;
    a->acked_ready = kite_agent_status_ready(st);
    a->acked_gen++;
}

void kite_agent_forget_lease(struct kite_agent *a) {
    free(a->lease);
    a->lease = NULL;
}

bool kite_agent_status_ready(json_object *status) {
    json_object *conds;
    if (!status || !json_object_object_get_ex(status, "conditions", &conds)) return false;
    for (size_t i = 0; i < json_object_array_length(conds); i++) {
        json_object *c = json_object_array_get_idx(conds, i);
        if (kite_streq(json_object_get_string(json_object_object_get(c, "type")), "Ready"))
            return kite_streq(json_object_get_string(json_object_object_get(c, "status")), "True");
    }
    return false;
}

static void schedule_status(struct kite_agent *a, int64_t now) {
    if (a->fast_period) {
        /* fastStatusUpdateOnce: report quickly until the server has seen Ready */
        if (a->acked_ready || now - a->started >= KITE_AGENT_READY_GRACE_NS) {
            a->fast_period = 0;
        } else {
            a->next_status = now + a->fast_period;
            a->fast_period = KITE_MIN(a->fast_period * 2, KITE_AGENT_FAST_MAX_NS);
            return;
        }
    }
    a->next_status = now + kite_jitter(a->cfg->status_update_freq_ns, KITE_AGENT_JITTER, &a->rng);
}

int kite_agent_compute_status(struct kite_agent *a, json_object *prev, json_object **ret, struct kite_ns_events *ev) {
    if (!a->status_src) return a->status_fn(a->status_ud, prev, ret, ev);
    void *in = NULL;
    uint64_t digest;
    int r = a->status_src->read(a->status_ud, &in, &digest);
    if (r == 0) r = a->status_src->build(a->status_ud, in, prev, ret, ev);
    a->status_src->release(a->status_ud, in);
    return r;
}

/* GET of our Node (kite_client_json's result, answer and HTTP code). */
static int get_node(struct kite_agent *a, long *code, json_object **ret) {
    _cleanup_free_ char *path = kite_asprintf("/api/v1/nodes/%s", a->node_name);
    return kite_client_json(a->client, "GET", path, NULL, NULL, code, ret);
}

/* Takes the Node's status as the server has it for the acknowledged one (resync_status). A
 * failed read falls back to a full report; false when the Node is gone (agent_node_gone
 * called). */
static bool resync_status(struct kite_agent *a) {
    json_object *node = NULL, *st;
    long code = 0;
    int r = get_node(a, &code, &node);
    a->resync_status = false;
    if (code == 404) {
        json_object_put(node);
        kite_agent_node_gone(a, "status resync: node not found");
        return false;
    }
    if (r == 0 && json_object_object_get_ex(node, "status", &st))
        kite_agent_set_acked_status(a, st);
    else
        a->force_report = true;
    json_object_put(node);
    return true;
}

void kite_agent_sync_status(struct kite_agent *a, int64_t now) {
    json_object *status = NULL;
    struct kite_ns_events ev = {0};
    if (a->resync_status && !resync_status(a)) return;
    bool due = a->force_report || a->last_report == 0 || now - a->last_report >= a->report_freq_ns;
    int r;
    uint64_t digest = 0;
    if (a->status_src) {
        void *in = NULL;
        r = a->status_src->read(a->status_ud, &in, &digest);
        if (r == 0 && !due && a->memo_valid && digest == a->memo_digest && a->acked_gen == a->memo_gen) {
            /* nothing it depends on changed since a sync that found nothing to report */
            a->status_src->release(a->status_ud, in);
            schedule_status(a, now);
            return;
        }
        a->memo_valid = false;
        if (r == 0) {
            json_object *prev = acked_prev(a);
            r = a->status_src->build(a->status_ud, in, prev, &status, &ev);
            json_object_put(prev);
        }
        a->status_src->release(a->status_ud, in);
    } else {
        json_object *prev = acked_prev(a);
        r = a->status_fn(a->status_ud, prev, &status, &ev);
        json_object_put(prev);
    }
    if (r < 0) {
        log_warn(AGENT_LOG, "computing node status: %s", strerror(-r));
        kite_ns_events_release(&ev);
        schedule_status(a, now);
        return;
    }
    kite_agent_post_events(a, &ev);
    kite_ns_events_release(&ev);
    /* compared with the acknowledged text in place; parsed only when the walk cannot tell, or
     * for the patch */
    json_object *acked = NULL;
    int eq = a->acked_status ? kite_agent_status_cmp_text(a->acked_status, strlen(a->acked_status), status) : 0;
    if (eq < 0) {
        acked = kite_agent_acked_status(a);
        eq = kite_agent_status_equal(acked, status);
    }
    bool changed = !eq;
    if (!changed && !due) {
        if (a->status_src) {
            a->memo_valid = true;
            a->memo_digest = digest;
            a->memo_gen = a->acked_gen;
        }
        json_object_put(status);
        json_object_put(acked);
        schedule_status(a, now);
        return;
    }
    if (!acked) acked = kite_agent_acked_status(a);
    /* Between full reports, conditions that did not change keep the heartbeat the server
     * has, so a change patch carries only what changed (the lease is the liveness signal). */
    if (!due) keep_heartbeats(status, acked);
    json_object *from = kite_obj_wrap("status", acked), *to = kite_obj_wrap("status", status), *patch = NULL;
    r = kite_smp_diff(from, to, kite_agent_node_schema(), &patch);
    json_object_put(acked);
    json_object_put(from);
    json_object_put(to);
    json_object_put(status);
    if (r < 0) {
        log_error(AGENT_LOG, "computing node status patch: %s", strerror(-r));
        schedule_status(a, now);
        return;
    }
    _cleanup_free_ char *path = kite_asprintf("/api/v1/nodes/%s/status", a->node_name);
    long code = 0;
    for (int i = 0; i < KITE_AGENT_STATUS_RETRIES; i++) {
        json_object *resp = NULL;
        r = kite_client_json(a->client, "PATCH", path, "application/strategic-merge-patch+json", patch, &code, &resp);
        if (r == 0) {
            json_object *st = json_object_object_get(resp, "status"), *empty = st ? NULL : json_object_new_object();
            kite_agent_set_acked_status(a, st ? st : empty);
            json_object_put(empty);
            json_object_put(resp);
            break;
        }
        json_object_put(resp);
        if (code == 404) {
            json_object_put(patch);
            kite_agent_node_gone(a, "status update: node not found");
            return;
        }
        if (i > 0) kite_client_reset_connections(a->client); /* onRepeatedHeartbeatFailure */
    }
    json_object_put(patch);
    if (r < 0) {
        if (!a->status_failing)
            log_warn(AGENT_LOG, "cannot update node %s status (%s); retrying with backoff", a->node_name,
                     why(code, r).s);
        a->status_failing = true;
        a->next_status = now + kite_backoff_next(&a->status_backoff);
        return;
    }
    a->stats.status_patches++;
    a->last_report = now;
    a->force_report = false;
    kite_backoff_reset(&a->status_backoff);
    if (a->status_failing) {
        log_info(AGENT_LOG, "node %s status updates resumed", a->node_name);
        a->status_failing = false;
        if (a->lease_failing) a->next_lease = now; /* renew at once on reconnect */
    }
    schedule_status(a, now);
}

/* The Lease to write: base (borrowed, may be NULL) with our spec and owner. */
static json_object *build_lease(struct kite_agent *a, json_object *base) {
    json_object *l = base ? copy(base) : json_object_new_object();
    json_object *bmeta = base ? json_object_object_get(l, "metadata") : NULL;
    if (bmeta) {
        /* fields the server keeps anyway: not sending them makes each renewal ~25% smaller
         * (resourceVersion stays: it is the update's precondition) */
        json_object_object_del(bmeta, "uid");
        json_object_object_del(bmeta, "creationTimestamp");
        json_object_object_del(bmeta, "managedFields");
    }
    if (!base) {
        json_object *meta = json_object_new_object();
        json_object_object_add(l, "apiVersion", json_object_new_string("coordination.k8s.io/v1"));
        json_object_object_add(l, "kind", json_object_new_string("Lease"));
        json_object_object_add(meta, "name", json_object_new_string(a->node_name));
        json_object_object_add(meta, "namespace", json_object_new_string(LEASE_NS));
        json_object_object_add(l, "metadata", meta);
    }
    json_object *spec = json_object_object_get(l, "spec");
    if (!spec || !json_object_is_type(spec, json_type_object)) {
        spec = json_object_new_object();
        json_object_object_add(l, "spec", spec);
    }
    char ts[28];
    kite_microtime_format(kite_now_wall(a->clock), ts);
    json_object_object_add(spec, "holderIdentity", json_object_new_string(a->node_name));
    json_object_object_add(spec, "leaseDurationSeconds", json_object_new_int(a->cfg->lease_duration_s));
    json_object_object_add(spec, "renewTime", json_object_new_string(ts));
    json_object *meta = json_object_object_get(l, "metadata");
    if (meta && a->node_uid && *a->node_uid) {
        /* owned by the Node so the garbage collector removes it with the Node */
        json_object *refs = json_object_new_array(), *ref = json_object_new_object();
        json_object_object_add(ref, "apiVersion", json_object_new_string("v1"));
        json_object_object_add(ref, "kind", json_object_new_string("Node"));
        json_object_object_add(ref, "name", json_object_new_string(a->node_name));
        json_object_object_add(ref, "uid", json_object_new_string(a->node_uid));
        json_object_array_add(refs, ref);
        json_object_object_add(meta, "ownerReferences", refs);
    }
    return l;
}

/* After a 404 on the Lease: is our Node still there? false = gone (agent_node_gone called). */
static bool node_still_there(struct kite_agent *a) {
    json_object *node = NULL;
    long code = 0;
    int r = get_node(a, &code, &node);
    const char *uid = NULL;
    json_object *meta;
    if (r == 0 && json_object_object_get_ex(node, "metadata", &meta))
        uid = json_object_get_string(json_object_object_get(meta, "uid"));
    bool same = r == 0 && kite_streq(uid, a->node_uid);
    json_object_put(node);
    if (code == 404) kite_agent_node_gone(a, "lease renewal: node not found");
    else if (r == 0 && !same) kite_agent_node_gone(a, "node was re-created by someone else");
    return code != 404 && !(r == 0 && !same);
}

/* ---- the renewal's text path: a renewal of the Lease the server last returned changes only
 * spec.renewTime, so the PUT body is that text with a new renewTime, and the answer is kept
 * as text with the members build_lease drops cut out: no parse, no copy. Anything this path
 * does not expect goes the tree way (build_lease), which sends the same JSON. ---- */

static bool span_eq(const char *p, size_t n, const char *s) { return n == strlen(s) && memcmp(p, s, n) == 0; }

/* The PUT body renewing lease text s (the stored Lease) at ts, or NULL when build_lease would
 * change more than spec.renewTime (a foreign holder or duration, ownerReferences not ours). */
static char *renewal_text(struct kite_agent *a, const char *s, size_t n, const char *ts, size_t *ret_len) {
    if (strpbrk(a->node_name, "\\\"") || (a->node_uid && strpbrk(a->node_uid, "\\\""))) return NULL;
    const char *spec, *meta, *v, *rt;
    size_t spec_n, meta_n, vn, rt_n;
    if (kite_json_member(s, n, "spec", &spec, &spec_n) != 1 || *spec != '{') return NULL;
    if (kite_json_member(s, n, "metadata", &meta, &meta_n) != 1 || *meta != '{') return NULL;
    _cleanup_free_ char *holder = kite_asprintf("\"%s\"", a->node_name);
    char dur[24];
    snprintf(dur, sizeof dur, "%d", a->cfg->lease_duration_s);
    if (kite_json_member(spec, spec_n, "holderIdentity", &v, &vn) != 1 || !span_eq(v, vn, holder)) return NULL;
    if (kite_json_member(spec, spec_n, "leaseDurationSeconds", &v, &vn) != 1 || !span_eq(v, vn, dur)) return NULL;
    if (kite_json_member(spec, spec_n, "renewTime", &rt, &rt_n) != 1 || *rt != '"') return NULL;
    if (a->node_uid && *a->node_uid) {
        _cleanup_free_ char *refs = kite_asprintf(
            "[{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"name\":\"%s\",\"uid\":\"%s\"}]", a->node_name,
            a->node_uid);
        if (kite_json_member(meta, meta_n, "ownerReferences", &v, &vn) != 1 || !span_eq(v, vn, refs)) return NULL;
    }
    /* members build_lease drops must not be there (the stored text has them cut already) */
    static const char *const dropped[] = {"uid", "creationTimestamp", "managedFields"};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(dropped); i++)
        if (kite_json_member(meta, meta_n, dropped[i], &v, &vn) != 0) return NULL;
    struct kite_buf b = {0};
    kite_buf_append(&b, s, (size_t)(rt - s));
    kite_buf_printf(&b, "\"%s\"", ts);
    kite_buf_append(&b, rt + rt_n, n - (size_t)(rt + rt_n - s));
    return kite_buf_detach(&b, ret_len);
}

/* The Lease answer s[0..n) without metadata's uid, creationTimestamp and managedFields (never
 * sent back), or NULL when the scan cannot tell (the answer is then parsed). */
static char *stored_lease_text(const char *s, size_t n) {
    const char *meta;
    size_t meta_n;
    if (kite_json_member(s, n, "metadata", &meta, &meta_n) != 1 || *meta != '{') return NULL;
    struct kite_buf b = {0};
    kite_buf_append(&b, s, (size_t)(meta - s));
    kite_buf_putc(&b, '{');
    size_t i = 1, kept = 0, kn, vn;
    const char *k, *v;
    int r;
    while ((r = kite_json_next(meta, meta_n, &i, true, &k, &kn, &v, &vn)) == 1) {
        if (memchr(k, '\\', kn)) break; /* an escaped name could spell a dropped one */
        if (span_eq(k, kn, "uid") || span_eq(k, kn, "creationTimestamp") || span_eq(k, kn, "managedFields")) continue;
        if (kept++) kite_buf_putc(&b, ',');
        kite_buf_append(&b, k - 1, (size_t)(v + vn - (k - 1)));
    }
    if (r != 0) {
        kite_buf_release(&b);
        return NULL;
    }
    kite_buf_putc(&b, '}');
    kite_buf_append(&b, meta + meta_n, n - (size_t)(meta + meta_n - s));
    return kite_buf_detach(&b, NULL);
}

/* One renewal the text way: 1 done (a->lease replaced), 0 not possible (use the tree way), or
 * the request's failure (< 0, *code set). */
static int renew_by_text(struct kite_agent *a, const char *item, long *code) {
    if (!a->lease) return 0;
    char ts[28];
    kite_microtime_format(kite_now_wall(a->clock), ts);
    size_t len;
    _cleanup_free_ char *body = renewal_text(a, a->lease, strlen(a->lease), ts, &len);
    if (!body) return 0;
    struct kite_response resp = {0};
    int r = kite_client_request(a->client, "PUT", item, "application/json", body, len, &resp);
    *code = r < 0 ? 0 : resp.status;
    if (r < 0) return r;
    r = kite_http_status_errno(resp.status);
    char *kept = NULL;
    if (r == 0 && resp.len && !(kept = stored_lease_text(resp.body, resp.len))) {
        /* an answer the scan cannot cut: the parser's way */
        json_tokener *tok = json_tokener_new();
        json_object *o = json_tokener_parse_ex(tok, resp.body, (int)KITE_MIN(resp.len, (size_t)INT32_MAX));
        if (o && json_tokener_get_error(tok) != json_tokener_success) {
            json_object_put(o);
            o = NULL;
        }
        json_tokener_free(tok);
        json_object *meta = json_object_object_get(o, "metadata");
        json_object_object_del(meta, "uid");
        json_object_object_del(meta, "creationTimestamp");
        json_object_object_del(meta, "managedFields");
        if (o) kept = kite_strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
        json_object_put(o);
    }
    kite_response_release(&resp);
    if (r < 0) return r;
    if (!kept) return -EBADMSG; /* written, but no Lease came back: renewed again, as before */
    free(a->lease);
    a->lease = kept;
    return 1;
}

enum lease_op { L_PUT, L_GET, L_POST };

void kite_agent_sync_lease(struct kite_agent *a, int64_t now) {
    _cleanup_free_ char *coll = kite_asprintf("/apis/coordination.k8s.io/v1/namespaces/%s/leases", LEASE_NS);
    _cleanup_free_ char *item = kite_asprintf("%s/%s", coll, a->node_name);
    enum lease_op op = a->lease ? L_PUT : L_GET;
    /* by_text: the Lease is a->lease's text and PUTs go the text way; else it is the tree
     * `lease` (parsed when the text way cannot renew it, or fetched) */
    bool by_text = a->lease != NULL;
    json_object *lease = NULL;
    int r = -EIO;
    long code = 0;
    for (int i = 0; i < KITE_AGENT_LEASE_RETRIES; i++) {
        json_object *resp = NULL, *body = NULL;
        bool sent = false;
        if (op == L_PUT && by_text) {
            r = renew_by_text(a, item, &code);
            if (r == 1) {
                r = 0;
                break; /* written */
            }
            sent = r < 0;
            if (!sent) { /* the tree way */
                by_text = false;
                lease = json_tokener_parse(a->lease);
                if (!lease) op = L_GET;
            }
        }
        if (!sent) {
            switch (op) {
            case L_PUT:
                body = build_lease(a, lease);
                r = kite_client_json(a->client, "PUT", item, NULL, body, &code, &resp);
                break;
            case L_GET:
                r = kite_client_json(a->client, "GET", item, NULL, NULL, &code, &resp);
                break;
            case L_POST:
                body = build_lease(a, NULL);
                r = kite_client_json(a->client, "POST", coll, NULL, body, &code, &resp);
                break;
            }
            json_object_put(body);
            if (r == 0 && resp) {
                json_object_put(lease);
                lease = TAKE_PTR(resp);
                json_object *meta = json_object_object_get(lease, "metadata");
                json_object_object_del(meta, "uid"); /* build_lease sends none of them back */
                json_object_object_del(meta, "creationTimestamp");
                json_object_object_del(meta, "managedFields");
                if (op != L_GET) break; /* written */
                op = L_PUT;             /* fetched: now renew it */
                r = -EAGAIN;
                continue;
            }
            json_object_put(resp);
        }
        if (code == 409) {
            op = L_GET; /* someone else wrote it (or it exists): re-read */
        } else if (code == 404) {
            if (op == L_PUT && !node_still_there(a)) {
                json_object_put(lease);
                return;
            }
            op = L_POST;
        } else if (i > 0 && code == 0) {
            kite_client_reset_connections(a->client); /* onRepeatedHeartbeatFailure */
        }
        if (op != L_PUT) {
            by_text = false;
            json_object_put(lease);
            lease = NULL;
        }
    }
    if (!by_text) {
        free(a->lease);
        a->lease = lease ? kite_strdup(json_object_to_json_string_ext(lease, JSON_C_TO_STRING_PLAIN)) : NULL;
    }
    json_object_put(lease);
    int64_t interval = a->cfg->lease_duration_s * KITE_NS_PER_SEC / 4; /* nodeLeaseRenewIntervalFraction */
    if (r < 0) {
        if (!a->lease_failing)
            log_warn(AGENT_LOG, "cannot renew lease of node %s (%s); retrying with backoff", a->node_name,
                     why(code, r).s);
        a->lease_failing = true;
        a->next_lease = now + KITE_MIN(kite_backoff_next(&a->lease_backoff), interval);
        return;
    }
    a->stats.lease_renewals++;
    kite_backoff_reset(&a->lease_backoff);
    if (a->lease_failing) {
        log_info(AGENT_LOG, "node %s lease renewals resumed", a->node_name);
        a->lease_failing = false;
        /* sync at once against the Node the server has (see the top of the file) */
        a->resync_status = true;
        a->next_status = now;
    }
    a->next_lease = now + kite_jitter(interval, KITE_AGENT_JITTER, &a->rng);
}
