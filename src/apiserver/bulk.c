/* Requests with large bodies are decoded, validated and admitted on threads of their own, never
 * on the HTTP workers: a worker serves every request of its connections, so a 3 MiB body of
 * 60,000 YAML keys decoded there (a second of CPU and more under load) would hold up every
 * other client on that worker. The bulk threads take the CPU as any thread does (a lower
 * priority starved them behind a loaded machine's other processes, past clients' timeouts);
 * their queue is bounded (KITE_BULK_QUEUE_MAX, then 429 with Retry-After) on top of the HTTP
 * layer's byte budgets, which already bound what is queued.
 *
 * A request handed over keeps its HTTP request held: its answer goes back to its connection
 * from the bulk thread as the store's writer thread answers writes (http.h). Stop comes after
 * the HTTP server stopped, which waited for every held request: the queue is then empty. */
#include "apiserver/internal.h"

#include <unistd.h>

struct bulk_item {
    struct bulk_item *next;
    struct req *rq;
    void (*fn)(struct req *);
};

struct apiserver_bulk {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    struct bulk_item *head, **tail;
    size_t queued;
    bool stopping;
    unsigned n_threads;
    pthread_t threads[KITE_BULK_THREADS_MAX];
};

static void *bulk_main(void *ud) {
    struct apiserver_bulk *b = ud;
    pthread_mutex_lock(&b->mu);
    for (;;) {
        while (!b->head && !b->stopping) pthread_cond_wait(&b->cond, &b->mu);
        struct bulk_item *it = b->head;
        if (!it) break;
        b->head = it->next;
        if (!b->head) b->tail = &b->head;
        b->queued--;
        pthread_mutex_unlock(&b->mu);
        it->fn(it->rq);
        free(it);
        pthread_mutex_lock(&b->mu);
    }
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

int kite_apiserver_bulk_start(struct kite_apiserver *s, unsigned threads) {
    struct apiserver_bulk *b = kite_calloc(1, sizeof(*b));
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cond, NULL);
    b->tail = &b->head;
    if (!threads) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n > 0 ? (unsigned)n : 1;
    }
    if (threads > KITE_BULK_THREADS_MAX) threads = KITE_BULK_THREADS_MAX;
    s->bulk = b;
    for (unsigned i = 0; i < threads; i++) {
        if (pthread_create(&b->threads[i], NULL, bulk_main, b) != 0) return i ? 0 : -EAGAIN;
        pthread_setname_np(b->threads[i], "bulk");
        b->n_threads++;
    }
    return 0;
}

bool kite_apiserver_bulk_offer(struct req *rq, void (*fn)(struct req *)) {
    struct apiserver_bulk *b = rq->srv->bulk;
    if (!b || !b->n_threads) return false;
    pthread_mutex_lock(&b->mu);
    if (b->stopping || b->queued >= KITE_BULK_QUEUE_MAX) {
        pthread_mutex_unlock(&b->mu);
        kite_http_add_header(rq->http, "Retry-After", "1");
        kite_apiserver_reply_error(rq, 429, "TooManyRequests", "too many large request bodies waiting to be decoded, please try again later");
        return true;
    }
    struct bulk_item *it = kite_calloc(1, sizeof(*it));
    it->rq = rq;
    it->fn = fn;
    *b->tail = it;
    b->tail = &it->next;
    b->queued++;
    pthread_cond_signal(&b->cond);
    pthread_mutex_unlock(&b->mu);
    return true;
}

void kite_apiserver_bulk_stop(struct kite_apiserver *s) {
    struct apiserver_bulk *b = s->bulk;
    if (!b) return;
    pthread_mutex_lock(&b->mu);
    b->stopping = true;
    pthread_cond_broadcast(&b->cond);
    pthread_mutex_unlock(&b->mu);
    for (unsigned i = 0; i < b->n_threads; i++) pthread_join(b->threads[i], NULL);
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->cond);
    free(b);
    s->bulk = NULL;
}
