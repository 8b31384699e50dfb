/* Overload protection: a bound on the requests in flight, with the nodes' heartbeats served
 * ahead of bulk reads — the part of kube-apiserver's API Priority and Fairness that keeps a
 * cluster alive under load (its `system-nodes` flow schema puts every request of the group
 * system:nodes at the `system` priority level, apart from the workloads').
 *
 * Every request but the long-running ones (watches, and the exec/attach/log streams proxied to
 * an agent) holds seats from the moment it is routed until it is answered (a write: until the
 * store acknowledged it). A list holds one seat per 100 objects of its resource, at most 10
 * (APF's width estimate); anything else one. Three classes:
 * - exempt: system:masters (APF's `exempt` level) — never refused;
 * - system: the group system:nodes (lease renewals, node status, their pods) — refused only when
 *   every seat (--max-requests-inflight) is taken;
 * - workload: everyone else — refused once they hold all but a quarter of the seats, the quarter
 *   kept for the nodes. Their lists run on the list threads (half the CPUs), never on the HTTP
 *   workers, which then stay free for the nodes' requests whatever a flood of lists costs.
 * A refusal is kube-apiserver's: 429 TooManyRequests, "Too many requests, please try again
 * later.", Retry-After: 1 and details.retryAfterSeconds 1; counted in /metrics. */
#include "apiserver/internal.h"

#include <unistd.h>

#define KITE_LIST_OBJECTS_PER_SEAT 100
#define KITE_REQUEST_SEATS_MAX 10
#define KITE_LIST_THREADS_MAX 4

static const char *const CLASS_NAMES[] = {"exempt", "system", "workload"};

struct list_item {
    struct list_item *next;
    struct req *rq;
    void (*fn)(struct req *);
};

struct apiserver_inflight {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    unsigned max, workload_max;       /* seats: all, and what workload requests may hold */
    unsigned used, workload_used;     /* seats held */
    uint64_t rejected[INFLIGHT_CLASSES];
    struct list_item *head, **tail;   /* the list threads' queue */
    bool stopping;
    unsigned n_threads;
    pthread_t threads[KITE_LIST_THREADS_MAX];
};

static void *list_main(void *ud) {
    struct apiserver_inflight *f = ud;
    pthread_mutex_lock(&f->mu);
    for (;;) {
        while (!f->head && !f->stopping) pthread_cond_wait(&f->cond, &f->mu);
        struct list_item *it = f->head;
        if (!it) break;
        f->head = it->next;
        if (!f->head) f->tail = &f->head;
        pthread_mutex_unlock(&f->mu);
        it->fn(it->rq);
        free(it);
        pthread_mutex_lock(&f->mu);
    }
    pthread_mutex_unlock(&f->mu);
    return NULL;
}

int kite_apiserver_inflight_start(struct kite_apiserver *s, unsigned max) {
    struct apiserver_inflight *f = kite_calloc(1, sizeof *f);
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cond, NULL);
    f->tail = &f->head;
    f->max = max ? max : KITE_MAX_REQUESTS_INFLIGHT_DEFAULT;
    f->workload_max = f->max - f->max / 4;
    s->inflight = f;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned threads = KITE_MIN(KITE_MAX(n > 0 ? (unsigned)n / 2 : 1, 1u), (unsigned)KITE_LIST_THREADS_MAX);
    for (unsigned i = 0; i < threads; i++) {
        if (pthread_create(&f->threads[i], NULL, list_main, f) != 0) return i ? 0 : -EAGAIN;
        pthread_setname_np(f->threads[i], "lists");
        f->n_threads++;
    }
    return 0;
}

void kite_apiserver_inflight_stop(struct kite_apiserver *s) {
    struct apiserver_inflight *f = TAKE_PTR(s->inflight);
    if (!f) return;
    pthread_mutex_lock(&f->mu);
    f->stopping = true;
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->mu);
    for (unsigned i = 0; i < f->n_threads; i++) pthread_join(f->threads[i], NULL);
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cond);
    free(f);
}

static bool in_group(const struct kite_user *u, const char *g) {
    for (size_t i = 0; i < u->n_groups; i++)
        if (strcmp(u->groups[i], g) == 0) return true;
    return false;
}

static enum inflight_class class_of(const struct req *rq) {
    if (in_group(&rq->user, "system:masters")) return INFLIGHT_EXEMPT;
    if (in_group(&rq->user, "system:nodes")) return INFLIGHT_SYSTEM;
    return INFLIGHT_WORKLOAD;
}

