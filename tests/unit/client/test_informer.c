/* The list + watch informer against the fake transport: the list's objects arrive as adds,
 * watch events as updates and deletes, and a 410 in the watch makes it list again and deliver
 * only the difference (a delete for what vanished in the gap, an add for what appeared). */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>

#include "api/registry.h"
#include "base/clock.h"
#include "client/factory.h"
#include "client/informer.h"

struct fake {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    int lists, watches;
    char seen[1024]; /* "add:a update:a del:b ..." in delivery order */
    int synced;
    char paths[4][256];
    bool refuse; /* refusing_watch_h: answer the first watch 400 */
};

#define OBJ(name, rv) "{\"metadata\":{\"name\":\"" name "\",\"namespace\":\"ns\",\"resourceVersion\":\"" rv "\"}}"

static void fake_init(struct fake *f) {
    *f = (struct fake){.seen = ""};
    pthread_mutex_init(&f->mu, NULL);
    kite_cond_init_mono(&f->cond);
}
static void fake_release(struct fake *f) {
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cond);
}

/* Counts a list: how many so far, this one included. */
static int fake_listed(struct fake *f) {
    pthread_mutex_lock(&f->mu);
    int n = ++f->lists;
    pthread_mutex_unlock(&f->mu);
    return n;
}
/* Counts a watch and keeps its path (the first four): how many came before it. */
static int fake_watched(struct fake *f, const char *path) {
    pthread_mutex_lock(&f->mu);
    int n = f->watches++;
    if (n < 4) snprintf(f->paths[n], sizeof f->paths[n], "%s", path);
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->mu);
    return n;
}
/* Waits (10 s at most) for the handlers to have seen want and for that many watches begun. */
static void fake_wait_seen(struct fake *f, const char *want, int watches) {
    struct timespec ts;
    kite_cond_deadline(&ts, 10 * KITE_NS_PER_SEC);
    pthread_mutex_lock(&f->mu);
    while ((strcmp(f->seen, want) != 0 || f->watches < watches) && pthread_cond_timedwait(&f->cond, &f->mu, &ts) == 0) {}
    pthread_mutex_unlock(&f->mu);
}

static int list_h(void *ud, const char *method, const char *path, const char *ct, const char *body, size_t len,
                  struct kite_response *ret) {
    int n = fake_listed(ud);
    ret->status = 200;
    ret->body = kite_strdup(n == 1 ? "{\"metadata\":{\"resourceVersion\":\"10\"},\"items\":[" OBJ("a", "1") "," OBJ("b", "2") "]}"
                                   : "{\"metadata\":{\"resourceVersion\":\"20\"},\"items\":[" OBJ("a", "11") "," OBJ("c", "12") "]}");
    return 0;
}

static int send(kite_watch_fn fn, void *ud, const char *ev) {
    json_object *o = json_tokener_parse(ev);
    int r = fn(o, ud);
    json_object_put(o);
    return r;
}

static int watch_h(void *ud, const char *path, kite_watch_fn fn, void *fn_ud, struct kite_cancel *cancel) {
    int n = fake_watched(ud, path);
    if (n == 0) {
        int r = send(fn, fn_ud, "{\"type\":\"MODIFIED\",\"object\":" OBJ("a", "11") "}");
        if (r == 0) r = send(fn, fn_ud, "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"15\"}}}");
        if (r == 0) r = 0; /* the server ends the stream: resumed from 15 */
        return r;
    }
    if (n == 1)
        return send(fn, fn_ud, "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410,\"reason\":\"Expired\"}}");
    if (n == 2) {
        int r = send(fn, fn_ud, "{\"type\":\"DELETED\",\"object\":" OBJ("c", "21") "}");
        if (r < 0) return r;
    }
    kite_cancel_wait(cancel, 30 * KITE_NS_PER_SEC); /* a quiet watch until stopped */
    return -ECANCELED;
}

