/* Transport-independent parts of the client: error mapping, cancellation tokens, watch
 * line splitting, JSON helpers, and the fake transport used by tests. */
#include "client/client.h"
#include "base/clock.h"

void kite_response_release(struct kite_response *r) {
    free(r->body);
    r->body = NULL;
    r->len = 0;
}

void kite_client_free(struct kite_client *c) {
    if (c) c->ops->free(c);
}

int kite_http_status_errno(long s) {
    static const struct { long code; int err; } table[] = {
        {400, -EINVAL}, {401, -EACCES}, {403, -EPERM},     {404, -ENOENT},    {408, -ETIMEDOUT},
        {409, -EEXIST}, {410, -ESTALE}, {413, -EFBIG},     {422, -EINVAL},    {429, -EAGAIN},
        {503, -EAGAIN}, {504, -ETIMEDOUT},
    };
    if (s >= 200 && s < 300) return 0;
    for (size_t i = 0; i < KITE_ARRAY_SIZE(table); i++)
        if (table[i].code == s) return table[i].err;
    return s >= 500 ? -EIO : -EPROTO;
}

void kite_cancel_init(struct kite_cancel *c) {
    pthread_mutex_init(&c->lock, NULL);
    c->fired = false;
    c->wake = NULL;
    c->wake_ud = NULL;
}
void kite_cancel_release(struct kite_cancel *c) { pthread_mutex_destroy(&c->lock); }

void kite_cancel_fire(struct kite_cancel *c) {
    pthread_mutex_lock(&c->lock);
    c->fired = true;
    /* called under the lock so the transport cannot free what wake_ud points to meanwhile */
    if (c->wake) c->wake(c->wake_ud);
    pthread_mutex_unlock(&c->lock);
}

bool kite_cancel_fired(struct kite_cancel *c) {
    pthread_mutex_lock(&c->lock);
    bool f = c->fired;
    pthread_mutex_unlock(&c->lock);
    return f;
}

bool kite_cancel_set_wake(struct kite_cancel *c, void (*wake)(void *), void *ud) {
    pthread_mutex_lock(&c->lock);
    bool ok = !(wake && c->fired);
    if (ok) {
        c->wake = wake;
        c->wake_ud = ud;
    }
    pthread_mutex_unlock(&c->lock);
    return ok;
}

void kite_lines_init(struct kite_lines *l, size_t max) {
    l->buf = (struct kite_buf){0};
    l->max = max;
}
void kite_lines_release(struct kite_lines *l) { kite_buf_release(&l->buf); }

int kite_lines_feed(struct kite_lines *l, const char *data, size_t n, int (*fn)(char *, size_t, void *), void *ud) {
    while (n > 0) {
        const char *nl = memchr(data, '\n', n);
        size_t take = nl ? (size_t)(nl - data) : n;
        if (l->buf.len + take > l->max) return -EMSGSIZE;
        if (!nl) {
            kite_buf_append(&l->buf, data, take);
            return 0;
        }
        int r = 0;
        kite_buf_append(&l->buf, data, take); /* also NUL-terminates the line */
        size_t len = l->buf.len;
        while (len > 0 && l->buf.p[len - 1] == '\r') l->buf.p[--len] = 0;
        if (len > 0) r = fn(l->buf.p, len, ud);
        kite_buf_reset(&l->buf);
        if (r < 0) return r;
        data += take + 1;
        n -= take + 1;
    }
    return 0;
}

void kite_client_set_write_gate(struct kite_client *c, bool (*may_write)(void *ud), void *ud) {
    c->may_write = may_write;
    c->may_write_ud = ud;
}

struct lines_adapter {
    kite_watch_line_fn fn;
    void *ud;
};

static int event_as_line(json_object *ev, void *ud) {
    struct lines_adapter *a = ud;
    size_t n = 0;
    const char *t = json_object_to_json_string_length(ev, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &n);
    return a->fn(t, n, a->ud);
}

int kite_client_watch_lines(struct kite_client *c, const char *path, kite_watch_line_fn fn, void *ud,
                            struct kite_cancel *cancel) {
    if (c->ops->watch_lines) return c->ops->watch_lines(c, path, fn, ud, cancel);
    struct lines_adapter a = {fn, ud};
    return c->ops->watch(c, path, event_as_line, &a, cancel);
}

