/* The fake runtime: a version string and a settable image list, for tests of everything above
 * the runtime interface. */
#include "agent/runtime/runtime.h"

#include "base/base.h"

struct fake_runtime {
    struct kite_runtime rt; /* first: the public handle */
    char *version;
    struct kite_image *images;
    size_t n_images;
    int err;
};

static struct fake_runtime *fake_of(struct kite_runtime *rt) { return (struct fake_runtime *)rt; }

static int fake_version(struct kite_runtime *rt, char **ret_name, char **ret_version) {
    struct fake_runtime *f = fake_of(rt);
    if (f->err) return f->err;
    *ret_name = kite_strdup("fake");
    *ret_version = kite_strdup(f->version);
    return 0;
}

static int fake_list_images(struct kite_runtime *rt, struct kite_image **ret, size_t *ret_n) {
    struct fake_runtime *f = fake_of(rt);
    if (f->err) return f->err;
    *ret = kite_images_dup(f->images, f->n_images);
    *ret_n = f->n_images;
    return 0;
}

static void fake_free(struct kite_runtime *rt) {
    struct fake_runtime *f = fake_of(rt);
    kite_images_free(f->images, f->n_images);
    free(f->version);
    free(f);
}

static const struct kite_runtime_ops fake_ops = {
    .name = "fake",
    .version = fake_version,
    .list_images = fake_list_images,
    .free = fake_free,
};

struct kite_runtime *kite_runtime_fake_new(const char *version) {
    struct fake_runtime *f = kite_calloc(1, sizeof(*f));
    f->rt.ops = &fake_ops;
    f->version = kite_strdup(version ? version : "0.0.0");
    return &f->rt;
}

void kite_runtime_fake_set_images(struct kite_runtime *rt, const struct kite_image *v, size_t n) {
    struct fake_runtime *f = fake_of(rt);
    kite_images_free(f->images, f->n_images);
    f->images = kite_images_dup(v, n);
    f->n_images = n;
}

void kite_runtime_fake_set_error(struct kite_runtime *rt, int err) { fake_of(rt)->err = err; }
