/* Helpers shared by every runtime backend. */
#include "agent/runtime/runtime.h"

#include "base/base.h"

void kite_images_free(struct kite_image *v, size_t n) {
    if (!v) return;
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < v[i].n_names; j++) free(v[i].names[j]);
        free(v[i].names);
    }
    free(v);
}

struct kite_image *kite_images_dup(const struct kite_image *v, size_t n) {
    if (!n) return NULL;
    struct kite_image *out = kite_calloc(n, sizeof(*out));
    for (size_t i = 0; i < n; i++) {
        out[i].size_bytes = v[i].size_bytes;
        out[i].n_names = v[i].n_names;
        if (v[i].n_names) out[i].names = kite_calloc(v[i].n_names, sizeof(char *));
        for (size_t j = 0; j < v[i].n_names; j++) out[i].names[j] = kite_strdup(v[i].names[j]);
    }
    return out;
}

void kite_runtime_free(struct kite_runtime *rt) {
    if (rt && rt->ops && rt->ops->free) rt->ops->free(rt);
}