int kite_client_json(struct kite_client *c, const char *method, const char *path, const char *content_type,
                     json_object *body, long *ret_status, json_object **ret_obj) {
    const char *s = NULL;
    size_t len = 0;
    if (body) {
        s = json_object_to_json_string_length(body, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
        if (!content_type) content_type = "application/json";
    }
    struct kite_response resp = {0};
    int r = kite_client_request(c, method, path, content_type, s, len, &resp);
    if (ret_status) *ret_status = r < 0 ? 0 : resp.status;
    if (r < 0) return r;
    if (ret_obj) {
        json_tokener *tok = json_tokener_new();
        json_object *o = resp.len ? json_tokener_parse_ex(tok, resp.body, (int)KITE_MIN(resp.len, (size_t)INT32_MAX)) : NULL;
        if (o && json_tokener_get_error(tok) != json_tokener_success) {
            json_object_put(o);
            o = NULL;
        }
        json_tokener_free(tok);
        *ret_obj = o;
    }
    r = kite_http_status_errno(resp.status);
    kite_response_release(&resp);
    return r;
}

/* ---- fake transport ---- */

struct fake_client {
    struct kite_client base;
    kite_fake_handler handler;
    kite_fake_watch_handler watch_handler;
    void *ud;
    _Atomic unsigned resets;
};

static int fake_request(struct kite_client *c, const char *method, const char *path, const char *ctype,
                        const char *body, size_t len, struct kite_response *ret) {
    struct fake_client *f = (struct fake_client *)c;
    atomic_fetch_add(&c->requests, 1);
    atomic_fetch_add(&c->bytes_sent, strlen(method) + strlen(path) + len);
    struct kite_response r = {0};
    int e = f->handler(f->ud, method, path, ctype, body, len, &r);
    if (e < 0) {
        kite_response_release(&r);
        return e;
    }
    if (!r.body) r.body = kite_strdup("");
    if (!r.len) r.len = strlen(r.body);
    *ret = r;
    return 0;
}

static int fake_watch(struct kite_client *c, const char *path, kite_watch_fn fn, void *ud, struct kite_cancel *cancel) {
    struct fake_client *f = (struct fake_client *)c;
    if (!f->watch_handler) return -EOPNOTSUPP;
    return f->watch_handler(f->ud, path, fn, ud, cancel);
}

static void fake_reset(struct kite_client *c) { atomic_fetch_add(&((struct fake_client *)c)->resets, 1); }
static void fake_free(struct kite_client *c) { free(c); }

static const struct kite_client_ops fake_ops = {fake_request, fake_watch, fake_reset, fake_free, NULL};

struct kite_client *kite_client_fake_new(kite_fake_handler handler, kite_fake_watch_handler watch_handler, void *ud) {
    struct fake_client *f = kite_calloc(1, sizeof(*f));
    f->base.ops = &fake_ops;
    f->handler = handler;
    f->watch_handler = watch_handler;
    f->ud = ud;
    return &f->base;
}

unsigned kite_client_fake_resets(struct kite_client *c) {
    return c->ops == &fake_ops ? atomic_load(&((struct fake_client *)c)->resets) : 0;
}

struct cancel_waiter {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    bool woken;
};

/* Called by kite_cancel_fire under the token's lock: the lock order is token, then mu. */
static void waiter_wake(void *ud) {
    struct cancel_waiter *w = ud;
    pthread_mutex_lock(&w->mu);
    w->woken = true;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->mu);
}

void kite_cancel_wait(struct kite_cancel *c, int64_t ns) {
    struct cancel_waiter w = {.woken = false};
    pthread_mutex_init(&w.mu, NULL);
    kite_cond_init_mono(&w.cond);
    struct timespec ts;
    kite_cond_deadline(&ts, ns);
    if (kite_cancel_set_wake(c, waiter_wake, &w)) {
        pthread_mutex_lock(&w.mu);
        while (!w.woken && pthread_cond_timedwait(&w.cond, &w.mu, &ts) == 0) {}
        pthread_mutex_unlock(&w.mu);
        kite_cancel_set_wake(c, NULL, NULL);
    }
    pthread_mutex_destroy(&w.mu);
    pthread_cond_destroy(&w.cond);
}