static void note(struct fake *f, const char *what, json_object *o) {
    pthread_mutex_lock(&f->mu);
    size_t l = strlen(f->seen);
    snprintf(f->seen + l, sizeof f->seen - l, "%s%s:%s@%s", l ? " " : "", what, kite_meta_str(o, "name"),
             kite_meta_str(o, "resourceVersion"));
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->mu);
}
static void on_add(void *ud, json_object *o) { note(ud, "add", o); }
static void on_update(void *ud, json_object *old, json_object *o) { note(ud, "update", o); }
static void on_del(void *ud, json_object *o) { note(ud, "del", o); }
static void on_synced(void *ud) {
    struct fake *f = ud;
    pthread_mutex_lock(&f->mu);
    f->synced++;
    pthread_mutex_unlock(&f->mu);
}

Test(informer, list_watch_and_relist_after_410) {
    struct fake f;
    fake_init(&f);
    struct kite_client *c = kite_client_fake_new(list_h, watch_h, &f);
    struct kite_informer_options o = {.client = c, .path = "/api/v1/pods", .name = "test", .n_handlers = 1};
    o.handlers[0] = (struct kite_informer_handlers){on_add, on_update, on_del, on_synced, &f};
    struct kite_informer *inf;
    cr_assert_eq(kite_informer_start(&o, &inf), 0);
    const char *want = "add:a@1 add:b@2 update:a@11 add:c@12 del:b@2 del:c@21";
    fake_wait_seen(&f, want, 0);
    cr_assert(kite_informer_synced(inf));
    kite_informer_stop(inf);
    cr_assert_str_eq(f.seen, want);
    cr_assert_eq(f.lists, 2, "listed again after the 410 only");
    cr_assert_eq(f.synced, 2);
    cr_assert(strstr(f.paths[0], "watch=true") && strstr(f.paths[0], "resourceVersion=10&"), "%s", f.paths[0]);
    cr_assert(strstr(f.paths[1], "resourceVersion=15&"), "resumed from the bookmark: %s", f.paths[1]);
    cr_assert(strstr(f.paths[2], "resourceVersion=20&"), "from the new list: %s", f.paths[2]);
    kite_client_free(c);
    fake_release(&f);
}

/* A transform: the same object with its resourceVersion marked (a copy; the watch's object is
 * left as it was). */
static json_object *mark_rv(json_object *o) {
    json_object *c = NULL;
    cr_assert_eq(json_object_deep_copy(o, &c, NULL), 0);
    json_object *meta = kite_obj_get(c, "metadata");
    _cleanup_free_ char *m = kite_asprintf("T%s", kite_obj_str(meta, "resourceVersion"));
    json_object_object_add(meta, "resourceVersion", json_object_new_string(m));
    return c;
}

/* What the handlers and the cache get is the transform's form, from the list and from the watch;
 * the informer still resumes from the server's revisions. */
Test(informer, a_transform_is_what_the_handlers_and_the_cache_get) {
    struct fake f;
    fake_init(&f);
    struct kite_client *c = kite_client_fake_new(list_h, watch_h, &f);
    struct kite_informer_options o = {.client = c, .path = "/api/v1/pods", .name = "test", .n_handlers = 1,
                                      .transform = mark_rv};
    o.handlers[0] = (struct kite_informer_handlers){on_add, on_update, on_del, on_synced, &f};
    struct kite_informer *inf;
    cr_assert_eq(kite_informer_start(&o, &inf), 0);
    const char *want = "add:a@T1 add:b@T2 update:a@T11 add:c@T12 del:b@T2 del:c@T21";
    fake_wait_seen(&f, want, 0);
    cr_assert_str_eq(f.seen, want);
    json_object *a = kite_informer_get(inf, "ns/a");
    cr_assert_str_eq(kite_meta_str(a, "resourceVersion"), "T11");
    json_object_put(a);
    kite_informer_stop(inf);
    cr_assert(strstr(f.paths[1], "resourceVersion=15&"), "resumed from the bookmark: %s", f.paths[1]);
    cr_assert(strstr(f.paths[2], "resourceVersion=20&"), "from the new list: %s", f.paths[2]);
    kite_client_free(c);
    fake_release(&f);
}

/* The factory: two handler sets asking for the same collection share one informer (one list,
 * one watch) and both see every change; another selector is another informer. The cache is
 * readable from any thread, as a copy. */