static unsigned seats_of(const struct req *rq) {
    if (strcmp(rq->verb, "list") != 0 || !kite_resource_stored(rq->res)) return 1;
    size_t n = kite_wcache_count(kite_apiserver_storage_cache(rq->srv, rq->res));
    size_t seats = (n + KITE_LIST_OBJECTS_PER_SEAT - 1) / KITE_LIST_OBJECTS_PER_SEAT;
    return (unsigned)KITE_MIN(KITE_MAX(seats, (size_t)1), (size_t)KITE_REQUEST_SEATS_MAX);
}

static void reply_too_many(struct req *rq) {
    const char *body = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
                       "\"message\":\"Too many requests, please try again later.\",\"reason\":\"TooManyRequests\","
                       "\"details\":{\"retryAfterSeconds\":1},\"code\":429}";
    kite_http_add_header(rq->http, "Retry-After", "1");
    kite_apiserver_reply(rq, 429, "application/json", kite_strdup(body), strlen(body));
}

bool kite_apiserver_inflight_admit(struct req *rq) {
    struct apiserver_inflight *f = rq->srv->inflight;
    if (!f || !rq->verb || strcmp(rq->verb, "watch") == 0) return true;
    enum inflight_class c = class_of(rq);
    rq->inflight_class = c;
    if (c == INFLIGHT_EXEMPT) return true;
    unsigned seats = seats_of(rq);
    pthread_mutex_lock(&f->mu);
    bool ok = f->used + seats <= f->max && (c != INFLIGHT_WORKLOAD || f->workload_used + seats <= f->workload_max);
    /* a request wider than the whole bound still runs when nothing else holds a seat */
    if (!ok && f->used == 0) ok = true;
    if (ok) {
        f->used += seats;
        if (c == INFLIGHT_WORKLOAD) f->workload_used += seats;
        rq->seats = seats;
    } else {
        f->rejected[c]++;
    }
    pthread_mutex_unlock(&f->mu);
    if (!ok) reply_too_many(rq);
    return ok;
}

void kite_apiserver_inflight_release(struct req *rq) {
    struct apiserver_inflight *f = rq->srv->inflight;
    if (!f || !rq->seats) return;
    pthread_mutex_lock(&f->mu);
    f->used -= rq->seats;
    if (rq->inflight_class == INFLIGHT_WORKLOAD) f->workload_used -= rq->seats;
    pthread_mutex_unlock(&f->mu);
    rq->seats = 0;
}

bool kite_apiserver_inflight_offer(struct req *rq, void (*fn)(struct req *)) {
    struct apiserver_inflight *f = rq->srv->inflight;
    if (!f || !f->n_threads || rq->inflight_class != INFLIGHT_WORKLOAD || strcmp(rq->verb, "list") != 0) return false;
    struct list_item *it = kite_calloc(1, sizeof *it);
    it->rq = rq;
    it->fn = fn;
    pthread_mutex_lock(&f->mu);
    if (f->stopping) {
        pthread_mutex_unlock(&f->mu);
        free(it);
        return false;
    }
    *f->tail = it;
    f->tail = &it->next;
    pthread_cond_signal(&f->cond);
    pthread_mutex_unlock(&f->mu);
    return true;
}

void kite_apiserver_inflight_metrics(struct kite_apiserver *s, struct kite_buf *b) {
    struct apiserver_inflight *f = s->inflight;
    if (!f) return;
    pthread_mutex_lock(&f->mu);
    kite_buf_printf(b, "# HELP kite_inflight_seats Seats held by requests in flight (--max-requests-inflight bounds them).\n"
                       "# TYPE kite_inflight_seats gauge\nkite_inflight_seats %u\n"
                       "# HELP kite_inflight_seats_limit Seats of all requests, and of workload requests.\n"
                       "# TYPE kite_inflight_seats_limit gauge\nkite_inflight_seats_limit{class=\"system\"} %u\n"
                       "kite_inflight_seats_limit{class=\"workload\"} %u\n"
                       "# HELP kite_inflight_rejected_total Requests answered 429 TooManyRequests for want of a seat.\n"
                       "# TYPE kite_inflight_rejected_total counter\n",
                    f->used, f->max, f->workload_max);
    for (int c = INFLIGHT_SYSTEM; c < INFLIGHT_CLASSES; c++)
        kite_buf_printf(b, "kite_inflight_rejected_total{class=\"%s\"} %llu\n", CLASS_NAMES[c],
                        (unsigned long long)f->rejected[c]);
    pthread_mutex_unlock(&f->mu);
}
