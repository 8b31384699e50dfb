/* Shared informers (factory.h). */
#include "client/factory.h"

#include <stdio.h>

struct entry {
    char *path, *selector;
    const char *const *project;
    kite_informer_transform transform;
    struct kite_informer *inf;
};

struct kite_informer_factory {
    struct kite_client *client;
    struct entry e[KITE_FACTORY_MAX_INFORMERS];
    size_t n;
    bool started, watch_list;
};

struct kite_informer_factory *kite_informer_factory_new(struct kite_client *client) {
    struct kite_informer_factory *f = kite_calloc(1, sizeof *f);
    f->client = client;
    return f;
}

/* "inf-" and the collection's last path segment, as a thread name */
static void thread_name(const char *path, char out[16]) {
    const char *slash = strrchr(path, '/');
    snprintf(out, 16, "inf-%s", slash ? slash + 1 : path);
}

struct kite_informer *kite_informer_factory_watch(struct kite_informer_factory *f, const char *path,
                                                  const char *selector, const char *const *project,
                                                  kite_informer_transform transform,
                                                  const struct kite_informer_handlers *h) {
    if (f->started) return NULL;
    struct entry *e = NULL;
    for (size_t i = 0; i < f->n && !e; i++)
        if (kite_streq(f->e[i].path, path) && kite_streq(f->e[i].selector ? f->e[i].selector : "", selector ? selector : "") &&
            f->e[i].project == project && f->e[i].transform == transform)
            e = &f->e[i];
    if (!e) {
        if (f->n == KITE_FACTORY_MAX_INFORMERS) return NULL;
        e = &f->e[f->n++];
        char name[16];
        thread_name(path, name);
        struct kite_informer_options o = {.client = f->client, .path = path, .selector = selector, .name = name,
                                          .project = project, .transform = transform, .watch_list = f->watch_list};
        e->path = kite_strdup(path);
        e->selector = selector ? kite_strdup(selector) : NULL;
        e->project = project;
        e->transform = transform;
        e->inf = kite_informer_new(&o);
    }
    return h && kite_informer_add_handlers(e->inf, h) < 0 ? NULL : e->inf;
}

void kite_informer_factory_set_watch_list(struct kite_informer_factory *f, bool on) { f->watch_list = on; }

int kite_informer_factory_start(struct kite_informer_factory *f) {
    f->started = true;
    for (size_t i = 0; i < f->n; i++) {
        int r = kite_informer_run(f->e[i].inf);
        if (r < 0) return r;
    }
    return 0;
}

void kite_informer_factory_halt(struct kite_informer_factory *f) {
    for (size_t i = 0; i < f->n; i++) kite_informer_halt(f->e[i].inf);
}

void kite_informer_factory_free(struct kite_informer_factory *f) {
    if (!f) return;
    kite_informer_factory_halt(f);
    for (size_t i = 0; i < f->n; i++) {
        kite_informer_stop(f->e[i].inf);
        free(f->e[i].path);
        free(f->e[i].selector);
    }
    free(f);
}

size_t kite_informer_factory_count(const struct kite_informer_factory *f) { return f->n; }
const char *kite_informer_factory_path(const struct kite_informer_factory *f, size_t i) { return i < f->n ? f->e[i].path : NULL; }