Test(informer, factory_shares_one_list_and_watch_per_collection) {
    struct fake f, g;
    fake_init(&f);
    fake_init(&g);
    struct kite_client *c = kite_client_fake_new(list_h, watch_h, &f);
    struct kite_informer_factory *fac = kite_informer_factory_new(c);
    struct kite_informer_handlers h1 = {on_add, on_update, on_del, on_synced, &f}, h2 = {on_add, on_update, on_del, NULL, &g};
    struct kite_informer *a = kite_informer_factory_watch(fac, "/api/v1/pods", NULL, NULL, NULL, &h1);
    struct kite_informer *b = kite_informer_factory_watch(fac, "/api/v1/pods", NULL, NULL, NULL, &h2);
    cr_assert(a && a == b, "one informer for the collection");
    cr_assert_eq(kite_informer_factory_count(fac), 1);
    /* (on a factory never started: its list would take the fake's answers) */
    struct kite_informer_factory *other = kite_informer_factory_new(c);
    struct kite_informer *all = kite_informer_factory_watch(other, "/api/v1/pods", NULL, NULL, NULL, NULL);
    struct kite_informer *sel = kite_informer_factory_watch(other, "/api/v1/pods", "labelSelector=x", NULL, NULL, NULL);
    cr_assert(all && sel && sel != all);
    cr_assert_eq(kite_informer_factory_count(other), 2);
    kite_informer_factory_free(other);
    cr_assert_eq(kite_informer_factory_start(fac), 0);
    cr_assert_null(kite_informer_factory_watch(fac, "/api/v1/nodes", NULL, NULL, NULL, &h1), "no new informer once started");
    const char *want = "add:a@1 add:b@2 update:a@11 add:c@12 del:b@2 del:c@21";
    struct fake *both[] = {&f, &g};
    for (size_t i = 0; i < 2; i++) {
        fake_wait_seen(both[i], want, 0);
        cr_assert_str_eq(both[i]->seen, want, "handler set %zu", i);
    }
    json_object *got = kite_informer_get(a, "ns/a");
    cr_assert(got && kite_streq(kite_meta_str(got, "resourceVersion"), "11"));
    json_object_put(got);
    cr_assert_null(kite_informer_get(a, "ns/b"));
    size_t n = 0;
    char **keys = kite_informer_keys(a, &n);
    cr_assert_eq(n, 1);
    cr_assert_str_eq(keys[0], "ns/a");
    free(keys[0]);
    free(keys);
    kite_informer_factory_free(fac);
    cr_assert_eq(f.lists, 2, "one list (and one after the 410) for both handler sets");
    kite_client_free(c);
    fake_release(&f);
    fake_release(&g);
}

/* An informer that keeps only some members (kite_informer_options' project): the handlers and
 * the cache see the objects cut down, from the list and from watch events alike; an event whose
 * text the scan cannot follow (a member name written with an escape: the fake transport writes
 * events back to text, and "x\ny" keeps its escape) is parsed whole and cut
 * the same; a BOOKMARK still moves the resume point. */
#define LEASE(name, rv, t)                                                                                          \
    "{\"kind\":\"Lease\",\"metadata\":{\"name\":\"" name "\",\"namespace\":\"ns\",\"uid\":\"u-" name "\","          \
    "\"resourceVersion\":\"" rv "\",\"managedFields\":[{\"manager\":\"m\"}]},\"spec\":{\"holderIdentity\":\"" name \
    "\",\"renewTime\":\"" t "\"}}"

#define X40 "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
#define LONG_NAME X40 X40 X40 X40 X40 X40 X40 X40 X40 /* 360 bytes, cluster-scoped */

static int lease_list_h(void *ud, const char *method, const char *path, const char *ct, const char *body, size_t len,
                        struct kite_response *ret) {
    fake_listed(ud);
    ret->status = 200;
    ret->body = kite_strdup("{\"metadata\":{\"resourceVersion\":\"10\"},\"items\":[" LEASE("a", "1", "t1") "]}");
    return 0;
}

static int lease_watch_h(void *ud, const char *path, kite_watch_fn fn, void *fn_ud, struct kite_cancel *cancel) {
    int n = fake_watched(ud, path);
    if (n == 0) {
        int r = send(fn, fn_ud, "{\"type\":\"MODIFIED\",\"object\":" LEASE("a", "11", "t2") "}");
        if (r == 0)
            r = send(fn, fn_ud,
                     "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"x\\ny\":\"1\",\"name\":\"b\",\"namespace\":\"ns\","
                     "\"resourceVersion\":\"12\"},\"spec\":{\"renewTime\":\"t3\",\"holderIdentity\":\"b\"}}}");
        if (r == 0) /* a delete by the scan, with the final state; a name longer than a key kept on the stack */
            r = send(fn, fn_ud,
                     "{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"b\",\"namespace\":\"ns\","
                     "\"resourceVersion\":\"13\"},\"spec\":{\"renewTime\":\"t4\"}}}");
        if (r == 0)
            r = send(fn, fn_ud,
                     "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"" LONG_NAME "\",\"resourceVersion\":\"14\"},"
                     "\"spec\":{\"renewTime\":\"t5\"}}}");
        if (r == 0) r = send(fn, fn_ud, "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"15\"}}}");
        return r;
    }
    kite_cancel_wait(cancel, 30 * KITE_NS_PER_SEC);
    return -ECANCELED;
}

Test(informer, a_cut_down_informer_keeps_only_what_it_was_asked_for) {
    struct fake f;
    fake_init(&f);
    struct kite_client *c = kite_client_fake_new(lease_list_h, lease_watch_h, &f);
    static const char *const members[] = {"spec.renewTime", NULL};
    struct kite_informer_options o = {.client = c, .path = "/apis/coordination.k8s.io/v1/leases", .name = "test",
                                      .n_handlers = 1, .project = members};
    o.handlers[0] = (struct kite_informer_handlers){on_add, on_update, on_del, on_synced, &f};
    struct kite_informer *inf;
    cr_assert_eq(kite_informer_start(&o, &inf), 0);
    const char *want = "add:a@1 update:a@11 add:b@12 del:b@13 add:" LONG_NAME "@14";
    fake_wait_seen(&f, want, 2);
    cr_assert_str_eq(f.seen, want);
    const char *cut[] = {"ns/a", "{\"metadata\":{\"name\":\"a\",\"namespace\":\"ns\",\"resourceVersion\":\"11\"},"
                                 "\"spec\":{\"renewTime\":\"t2\"}}",
                         LONG_NAME, "{\"metadata\":{\"name\":\"" LONG_NAME "\",\"resourceVersion\":\"14\"},"
                                 "\"spec\":{\"renewTime\":\"t5\"}}"};
    cr_assert_null(kite_informer_get(inf, "ns/b"), "deleted");
    for (size_t k = 0; k < 4; k += 2) {
        json_object *got = kite_informer_get(inf, cut[k]), *w = json_tokener_parse(cut[k + 1]);
        cr_assert(json_object_equal(got, w), "%s: %s", cut[k], json_object_to_json_string(got));
        json_object_put(got);
        json_object_put(w);
    }
    kite_informer_stop(inf);
    cr_assert(strstr(f.paths[1], "resourceVersion=15&"), "resumed from the bookmark: %s", f.paths[1]);
    kite_client_free(c);
    fake_release(&f);
}

/* The list comes in pages (limit=KITE_INFORMER_PAGE and the continue token of the page before,
 * percent-encoded): one answer with every object could pass the client's body limit, and 92,000
 * Nodes did; the informer then listed again and again and never watched. This server refuses a
 * list without a limit, as that one failed. */
enum { PAGED_OBJECTS = 1234 };
struct paged {
    struct fake f;
    int pages;
    int fail_second; /* answer 500 to this many requests for a second page */
    char conts[4][64]; /* the continue values asked for, as sent */
};

static int paged_list_h(void *ud, const char *method, const char *path, const char *ct, const char *body, size_t len,
                        struct kite_response *ret) {
    struct paged *p = ud;
    const char *lim = strstr(path, "limit=");
    if (!lim) {
        ret->status = 500;
        ret->body = kite_strdup("{\"kind\":\"Status\",\"code\":500,\"message\":\"the answer is larger than the body limit\"}");
        return 0;
    }
    int limit = atoi(lim + 6), from = 0;
    const char *c = strstr(path, "continue=");
    pthread_mutex_lock(&p->f.mu);
    int n = p->pages++;
    if (n < 4) snprintf(p->conts[n], sizeof p->conts[n], "%s", c ? c + 9 : "");
    pthread_mutex_unlock(&p->f.mu);
    if (c) from = atoi(c + 9 + strlen("tok%2B%2F")); /* the token: "tok+/" and the next index */
    pthread_mutex_lock(&p->f.mu);
    bool fail = from == limit && p->fail_second > 0 && p->fail_second--;
    pthread_mutex_unlock(&p->f.mu);
    if (fail) {
        ret->status = 500;
        ret->body = kite_strdup("{\"kind\":\"Status\",\"code\":500,\"message\":\"a page failed\"}");
        return 0;
    }
    struct kite_buf b = {0};
    kite_buf_puts(&b, "{\"metadata\":{\"resourceVersion\":\"77\"");
    if (from + limit < PAGED_OBJECTS) kite_buf_printf(&b, ",\"continue\":\"tok+/%d\"", from + limit);
    kite_buf_puts(&b, "},\"items\":[");
    for (int i = from; i < from + limit && i < PAGED_OBJECTS; i++)
        kite_buf_printf(&b, "%s{\"metadata\":{\"name\":\"o%d\",\"namespace\":\"ns\",\"resourceVersion\":\"%d\"}}",
                        i > from ? "," : "", i, i + 1);
    kite_buf_puts(&b, "]}");
    ret->status = 200;
    ret->body = kite_buf_detach(&b, NULL);
    return 0;
}

static int paged_watch_h(void *ud, const char *path, kite_watch_fn fn, void *fn_ud, struct kite_cancel *cancel) {
    fake_watched(ud, path);
    kite_cancel_wait(cancel, 30 * KITE_NS_PER_SEC);
    return -ECANCELED;
}

static void count_add(void *ud, json_object *o) {
    struct fake *f = ud;
    pthread_mutex_lock(&f->mu);
    f->lists++; /* here: objects added */
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->mu);
}

Test(informer, lists_in_pages) {
    struct paged p = {0};
    fake_init(&p.f);
    struct kite_client *c = kite_client_fake_new(paged_list_h, paged_watch_h, &p);
    struct kite_informer_options o = {.client = c, .path = "/api/v1/nodes", .name = "paged", .n_handlers = 1};
    o.handlers[0] = (struct kite_informer_handlers){count_add, NULL, NULL, NULL, &p.f};
    struct kite_informer *inf;
    cr_assert_eq(kite_informer_start(&o, &inf), 0);
    struct timespec ts;
    kite_cond_deadline(&ts, 10 * KITE_NS_PER_SEC);
    pthread_mutex_lock(&p.f.mu);
    while (p.f.watches < 1 && pthread_cond_timedwait(&p.f.cond, &p.f.mu, &ts) == 0) {}
    pthread_mutex_unlock(&p.f.mu);
    cr_assert(kite_informer_synced(inf), "never listed");
    kite_informer_stop(inf);
    cr_assert_eq(p.f.lists, PAGED_OBJECTS, "every page's objects: %d", p.f.lists);
    int want_pages = (PAGED_OBJECTS + KITE_INFORMER_PAGE - 1) / KITE_INFORMER_PAGE;
    cr_assert_eq(p.pages, want_pages);
    cr_assert_str_eq(p.conts[0], "");
    cr_assert_str_eq(p.conts[1], "tok%2B%2F500", "the token percent-encoded: %s", p.conts[1]);
    cr_assert(strstr(p.f.paths[0], "resourceVersion=77&"), "the watch from the snapshot's revision: %s", p.f.paths[0]);
    kite_client_free(c);
    fake_release(&p.f);
}

/* A page that fails drops what the pages before it read (nothing is delivered from a list that
 * did not finish) and the list starts over after the back-off, twice here: the objects then
 * arrive once each, with one sync. */
static void count_synced(void *ud) {
    struct fake *f = ud;
    pthread_mutex_lock(&f->mu);
    f->synced++;
    pthread_mutex_unlock(&f->mu);
}

Test(informer, a_failed_page_starts_the_list_over, .timeout = 30) {
    struct paged p = {.fail_second = 2};
    fake_init(&p.f);
    struct kite_client *c = kite_client_fake_new(paged_list_h, paged_watch_h, &p);
    struct kite_informer_options o = {.client = c, .path = "/api/v1/nodes", .name = "paged", .n_handlers = 1};
    o.handlers[0] = (struct kite_informer_handlers){count_add, NULL, NULL, count_synced, &p.f};
    struct kite_informer *inf;
    cr_assert_eq(kite_informer_start(&o, &inf), 0);
    struct timespec ts;
    kite_cond_deadline(&ts, 20 * KITE_NS_PER_SEC);
    pthread_mutex_lock(&p.f.mu);
    while (p.f.watches < 1 && pthread_cond_timedwait(&p.f.cond, &p.f.mu, &ts) == 0) {}
    pthread_mutex_unlock(&p.f.mu);
    kite_informer_stop(inf);
    cr_assert_eq(p.fail_second, 0);
    cr_assert_eq(p.f.lists, PAGED_OBJECTS, "each object once: %d", p.f.lists);
    cr_assert_eq(p.f.synced, 1);
    int want_pages = (PAGED_OBJECTS + KITE_INFORMER_PAGE - 1) / KITE_INFORMER_PAGE;
    cr_assert_eq(p.pages, 2 * 2 + want_pages, "two lists cut at their second page, then a whole one: %d", p.pages);
    kite_client_free(c);
    fake_release(&p.f);
}

/* ---- watch-list (kite_informer_options' watch_list) ---- */

#define INITIAL_END(rv)                                                                                             \
    "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"" rv \
    "\",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}}}}"

static int no_list_h(void *ud, const char *method, const char *path, const char *ct, const char *body, size_t len,
                     struct kite_response *ret) {
    fake_listed(ud);
    ret->status = 500;
    ret->body = kite_strdup("{}");
    return 0;
}

/* What the handlers have seen so far (a copy). */
static char *seen_now(struct fake *f) {
    pthread_mutex_lock(&f->mu);
    char *s = kite_strdup(f->seen);
    pthread_mutex_unlock(&f->mu);
    return s;
}

static int watch_list_h(void *ud, const char *path, kite_watch_fn fn, void *fn_ud, struct kite_cancel *cancel) {
    struct fake *f = ud;
    int n = fake_watched(f, path), r = 0;
    if (n == 0 || n == 2) {
        /* the state as ADDED events: nothing reaches the handlers before the end bookmark */
        r = send(fn, fn_ud, n == 0 ? "{\"type\":\"ADDED\",\"object\":" OBJ("a", "1") "}"
                                   : "{\"type\":\"ADDED\",\"object\":" OBJ("a", "11") "}");
        if (r == 0)
            r = send(fn, fn_ud, n == 0 ? "{\"type\":\"ADDED\",\"object\":" OBJ("b", "2") "}"
                                       : "{\"type\":\"ADDED\",\"object\":" OBJ("c", "12") "}");
        if (r == 0) r = send(fn, fn_ud, "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"9\"}}}");
        _cleanup_free_ char *before = seen_now(f);
        cr_assert_str_eq(before, n == 0 ? "" : "add:a@1 add:b@2 update:a@11");
        if (r == 0) r = send(fn, fn_ud, n == 0 ? INITIAL_END("10") : INITIAL_END("20"));
        if (r < 0 || n == 2) goto quiet;
        /* then the changes after that state, on the same stream */
        r = send(fn, fn_ud, "{\"type\":\"MODIFIED\",\"object\":" OBJ("a", "11") "}");
        return r; /* the server ends the stream: resumed from 11 */
    }
    if (n == 1)
        return send(fn, fn_ud, "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410,\"reason\":\"Expired\"}}");
quiet:
    if (r < 0) return r;
    kite_cancel_wait(cancel, 30 * KITE_NS_PER_SEC);
    return -ECANCELED;
}

/* The list is the watch's start: the initial events are delivered as a list's would be (adds,
 * then the sync) at the bookmark that ends them, and the changes after follow on the same stream;
 * a watch that ends resumes from its last revision, and a 410 starts a watch-list again, whose
 * state is delivered as the difference. No list is made. Whole objects, and cut-down ones (the
 * bookmark's annotation is read before the cut). */
static void lists_through_the_watch(const char *const *project) {
    struct fake f;
    fake_init(&f);
    struct kite_client *c = kite_client_fake_new(no_list_h, watch_list_h, &f);
    struct kite_informer_options o = {.client = c, .path = "/api/v1/pods", .name = "test", .n_handlers = 1,
                                      .project = project, .watch_list = true};
    o.handlers[0] = (struct kite_informer_handlers){on_add, on_update, on_del, on_synced, &f};
    struct kite_informer *inf;
    cr_assert_eq(kite_informer_start(&o, &inf), 0);
    const char *want = "add:a@1 add:b@2 update:a@11 add:c@12 del:b@2";
    fake_wait_seen(&f, want, 3);
    cr_assert(kite_informer_synced(inf));
    kite_informer_stop(inf);
    cr_assert_str_eq(f.seen, want);
    cr_assert_eq(f.lists, 0);
    cr_assert_eq(f.synced, 2);
    for (int i = 0; i < 3; i += 2) {
        cr_assert(strstr(f.paths[i], "watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"),
                  "%s", f.paths[i]);
        cr_assert_null(strstr(f.paths[i], "resourceVersion="), "the current state: %s", f.paths[i]);
    }
    cr_assert(strstr(f.paths[1], "resourceVersion=11&"), "resumed after the last change: %s", f.paths[1]);
    cr_assert_null(strstr(f.paths[1], "sendInitialEvents"), "%s", f.paths[1]);
    kite_client_free(c);
    fake_release(&f);
}

Test(informer, lists_through_the_watch) { lists_through_the_watch(NULL); }

Test(informer, a_cut_down_informer_lists_through_the_watch) {
    static const char *const members[] = {"spec.renewTime", NULL};
    lists_through_the_watch(members);
}

/* A server that refuses a watch-list (400), or ends it before the initial events do: what it
 * sent is not delivered, and the informer lists in pages from then on. */
static int refusing_watch_h(void *ud, const char *path, kite_watch_fn fn, void *fn_ud, struct kite_cancel *cancel) {
    struct fake *f = ud;
    int n = fake_watched(f, path);
    if (n == 0 && f->refuse) return -EINVAL;
    if (n == 0) return send(fn, fn_ud, "{\"type\":\"ADDED\",\"object\":" OBJ("z", "5") "}"); /* then ends */
    kite_cancel_wait(cancel, 30 * KITE_NS_PER_SEC);
    return -ECANCELED;
}

static void falls_back_to_the_list(bool refused) {
    struct fake f;
    fake_init(&f);
    f.refuse = refused;
    struct kite_client *c = kite_client_fake_new(list_h, refusing_watch_h, &f);
    struct kite_informer_options o = {.client = c, .path = "/api/v1/pods", .name = "test", .n_handlers = 1,
                                      .watch_list = true};
    o.handlers[0] = (struct kite_informer_handlers){on_add, on_update, on_del, NULL, &f};
    struct kite_informer *inf;
    cr_assert_eq(kite_informer_start(&o, &inf), 0);
    fake_wait_seen(&f, "add:a@1 add:b@2", 2);
    kite_informer_stop(inf);
    cr_assert_str_eq(f.seen, "add:a@1 add:b@2", "nothing of the cut watch-list: %s", f.seen);
    cr_assert_eq(f.lists, 1);
    cr_assert(strstr(f.paths[0], "sendInitialEvents=true"), "%s", f.paths[0]);
    cr_assert(strstr(f.paths[1], "resourceVersion=10&"), "watched from the list: %s", f.paths[1]);
    kite_client_free(c);
    fake_release(&f);
}

Test(informer, a_refused_watch_list_falls_back_to_the_list, .timeout = 20) { falls_back_to_the_list(true); }

Test(informer, a_watch_list_cut_short_falls_back_to_the_list, .timeout = 20) { falls_back_to_the_list(false); }
